"""`gke-grpo export` and `gke-grpo serve`: a run's checkpoint as a Hugging Face model directory on /data,
and a vLLM OpenAI-compatible server on it.

    gke-grpo export RUN [--step N] --stack dev        a Ray job on the head: jobs/head/export.py
    gke-grpo serve  RUN [--step N] --stack dev        Deployment + Service, then a port-forward
    gke-grpo serve  RUN --dry-run                     print the manifest (YAML), apply nothing
    gke-grpo serve  [RUN] --stop --stack dev          remove the server(s)

`export` submits ``python3 -m jobs.head.export --plan <deployed plan> --run-id RUN [--step N]``
(shell-safe, as the run's own command) and follows it: the export runs where the run's files
are, with the deployed plan's options (its hub repo for the plan's own run only). `serve`
renders jobs/plan/serve_manifest.py from the live RayCluster's pod templates, applies it with
kubectl, waits for the pod to be ready (its first command checks the export:
jobs/head/serve_check.py), then forwards 127.0.0.1:<port> to the Service until Ctrl-C, and
prints a curl. The server keeps running after the forward closes; `serve --stop` removes it
(docs/export-evaluate-serve.md).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, TextIO

from jobs.cli.arguments import nonnegative_int, port_number, positive_int, positive_seconds
from jobs.cli.kubectl import KubectlFailed, run_kubectl
from jobs.cli.ray_jobs import Runs, check_no_secrets
from jobs.cli.target import Target, Unreachable, UsageError, load_stack
from jobs.contract.exit_codes import ExitCode
from jobs.contract.records import run_dir
from jobs.contract.run_plan import PLAN_PATH, PYTHON, SHELL_SAFE

KUBECTL_TIMEOUT_S = 60.0


def add_export_serve_parsers(sub, target, follow) -> None:
    """The `export` and `serve` subcommands of the CLI's parser (jobs/cli/main.py)."""
    p = sub.add_parser("export", parents=[target, follow],
                       help="export a run's checkpoint to /data/exports/RUN/step-N (Hugging Face format)")
    p.add_argument("run", metavar="RUN", help="the run id (its checkpoints: /data/checkpoints/RUN)")
    p.add_argument("--step", type=nonnegative_int, help="a checkpoint step (default: the latest complete one)")
    p = sub.add_parser("serve", help="a vLLM OpenAI-compatible server on a run's export (one GPU node)")
    p.add_argument("run", metavar="RUN", nargs="?", help="the run id whose export is served")
    p.add_argument("--step", type=nonnegative_int, help="the exported step (default: the newest complete export)")
    p.add_argument("--stop", action="store_true", help="remove the server of RUN (without RUN: every server)")
    p.add_argument("--dry-run", action="store_true", help="print the manifest (YAML) and apply nothing")
    p.add_argument("--no-forward", action="store_true", help="return once ready, without a port-forward")
    p.add_argument("--gpus", type=positive_int, help="GPUs of the pod (default: a whole GPU node's)")
    p.add_argument("--stack", "-s", help="the deployed stack (its RayCluster, image and run spec)")
    p.add_argument("--config-file", help="offline: a stack file in the Pulumi.<stack>.yaml format")
    p.add_argument("--kube-context", help="kubectl context (default: the stack's exported kubeconfig)")
    p.add_argument("--kubectl", default="kubectl", help=argparse.SUPPRESS)
    p.add_argument("--local-port", type=port_number, help="local port of the forward (default: a free one)")
    p.add_argument("--wait-seconds", type=positive_seconds, default=1800.0,
                   help="how long to wait for the server to be ready")
    p.add_argument("--poll-seconds", type=positive_seconds, default=10.0, help=argparse.SUPPRESS)
    p.add_argument("--ray-cluster-json", type=_json_file, help=argparse.SUPPRESS)


def _json_file(path: str) -> dict:
    """A RayCluster as `kubectl get raycluster -o json` prints it (serve --dry-run offline)."""
    import json

    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc}") from None




def _check_run_id(run: str) -> None:
    try:
        run_dir(run)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def export_entrypoint(run: str, step: int | None) -> str:
    words = [PYTHON, "-m", "jobs.head.export", "--plan", PLAN_PATH, "--run-id", run]
    if step is not None:
        words += ["--step", str(step)]
    entrypoint = " ".join(words)
    if not SHELL_SAFE.fullmatch(entrypoint):
        raise UsageError(f"run id {run!r} cannot be passed through the job's shell safely")
    return entrypoint


def cmd_export(runs: Runs, target: Target, args, out: TextIO, err: TextIO) -> int:
    _check_run_id(args.run)
    entrypoint = export_entrypoint(args.run, args.step)
    runtime_env: dict[str, Any] = {}
    if target.spec is not None:       # the run's own runtime env (verl: the verl package)
        from jobs.plan.render import render

        runtime_env = dict(render(target.spec).runtime_env or {})
    submission_id = f"{args.run}-export-{int(time.time())}"
    metadata = {"run_id": args.run, "kind": "export"}
    check_no_secrets(entrypoint, runtime_env, metadata)
    runs.client.submit_job(entrypoint=entrypoint, submission_id=submission_id,
                           runtime_env=runtime_env or None, metadata=metadata)
    print(f"[gke-grpo] export of run {args.run} submitted as {submission_id}", file=out, flush=True)
    runs.follow(submission_id, status_every=args.status_every)
    return runs.exit_code_for(runs.attempt_info(submission_id))


# ---- serve ---------------------------------------------------------------------------------------

def _kubectl_run(args, kubeconfig: str | None, *words: str, stdin: str | None = None,
                 timeout: float = KUBECTL_TIMEOUT_S) -> str:
    try:
        return run_kubectl(args.kubectl, *words, timeout=timeout, kubeconfig=kubeconfig,
                           context=args.kube_context, stdin=stdin)
    except KubectlFailed as exc:
        advice = ": install kubectl, or use --dry-run and apply the manifest yourself" if exc.not_found else ""
        raise Unreachable(f"{exc}{advice}") from None


def _manifests(args, stack, kubeconfig: str | None, ray_cluster: dict | None = None) -> list[dict]:
    from jobs.plan.after_training import evaluation_tensor_parallel_size
    from jobs.plan.model_shapes import shape_for
    from jobs.plan.serve_manifest import ServeRequest, serve_manifests, serve_tensor_parallel_size

    spec = stack.spec
    if spec is None:
        raise UsageError("serve needs the stack's run spec (output runSpec): deploy this version")
    if ray_cluster is None:
        ray_cluster = json.loads(_kubectl_run(args, kubeconfig, "get", "raycluster", stack.ray_cluster_name,
                                          "-n", stack.namespace, "-o", "json"))
    gpus = args.gpus or spec.gpus_per_node
    shape = shape_for(spec.model)
    tp = serve_tensor_parallel_size(shape.attention_heads if shape else None,
                                    shape.kv_heads if shape else None, gpus) if shape else \
        evaluation_tensor_parallel_size(spec)
    request = ServeRequest(run_id=args.run, step=args.step, namespace=stack.namespace,
                           image=spec.image, framework=spec.framework, gpus=gpus,
                           tensor_parallel_size=tp,
                           max_model_len=spec.max_prompt_length + spec.max_response_length)
    return serve_manifests(ray_cluster["spec"], request)


def _plain_dumper():
    import yaml

    class PlainDumper(yaml.SafeDumper):
        # Each object written out where it is used (labels, selectors): no &id001 / *id001 for a
        # reader to follow.
        def ignore_aliases(self, data) -> bool:
            return True

    return PlainDumper


def _ray_cluster_for_dry_run(args, stack, kubeconfig: str | None, err: TextIO) -> dict:
    """The RayCluster the manifest copies its pod templates from: the deployed one when the
    cluster answers; offline, or when it does not, the one the program would create from the
    stack file (the offline preview), said in one line."""
    from jobs.cli.stack_outputs import StackError, offline_ray_cluster

    if stack.source == "deployed":
        try:
            return json.loads(run_kubectl(args.kubectl, "get", "raycluster", stack.ray_cluster_name,
                                          "-n", stack.namespace, "-o", "json", timeout=KUBECTL_TIMEOUT_S,
                                          kubeconfig=kubeconfig, context=args.kube_context))
        except (KubectlFailed, ValueError) as exc:
            if stack.stack is None:
                raise Unreachable(f"{exc}: give --stack STACK to render from its stack file instead") from None
            print(f"[gke-grpo] the deployed RayCluster could not be read ({exc}); rendering from "
                  f"the stack file Pulumi.{stack.stack}.yaml instead", file=err, flush=True)
    try:
        return offline_ray_cluster(stack.stack, args.config_file)
    except StackError as exc:
        raise UsageError(str(exc)) from None


def _wait_ready(args, kubeconfig: str | None, namespace: str, name: str, err: TextIO) -> None:
    deadline = time.monotonic() + args.wait_seconds
    selector = f"gke-grpo/serve-run={name.removeprefix('grpo-serve-')}"
    while time.monotonic() < deadline:
        pods = json.loads(_kubectl_run(args, kubeconfig, "get", "pods", "-n", namespace, "-l", selector,
                                   "-o", "json")).get("items", [])
        for pod in pods:
            statuses = pod.get("status", {}).get("containerStatuses") or []
            if any(s.get("ready") for s in statuses):
                return
            terminated = [s for s in statuses if (s.get("lastState") or {}).get("terminated")
                          or (s.get("state") or {}).get("terminated")]
            if terminated:
                previous = ["--previous"] if (terminated[0].get("lastState") or {}).get("terminated") else []
                log = _kubectl_run(args, kubeconfig, "logs", "-n", namespace, pod["metadata"]["name"],
                               "--tail", "20", *previous)
                raise UsageError("the server's pod ended before it was ready:\n" + log.strip()[-1500:]
                                 + f"\n(`gke-grpo serve {args.run} --stop` removes it)")
        time.sleep(args.poll_seconds)
    raise Unreachable(f"the server was not ready within {args.wait_seconds:.0f} s (a new GPU node "
                      "and a model load take minutes): `kubectl get pods -n "
                      f"{namespace} -l {selector}`; rerun `gke-grpo serve` to wait again")


def curl_example(address: str, run: str) -> str:
    body = json.dumps({"model": run, "messages": [{"role": "user", "content": (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
        "in May. How many clips did Natalia sell altogether in April and May? Let's think step "
        'by step and output the final answer after "####".')}],
        "temperature": 0, "max_tokens": 512})
    return (f"curl -s {address}/v1/chat/completions -H 'Content-Type: application/json' "
            f"-d '{body}'")


def cmd_serve(args, out: TextIO, err: TextIO) -> int:
    from jobs.plan.serve_manifest import ROLE, ROLE_LABEL, SERVE_PORT, serve_name

    if not args.stop and not args.run:
        raise UsageError("which run? `gke-grpo serve RUN` (or `gke-grpo serve --stop` to remove servers)")
    if args.run:
        _check_run_id(args.run)
    stack = load_stack(args.stack, args.config_file, err)
    from jobs.cli.stack_outputs import kubeconfig_file

    if args.dry_run:
        import yaml

        with kubeconfig_file(None if args.kube_context else stack.kubeconfig) as kubeconfig:
            ray_cluster = args.ray_cluster_json or _ray_cluster_for_dry_run(args, stack, kubeconfig, err)
            out.write(yaml.dump_all(_manifests(args, stack, None, ray_cluster), Dumper=_plain_dumper(),
                                    sort_keys=False))
        out.flush()
        return ExitCode.OK

    exported = None if args.kube_context else stack.kubeconfig
    with kubeconfig_file(exported) as kubeconfig:
        if args.stop:
            selector = f"{ROLE_LABEL}={ROLE}" + (
                f",gke-grpo/serve-run={serve_name(args.run).removeprefix('grpo-serve-')}" if args.run else "")
            said = _kubectl_run(args, kubeconfig, "delete", "deployment,service", "-n", stack.namespace,
                            "-l", selector, "--ignore-not-found", "--wait=false")
            print(f"[gke-grpo] {said.strip() or 'no vLLM server to remove'}", file=out, flush=True)
            return ExitCode.OK
        manifests = _manifests(args, stack, kubeconfig)
        _kubectl_run(args, kubeconfig, "apply", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": manifests}))
        name = manifests[0]["metadata"]["name"]
        print(f"[gke-grpo] deployment/{name} and service/{name} applied in {stack.namespace}; waiting "
              f"for the server (up to {args.wait_seconds:.0f} s)", file=err, flush=True)
        _wait_ready(args, kubeconfig, stack.namespace, name, err)
        if args.no_forward:
            print(f"[gke-grpo] ready: kubectl port-forward -n {stack.namespace} svc/{name} "
                  f"8000:{SERVE_PORT}", file=out, flush=True)
            return ExitCode.OK
        from jobs.cli.port_forward import PortForwardError, port_forward

        try:
            with port_forward(stack.namespace, name, remote_port=SERVE_PORT,
                              local_port=args.local_port, context=args.kube_context,
                              kubectl=args.kubectl, err=err, kubeconfig=kubeconfig) as address:
                print(f"[gke-grpo] vLLM serves run {args.run} at {address}/v1 (Ctrl-C closes the "
                      "forward; the server keeps running until `gke-grpo serve --stop`)\n"
                      f"{curl_example(address, args.run)}", file=out, flush=True)
                while True:
                    time.sleep(3600)
        except PortForwardError as exc:
            raise Unreachable(str(exc)) from None
        except KeyboardInterrupt:
            print(f"\n[gke-grpo] forward closed; the server keeps running (`gke-grpo serve "
                  f"{args.run} --stop` removes it)", file=err, flush=True)
            return ExitCode.OK
