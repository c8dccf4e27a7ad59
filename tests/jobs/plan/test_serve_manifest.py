"""The vLLM server's manifest (jobs/plan/serve_manifest.py) rendered from the RayClusters the
program registers for both stacks (the golden previews' inputs), validated with
kubernetes-validate in strict mode; and the pod's first command (jobs/head/serve_check.py) on
complete, incomplete and missing exports."""

from __future__ import annotations

import json

import pytest

from jobs.contract.exports import EXPORT_MARKER, export_dir
from jobs.head import serve_check
from jobs.plan.serve_manifest import (
    ServeRequest,
    container_script,
    serve_manifests,
    serve_name,
    serve_tensor_parallel_size,
)
from tests.conftest import ROOT
from tests.jobs.head.test_evaluate import complete_export
from tests.jobs.head.test_export import hf_files
from tests.kubernetes_objects import validate_strict

RUN = "exp-12345678"


def ray_cluster_spec(stack: str) -> tuple[dict, str]:
    golden = json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text())
    cluster = next(r for r in golden["resources"] if r["type"] == "kubernetes:ray.io/v1:RayCluster")
    minor = next(r for r in golden["resources"] if r["type"] == "gcp:container/cluster:Cluster")
    return cluster["inputs"]["spec"], minor["inputs"]["minMasterVersion"]


def request(**changes) -> ServeRequest:
    fields = {"run_id": RUN, "step": None, "namespace": "grpo", "image": "verlai/verl:vllm017.dev2",
              "framework": "verl", "gpus": 8, "tensor_parallel_size": 4, "max_model_len": 1536}
    fields.update(changes)
    return ServeRequest(**fields)


@pytest.mark.parametrize(("stack", "framework"), [("dev", "verl"), ("prod", "nemo-rl")])
def test_the_manifest_is_valid_and_lands_where_the_workers_land(stack, framework):
    spec, minor = ray_cluster_spec(stack)
    worker = spec["workerGroupSpecs"][0]["template"]
    deployment, service = serve_manifests(spec, request(framework=framework, step=20))
    for manifest in (deployment, service):
        validate_strict(manifest, minor)
    pod = deployment["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == worker["spec"]["nodeSelector"]
    assert pod["spec"]["tolerations"] == worker["spec"].get("tolerations", [])
    assert pod["spec"]["serviceAccountName"] == worker["spec"]["serviceAccountName"]
    # No RDMA NICs for one server; the storage's own annotations (gcsfuse sidecar) stay.
    assert not any(k.startswith("networking.gke.io/") for k in pod["metadata"]["annotations"])
    assert {k: v for k, v in worker["metadata"]["annotations"].items()
            if k.startswith("gke-gcsfuse/")}.items() <= pod["metadata"]["annotations"].items()
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/data", "/opt/gke-grpo/code"}
    assert any(e["name"] == "PYTHONPATH" for e in container["env"])
    script = container["command"][2]
    assert "python3 -m jobs.head.serve_check --run-id exp-12345678 --exports-root /data/exports --step 20" in script
    assert "--dtype bfloat16 --generation-config vllm --tensor-parallel-size 4" in script
    assert "--served-model-name exp-12345678" in script and "--port 8000" in script
    vllm = "/opt/ray_venvs/nemo_rl.models.generation.vllm.vllm_worker.VllmGenerationWorker/bin/vllm" \
        if framework == "nemo-rl" else "vllm"
    assert f'exec {vllm} serve "$MODEL_DIR"' in script
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == serve_name(RUN)


def test_the_script_runs_the_check_first(tmp_path):
    import subprocess

    script = container_script(request())
    # bash parses it; the check's failure stops it before vLLM (set -e in a command substitution).
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    fake = script.replace("python3 -m jobs.head.serve_check", "false #").replace("exec vllm", "echo SERVED")
    done = subprocess.run(["bash", "-c", fake], capture_output=True, text=True)
    assert done.returncode != 0 and "SERVED" not in done.stdout


@pytest.mark.parametrize(("heads", "kv", "gpus", "tp"), [(28, 4, 8, 4), (40, 8, 8, 8), (14, 2, 8, 2),
                                                         (28, 4, 1, 1), (None, None, 8, 1)])
def test_the_largest_tensor_parallel_size_vllm_accepts(heads, kv, gpus, tp):
    assert serve_tensor_parallel_size(heads, kv, gpus) == tp


def test_serve_check_finds_the_newest_complete_export(tmp_path, capsys):
    complete_export(tmp_path, 10)
    complete_export(tmp_path, 30)
    hf_files(export_dir(RUN, 40, tmp_path / "exports"))     # half-written: no marker
    root = str(tmp_path / "exports")
    assert serve_check.main(["--run-id", RUN, "--exports-root", root]) == 0
    assert capsys.readouterr().out.strip() == str(export_dir(RUN, 30, tmp_path / "exports"))
    assert serve_check.main(["--run-id", RUN, "--exports-root", root, "--step", "40"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot serve step 40" in err and f"no {EXPORT_MARKER}" in err
    assert serve_check.main(["--run-id", "nope-1", "--exports-root", root]) == 2
    assert "run nope-1 has no exports" in capsys.readouterr().err
