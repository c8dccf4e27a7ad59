"""Copy a run's directory (/data/runs/<run-id>: timeline and TensorBoard files) from the Ray head
pod to this machine, for `status`, `plot` and `report --fetch`:

    fetch_run_dir(namespace, ray_cluster, run_id, dest) -> dest

`kubectl cp` out of the head's ``ray-head`` container (components/kuberay.py names it; on Cloud
Storage the pod also runs the gcsfuse sidecar, so the container is named). The head pod is found
by the labels KubeRay puts on its pods (``ray.io/cluster``, ``ray.io/node-type=head``). Works the
same on both storage kinds; on Cloud Storage, ``gcloud storage rsync`` of the bucket's
``runs/<run-id>`` does the same without the cluster. Bounded in time; a failure is a clear error.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from jobs.cli.kubectl import KubectlFailed, run_kubectl
from jobs.contract.records import run_dir

HEAD_CONTAINER = "ray-head"


class FetchError(Exception):
    pass


def _kubectl(kubectl: str, context: str | None, *args: str, timeout: float,
             kubeconfig: str | None = None) -> str:
    try:
        return run_kubectl(kubectl, *args, timeout=timeout, kubeconfig=kubeconfig, context=context,
                           what=f"kubectl {args[0]}")
    except KubectlFailed as exc:
        advice = ": install kubectl, or copy the run directory yourself and give --run-dir" if exc.not_found else ""
        raise FetchError(f"{exc}{advice}") from None


def head_pod(namespace: str, ray_cluster: str, *, kubectl: str = "kubectl", context: str | None = None,
             timeout: float = 30, kubeconfig: str | None = None) -> str:
    out = _kubectl(kubectl, context, "get", "pods", "-n", namespace, "-l",
                   f"ray.io/cluster={ray_cluster},ray.io/node-type=head",
                   "-o", "jsonpath={.items[*].metadata.name}", timeout=timeout, kubeconfig=kubeconfig)
    names = out.split()
    if not names:
        raise FetchError(f"no Ray head pod of RayCluster {ray_cluster} in namespace {namespace}")
    return names[0]


def fetch_run_dir(namespace: str, ray_cluster: str, run_id: str, dest: str | Path, *,
                  kubectl: str = "kubectl", context: str | None = None, timeout: float = 600,
                  kubeconfig: str | None = None) -> Path:
    """Replace ``dest`` with a fresh copy of the run's directory on the head (kubeconfig: the
    stack's exported one, a file path; None = kubectl's own)."""
    pod = head_pod(namespace, ray_cluster, kubectl=kubectl, context=context, kubeconfig=kubeconfig)
    dest = Path(dest)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    _kubectl(kubectl, context, "cp", "-c", HEAD_CONTAINER, f"{namespace}/{pod}:{run_dir(run_id)}",
             str(partial), timeout=timeout, kubeconfig=kubeconfig)
    if not partial.is_dir():
        raise FetchError(f"{run_dir(run_id)} is not on the head pod {pod} (has the run started?)")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest
