"""The GPU worker's node-labels init container, run for real: its python3 program against a local
HTTPS stand-in for the Kubernetes API (`GET /api/v1/nodes/<name>` with the pod's bearer token,
the cluster CA), and its output read back the way `ray start --labels-file` reads it (Ray 2.54
ray/_private/label_utils.py parse_node_labels_from_yaml_file)."""

from __future__ import annotations

import calendar
import json
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.node_labels import SERVICE_ACCOUNT_DIR, labels_script
from jobs.contract.capacity import source_of
from jobs.contract.capacity_end import node_created_at

NODE = "gke-grpo-prod-a4-highgpu-8g-spot-1a2b3c4d-x7yz"
LABELS = {
    "cloud.google.com/gke-spot": "true",
    "cloud.google.com/gke-nodepool": "a4-highgpu-8g-spot",
    "cloud.google.com/compute-class": "grpo-prod-gpu",
    "kubernetes.io/hostname": NODE,                  # not passed on
    "cloud.google.com/gke-accelerator": "nvidia-b200",
}
# The Node's creation time, as the API server writes it (metav1.Time: RFC 3339, UTC, whole seconds).
CREATED = "2026-12-01T10:00:00Z"
CREATED_EPOCH = "1796119200"
METADATA = {"name": NODE, "labels": LABELS, "creationTimestamp": CREATED}


@pytest.fixture
def api(tmp_path):
    """An HTTPS server on 127.0.0.1 answering one node, requiring the token."""
    cert, key = tmp_path / "ca.crt", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            if self.headers.get("Authorization") != "Bearer unit-token":
                self.send_response(401)
                self.end_headers()
                return
            if self.path != f"/api/v1/nodes/{NODE}":
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"metadata": METADATA}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("unit-token\n")
    (account / "ca.crt").write_text(cert.read_text())
    yield server.server_address[1], account, seen
    server.shutdown()


def _run(tmp_path: Path, port: int, account: Path, node: str = NODE):
    out = tmp_path / "labels.yaml"
    script = labels_script().replace(SERVICE_ACCOUNT_DIR, str(account))
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True,
                          timeout=60, env={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                                           "KUBERNETES_SERVICE_PORT": str(port),
                                           "GKE_GRPO_NODE_NAME": node})
    return proc, out


def _ray_reads(path: Path) -> dict[str, str]:
    from ray._private.label_utils import parse_node_labels_from_yaml_file
    return parse_node_labels_from_yaml_file(str(path))


def test_the_node_capacity_labels_become_ray_node_labels(tmp_path, api):
    port, account, seen = api
    proc, out = _run(tmp_path, port, account)
    assert proc.returncode == 0, proc.stderr
    labels = _ray_reads(out)
    assert labels == {"cloud.google.com/gke-spot": "true",
                      "cloud.google.com/gke-nodepool": "a4-highgpu-8g-spot",
                      "cloud.google.com/compute-class": "grpo-prod-gpu",
                      "gke-grpo/node-name": NODE, "gke-grpo/node-created": CREATED_EPOCH}
    assert source_of(labels) == "spot"
    assert node_created_at(labels) == calendar.timegm(time.strptime(CREATED, "%Y-%m-%dT%H:%M:%SZ"))
    assert seen == [(f"/api/v1/nodes/{NODE}", "Bearer unit-token")]
    assert f"node-labels: node {NODE}:" in proc.stdout


def test_a_node_it_cannot_read_never_stops_the_worker(tmp_path, api):
    port, account, _seen = api
    (account / "token").write_text("wrong")          # 401: RBAC missing, say
    proc, out = _run(tmp_path, port, account)
    assert proc.returncode == 0
    assert _ray_reads(out) == {"gke-grpo/node-labels": "unreadable"}
    assert source_of(_ray_reads(out)) == "unknown"
    assert "cannot read node" in proc.stdout and "401" in proc.stdout
    # No API at all (connection refused): the same.
    proc, out = _run(tmp_path, 9, account)
    assert proc.returncode == 0 and _ray_reads(out) == {"gke-grpo/node-labels": "unreadable"}


def test_a_node_without_a_readable_creation_time_keeps_its_other_labels(tmp_path, api, monkeypatch):
    port, account, _seen = api
    for value in (None, "yesterday"):
        monkeypatch.setitem(METADATA, "creationTimestamp", value)
        proc, out = _run(tmp_path, port, account)
        assert proc.returncode == 0, proc.stderr
        labels = _ray_reads(out)
        assert "gke-grpo/node-created" not in labels and labels["gke-grpo/node-name"] == NODE
        assert source_of(labels) == "spot" and node_created_at(labels) is None
        assert "no creation time" in proc.stdout
