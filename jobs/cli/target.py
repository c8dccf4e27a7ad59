"""What a jobs command works on: the deployed stack (or its file, offline) and the Ray dashboard
it reaches through a port-forward, the run and its attempt, and the errors every command shares.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from jobs.cli.ray_jobs import Attempt, RunError, Runs, run_entrypoint
from jobs.cli.rayjob_status import KubectlAccess
from jobs.cli.stack_outputs import StackError, StackTarget, kubeconfig_file, stack_target
from jobs.contract.exit_codes import ExitCode
from jobs.contract.spec import GrpoSpec

# (spec, args) -> (entrypoint, runtime_env); tests inject small real entrypoints here.
EntrypointBuilder = Callable[[GrpoSpec, argparse.Namespace], tuple[str, dict]]


class UsageError(RunError):
    exit_code = ExitCode.USAGE

class Unreachable(RunError):
    exit_code = ExitCode.DASHBOARD_UNREACHABLE

@dataclass
class Target:
    address: str
    spec: GrpoSpec | None
    run_id: str | None
    stack: StackTarget | None = None   # the stack's outputs, when a stack is targeted
    kube: KubectlAccess | None = None  # the cluster's API (RayJobs), when a stack is targeted

def default_entrypoint(spec: GrpoSpec, args: argparse.Namespace) -> tuple[str, dict]:
    """The run driver's one command (the same as the Pulumi RayJob's) and the rendered runtime
    env; the driver's plan (stages, trainer argv, budgets) is the one deployed to the head."""
    try:
        from jobs.plan.render import render  # lazily: written alongside, heavy imports stay out
    except ModuleNotFoundError as exc:
        if exc.name not in ("jobs.render",):
            raise
        raise UsageError("jobs.render (the training command) is not in this checkout") from None
    rendered = render(spec)
    return run_entrypoint(), dict(rendered.runtime_env or {})

def load_stack(stack: str | None, config_file: str | None, err: TextIO) -> StackTarget:
    """The stack's outputs: deployed (`pulumi stack output`), else the stack file offline."""
    if config_file and not stack:
        raise UsageError("--config-file needs --stack STACK (the stack the file configures)")
    try:
        return stack_target(stack, config_file, err)
    except StackError as exc:
        raise UsageError(str(exc)) from None

@contextlib.contextmanager
def open_target(args: argparse.Namespace, err: TextIO) -> Iterator[Target]:
    stack_info = None
    if args.stack or args.config_file or not args.address:
        stack_info = load_stack(args.stack, args.config_file, err)
    spec = stack_info.spec if stack_info else None
    run_id = (stack_info.run_id or (spec.run_id if spec else None)) if stack_info else args.run_id
    exported = None if (args.kube_context or stack_info is None) else stack_info.kubeconfig
    with contextlib.ExitStack() as stack:   # stops kubectl and removes the kubeconfig on any exit
        kubeconfig = stack.enter_context(kubeconfig_file(exported))
        kube = None if stack_info is None else KubectlAccess(
            stack_info.namespace, kubectl=args.kubectl, context=args.kube_context, kubeconfig=kubeconfig)
        if args.address:
            yield Target(args.address, spec, run_id, stack_info, kube)
            return
        assert stack_info is not None
        from jobs.cli.port_forward import PortForwardError, port_forward

        namespace, service = stack_info.namespace, stack_info.head_service
        # --kube-context: your own kubeconfig's context; else the stack's exported kubeconfig.
        print(f"[gke-grpo] port-forward svc/{service} -n {namespace} -> 127.0.0.1 "
              f"({stack_info.describe}; kubeconfig: {'the exported one' if exported else 'yours'})",
              file=err, flush=True)
        try:
            address = stack.enter_context(port_forward(
                namespace, service, local_port=args.local_port, context=args.kube_context,
                kubectl=args.kubectl, err=err, kubeconfig=kubeconfig,
                credentials_hint=stack_info.get_credentials))
        except PortForwardError as exc:
            raise Unreachable(str(exc)) from None
        yield Target(address, spec, run_id, stack_info, kube)

def need_run(target: Target) -> str:
    if not target.run_id:
        raise UsageError("which run? give --stack STACK (its runId output names the run) or --run-id RUN")
    return target.run_id

def pick_attempt(runs: Runs, target: Target, args: argparse.Namespace) -> Attempt:
    """The attempt a command is about: --submission-id, --attempt N, or the latest."""
    if getattr(args, "submission_id", None):
        return runs.attempt_info(args.submission_id)
    run_id = need_run(target)
    attempts = runs.attempts(run_id)
    if getattr(args, "attempt", None) is not None:
        match = [a for a in attempts if a.number == args.attempt]
        if not match:
            raise UsageError(f"run {run_id} has no attempt {args.attempt} "
                             f"(attempts: {', '.join(str(a.number) for a in attempts) or 'none'})")
        return match[0]
    if not attempts:
        raise UsageError(f"run {run_id} has no attempt on {target.address} yet: "
                         "`gke-grpo submit` starts one")
    return attempts[-1]
