"""The GPU worker's setup script, run in bash the way KubeRay v1.7.0 runs it, and the RayCluster
update rules.

KubeRay v1.7.0 (ray-operator/controllers/ray/common/pod.go, BuildPod) runs a worker container as
``/bin/bash -c -- "<args> && ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start ..."``;
these tests run exactly that shape with a fake `ray` that records it was started and with what
environment.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.ray_cluster_updates import (
    replacement_message,
    replacement_options,
    upgrade_strategy,
    worker_setup_script,
)


def _run_worker(tmp_path: Path, script_body: str | None, *, fallback_exists: bool = True,
                multi_node: bool = True, tuner_from_script: str | None = None):
    gib = tmp_path / "gib"
    (gib / "scripts").mkdir(parents=True)
    (gib / "configs").mkdir()
    fallback = gib / "configs" / "tuner_config_a3u.txtpb"
    if fallback_exists:
        fallback.write_text("tuner")
    set_env = gib / "scripts" / "set_nccl_env.sh"
    if script_body is not None:
        set_env.write_text(script_body)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "ray-started"
    fake_ray = bin_dir / "ray"
    fake_ray.write_text(f"#!/bin/bash\nenv > {started}\n")
    fake_ray.chmod(0o755)
    args = worker_setup_script(str(set_env), str(fallback), multi_node=multi_node,
                               tries=2, sleep_seconds=0)
    # KubeRay's composition (pod.go): fmt.Sprintf("%s && %s", cmd, "ulimit ...; ray start ...")
    command = f"{args} && ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; ray start --address=head:6379 --block"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "NCCL_TUNER_CONFIG_PATH": "/from/the/pod/env"}
    proc = subprocess.run(["/bin/bash", "-c", "--", command], env=env, capture_output=True,
                          text=True, timeout=60)
    ray_env = None
    if started.exists():
        ray_env = dict(line.split("=", 1) for line in started.read_text().splitlines() if "=" in line)
    return proc, ray_env, fallback


def test_without_the_gib_plugin_the_worker_fails_and_never_starts_ray(tmp_path):
    proc, ray_env, _ = _run_worker(tmp_path, None)
    assert proc.returncode == 1
    assert ray_env is None
    assert "did not appear" in proc.stderr and "not starting Ray without RDMA" in proc.stderr


def test_a_failing_set_nccl_env_script_fails_the_worker(tmp_path):
    proc, ray_env, _ = _run_worker(tmp_path, "return 3\n")
    assert proc.returncode == 1 and ray_env is None
    assert "failed: not starting Ray without RDMA" in proc.stderr


def test_multi_node_forces_gib_and_keeps_the_scripts_tuner(tmp_path):
    own = tmp_path / "google-tuner.txtpb"
    own.write_text("x")
    script = f"export NCCL_NET=Socket\nexport NCCL_TUNER_CONFIG_PATH={own}\nexport NCCL_CROSS_NIC=0\n"
    proc, ray_env, _ = _run_worker(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert ray_env["NCCL_NET"] == "gIB"                    # forced, whatever the script said
    assert ray_env["NCCL_TUNER_CONFIG_PATH"] == str(own)   # the script's tuner is kept
    assert ray_env["NCCL_CROSS_NIC"] == "0"                # the script's own settings reach Ray


def test_tuner_falls_back_to_the_gpus_file_when_the_script_leaves_it_unset(tmp_path):
    proc, ray_env, fallback = _run_worker(tmp_path, "export NCCL_CROSS_NIC=0\n")
    assert proc.returncode == 0, proc.stderr
    # not the pod env's value: the script's (unset) or this GPU's file
    assert ray_env["NCCL_TUNER_CONFIG_PATH"] == str(fallback)


def test_a_missing_tuner_file_fails_the_worker(tmp_path):
    proc, ray_env, _ = _run_worker(tmp_path, "true\n", fallback_exists=False)
    assert proc.returncode == 1 and ray_env is None
    assert "tuner file" in proc.stderr and "does not exist" in proc.stderr


def test_single_node_does_not_force_the_network_plugin(tmp_path):
    proc, ray_env, _ = _run_worker(tmp_path, "true\n", multi_node=False)
    assert proc.returncode == 0, proc.stderr
    assert "NCCL_NET" not in ray_env


@pytest.mark.parametrize("operator,version,recreate", [
    ("helm", "1.7.0", True), ("helm", "1.6.0", True), ("helm", "1.5.1", False),
    ("addon", None, False)])
def test_recreate_only_with_kuberay_1_6_from_helm(operator, version, recreate):
    assert (upgrade_strategy(operator, version) == {"type": "Recreate"}) is recreate
    options = replacement_options(operator, version)
    if recreate:
        assert options == {} and replacement_message(operator, version, "grpo") is None
    else:
        # autoscalerOptions too: KubeRay renders them into the head pod (its autoscaler sidecar;
        # ray-operator/controllers/ray/common/pod.go mergeAutoscalerOverrides @v1.7.0).
        assert options == {"replace_on_changes": ["spec.headGroupSpec.template", "spec.workerGroupSpecs",
                                                  "spec.autoscalerOptions"],
                           "delete_before_replace": True}
        assert "REPLACES the RayCluster" in replacement_message(operator, version, "grpo")
