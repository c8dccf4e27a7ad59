"""gke-grpo:job.healthGate, the plan the run driver gets from it (components/health_gate.py) and
the GPU health init container of every GPU worker (components/gpu_health.py), validated in the
RayCluster the way the API server and KubeRay's CRD would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from components import gpu_health, ray_pods
from components.config import ConfigError, load_stack_config
from components.health_gate import health_gate_warning, health_plan
from jobs.contract.health import GIB, MIB, HealthPlan
from jobs.plan.health_thresholds import load_health_gates
from tests.conftest import ROOT, preview_with, stack_config
from tests.crd_schemas import validate_custom_resource
from tests.kubernetes_objects import validate_strict

P = "gke-grpo:"
RUN_DIR = "/data/runs/exp-12345678"


def _config(stack, changes=None):
    return load_stack_config(*stack_config(stack, changes))


# ---- config -------------------------------------------------------------------------------------

def test_default_gate_enforces_with_sourced_thresholds():
    config = _config("dev")
    assert config.job.health_gate.mode == "enforce"
    assert health_gate_warning(config) is None


def test_off_is_allowed_and_warned_about():
    config = _config("dev", {P + "job.healthGate": "off"})
    assert config.job.health_gate.mode == "off"
    assert "healthGate is off" in health_gate_warning(config)
    assert "report" in health_gate_warning(_config("dev", {P + "job.healthGate": {"mode": "warn"}}))


@pytest.mark.parametrize("gate, key, match", [
    ("of", "job.healthGate", '"off" or an object'),
    ({"mode": "sometimes"}, "job.healthGate.mode", "'enforce', 'warn' or 'off'"),
    ({"messageSizesMib": [0, 1024]}, "job.healthGate.messageSizesMib", "1 to 16384 MiB"),
    ({"messageSizesMib": []}, "job.healthGate.messageSizesMib", "at least one"),
    ({"collectives": ["broadcast"]}, "job.healthGate.collectives[0]", "all_gather"),
    ({"collectives": []}, "job.healthGate.collectives", "at least one"),
    ({"publishedFraction": 1.5}, "job.healthGate.publishedFraction", "less than or equal to 1"),
    ({"minBusBandwidthGbps": 0}, "job.healthGate.minBusBandwidthGbps", "greater than 0"),
    ({"iterations": 0}, "job.healthGate.iterations", "greater than or equal to 1"),
    ({"storageProbeGb": 8}, "job.healthGate.storageProbeGb", "unknown key"),
])
def test_bad_gate_config_names_its_key(gate, key, match):
    with pytest.raises(ConfigError, match=match) as err:
        _config("dev", {P + "job.healthGate": gate})
    assert {p.key for p in err.value.problems} == {P + key}


# ---- the plan ---------------------------------------------------------------------------------------

def test_dev_plan_h200_all_gather_figure_and_gcsfuse_expectations():
    config = _config("dev")
    plan = health_plan(config, RUN_DIR)
    json.dumps(plan)                                           # the run plan is JSON
    parsed = HealthPlan.from_dict({"health": plan})
    gates = load_health_gates()
    assert parsed.machine_type == "a3-ultragpu-8g" and parsed.backend == "nccl"
    assert parsed.sizes_bytes == (1 * GIB, 2 * GIB, 4 * GIB, 8 * GIB)
    assert parsed.min_average_busbw_gbps == 100.0 and parsed.published_fraction == 0.75
    assert [(f.collective, f.busbw_gbps) for f in parsed.published] == [("all_gather", 325.72)]
    storage = parsed.storage
    assert storage.kind == "gcs" and storage.directory == f"{RUN_DIR}/health-probe"
    assert storage.size_bytes == 8 * GIB and storage.streams == gates.gcsfuse_streams
    assert (storage.expected_write_gbps, storage.expected_read_gbps) == (
        gates.gcsfuse_write_gbps, gates.gcsfuse_read_gbps)
    assert "gcsfuse" in storage.expected_source and "file cache" in storage.expected_source


def test_prod_plan_b200_all_reduce_figure_and_lustre_tier_times_capacity():
    config = _config("prod")
    parsed = HealthPlan.from_dict(health_plan(config, RUN_DIR))
    assert parsed.machine_type == "a4-highgpu-8g"
    assert [(f.collective, f.busbw_gbps) for f in parsed.published] == [("all_reduce", 683.52)]
    lustre = config.storage.lustre
    expected = lustre.throughput_tier * lustre.capacity_gib / 1024 / 1000
    assert parsed.storage.kind == "lustre"
    assert parsed.storage.expected_write_gbps == pytest.approx(expected)
    assert f"tier {lustre.throughput_tier} MB/s per TiB x {lustre.capacity_gib} GiB" in parsed.storage.expected_source


def test_configured_thresholds_override_the_data_file_and_say_so():
    config = _config("dev", {P + "job.healthGate": {
        "minBusBandwidthGbps": 150, "publishedFraction": 0.9, "messageSizesMib": [512],
        "collectives": ["all_reduce"], "storageProbeGib": 0, "mode": "warn"}})
    parsed = HealthPlan.from_dict(health_plan(config, RUN_DIR))
    assert (parsed.mode, parsed.min_average_busbw_gbps, parsed.published_fraction) == ("warn", 150.0, 0.9)
    assert parsed.sizes_bytes == (512 * MIB,) and parsed.collectives == ("all_reduce",)
    assert parsed.storage is None
    assert parsed.sources["min_average_busbw_gbps"] == "gke-grpo:job.healthGate.minBusBandwidthGbps"


# ---- GPU health init container --------------------------------------------------------------------

def _worker_template(result):
    [cluster] = [r for r in result.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    return cluster.inputs, cluster.inputs["spec"]["workerGroupSpecs"][0]["template"]


def test_every_gpu_worker_checks_its_gpus_before_ray_start(stack_preview):
    config = _config(stack_preview.stack)
    manifest, template = _worker_template(stack_preview)
    pod = template["spec"]
    init = pod["initContainers"][0]
    ray_container = pod["containers"][0]
    assert init["name"] == "gpu-health" and init["image"] == ray_container["image"]
    assert init["command"][:2] == ["/bin/bash", "-c"]
    assert f"[ \"$count\" -eq {config.gpus_per_node} ]" in init["command"][2]
    assert "ecc.errors.uncorrected.volatile.total" in init["command"][2]
    gpus = str(config.gpus_per_node)
    assert init["resources"]["limits"]["nvidia.com/gpu"] == gpus == init["resources"]["requests"]["nvidia.com/gpu"]
    assert init["volumeMounts"] == [{"name": "nvidia", "mountPath": ray_pods.NVIDIA_MOUNT, "readOnly": True}]
    assert gpu_health.NVIDIA_MOUNT == ray_pods.NVIDIA_MOUNT
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert "privileged" not in init["securityContext"]
    # a failed check fails the pod (KubeRay replaces it) instead of restarting in place
    assert pod["restartPolicy"] == "Never"
    assert {"name": "GKE_GRPO_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} \
        in ray_container["env"]
    # what the API server and KubeRay's CRD accept
    validate_custom_resource(manifest)
    validate_strict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"}, "spec": pod},
                    config.kubernetes_minor)


def test_gate_off_still_checks_gpus_and_previews():
    result = preview_with("dev", {P + "job.healthGate": "off"})
    assert result.error is None, result.error
    _, template = _worker_template(result)
    assert template["spec"]["initContainers"][0]["name"] == "gpu-health"


# The check script, run by bash against a driver directory whose nvidia-smi prints what
# nvidia-smi prints for the query. The format is the real one: tests/jobs/fixtures/nccl/
# nvidia-smi-h200-query.txt was printed by nvidia-smi (driver 580.159.04) on an H200, where the
# script itself passed with 1 expected GPU, failed with 8, and passed as user 65534 and with
# every capability dropped (2026-12-01).
REAL_QUERY = (ROOT / "tests/jobs/fixtures/nccl/nvidia-smi-h200-query.txt").read_text().splitlines()
def _driver(tmp_path: Path, lines: list[str], libraries=("libcuda.so.1", "libnvidia-ml.so.1")) -> Path:
    root = tmp_path / "nvidia"
    (root / "bin").mkdir(parents=True)
    (root / "lib64").mkdir()
    for lib in libraries:
        (root / "lib64" / lib).write_text("")
    smi = root / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat <<'OUT'\n" + "\n".join(lines) + "\nOUT\n")
    smi.chmod(0o755)
    return root


def _run(root: Path, tmp_path: Path, expected: int):
    log = tmp_path / "termination-log"
    proc = subprocess.run(["bash", "-c", gpu_health.check_script(expected, str(root), str(log))],
                          capture_output=True, text=True, timeout=30)
    return proc, (log.read_text() if log.exists() else "")


HEALTHY = [f"{i}, GPU-{i}a1b2c3d4-0000-0000-0000-00000000000{i}, 0" for i in range(8)]


def test_check_passes_on_what_a_real_h200_printed(tmp_path):
    proc, _ = _run(_driver(tmp_path, REAL_QUERY), tmp_path, 1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "gpu-health: 1 GPUs visible, no uncorrected ECC errors\n"


def test_check_passes_eight_healthy_gpus(tmp_path):
    proc, log = _run(_driver(tmp_path, HEALTHY), tmp_path, 8)
    assert proc.returncode == 0 and proc.stdout == "gpu-health: 8 GPUs visible, no uncorrected ECC errors\n"
    assert log == ""


@pytest.mark.parametrize("lines, expected, reason", [
    (HEALTHY[:7], 8, "gpu-health: expected 8 GPUs, nvidia-smi sees 7"),
    ([*HEALTHY[:7], "7, GPU-7, 2"], 8, "GPU 7 (GPU-7) 2 uncorrected ECC errors;"),
    ([*HEALTHY[:7], "7, GPU-7, [N/A]"], 8, "GPU 7 (GPU-7) uncorrected ECC [N/A];"),
])
def test_check_fails_with_a_one_line_reason(tmp_path, lines, expected, reason):
    proc, log = _run(_driver(tmp_path, lines), tmp_path, expected)
    assert proc.returncode == 1
    assert reason in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert log.strip() == proc.stderr.strip()


def test_check_fails_without_driver_libraries(tmp_path):
    proc, _ = _run(_driver(tmp_path, HEALTHY, libraries=("libcuda.so.1",)), tmp_path, 8)
    assert proc.returncode == 1 and "libnvidia-ml.so is missing" in proc.stderr
    proc, _ = _run(tmp_path / "nowhere", tmp_path, 8)
    assert proc.returncode == 1 and "nvidia-smi is missing" in proc.stderr
