"""``gke-grpo preflight --stack STACK [--config-file FILE]``: a stack's GRPO job checked against
the rules of verl / NeMo RL (jobs/plan/preflight) before anything is created or submitted, and
the stack file compared with what is deployed (`pulumi stack output`): what it would replace,
a data store refused unless storage.allowDataLoss (components/replacements.py).

Exit codes: 0 no errors (warnings may be printed); 2 the stack config is invalid or unreadable,
or preflight found errors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jobs.cli.stack_outputs import (
    ROOT,
    StackError,
    capacity_findings,
    deployed_outputs,
    deployed_run_spec,
    offline_spec,
    replacement_report,
)
from jobs.contract.exit_codes import ExitCode
from jobs.plan.checkpoint_interval import checkpoint_interval_findings
from jobs.plan.gpu_memory import format_plan, plan_for_spec
from jobs.plan.logprob_paths import UnmeasuredVersion
from jobs.plan.preflight import check


def check_replacements(stack: str, config_file: Path | None, pulumi: str = "pulumi") -> list[str]:
    """What the stack file would replace of the deployed stack (`pulumi stack output`): a data
    store is an error (unless storage.allowDataLoss), a pool, the cluster or a network under a
    live run a warning; each line starts with its level. A stack that cannot be read is said,
    not an error: preflight also runs before the first deploy."""
    try:
        outputs = deployed_outputs(stack, pulumi)
        report = replacement_report(stack, config_file, outputs)
    except StackError as err:
        return [f"preflight: replacements not checked: {err}"]
    lines = [f"preflight: replacements not checked: {report['unread']}"] if report.get("unread") else []
    return lines + [f"error: {line}" for line in report["refused"]] + \
        [f"warning: {line}" for line in report["replaced"]]


def _capacity_and_tier(stack: str, config_file: Path | None) -> tuple[str | None, int | None]:
    """gke-grpo:gpu.provisioningModel (or gpu.capacity's most interruptible kind) and
    gke-grpo:storage.lustre.throughputTier of the stack file
    (the config was validated already; the tier's default is the config model's)."""
    from jobs.plan.stack_file import ConfigFileError, read_stack_document, stack_file_path

    try:
        config = read_stack_document(stack_file_path(ROOT, stack, config_file)).get("config") or {}
    except (ConfigFileError, OSError):
        return None, None
    gpu = config.get("gke-grpo:gpu") or {}
    storage = config.get("gke-grpo:storage") or {}
    model = gpu.get("provisioningModel") if isinstance(gpu, dict) else None
    capacity = gpu.get("capacity") if isinstance(gpu, dict) else None
    if isinstance(capacity, list):
        # A waterfall's run can land on any source: the most interruptible one judges the cadence.
        kinds = {source.get("kind") for source in capacity if isinstance(source, dict)}
        model = next((m for kind, m in (("spot", "spot"), ("flexStart", "flex-start"),
                                        ("reservation", "reservation")) if kind in kinds), None)
    tier = None
    if isinstance(storage, dict) and storage.get("kind") == "lustre":
        lustre = storage.get("lustre")
        tier = (lustre if isinstance(lustre, dict) else {}).get("throughputTier", 500)  # the model's default
    return (model if isinstance(model, str) else None), (tier if isinstance(tier, int) else None)


def check_run_identity(stack: str, spec, pulumi: str = "pulumi") -> list[str]:
    """Against the deployed stack's runSpec: a note when the run id changes (a new run, a new
    checkpoint directory), a warning per changed field the framework ignores
    (jobs/plan/run_identity.py). Nothing when nothing is deployed (the replacement check says
    so already)."""
    from jobs.plan.run_identity import describe_identity_change

    try:
        deployed = deployed_run_spec(deployed_outputs(stack, pulumi))
    except StackError:
        return []
    if deployed is None:
        return []
    return [f"{level}: {line}" for level, line in describe_identity_change(deployed, spec)]


def preflight_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gke-grpo preflight",
                                     description="Check a stack's GRPO job against the rules of "
                                                 "verl / NeMo RL before anything runs.")
    parser.add_argument("--stack", "-s", required=True, help="stack name: reads Pulumi.<stack>.yaml")
    parser.add_argument("--config-file", type=Path, default=None,
                        help="a stack file to read instead of Pulumi.<stack>.yaml")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Load and validate the stack config, build the spec, print findings. Exit 0 when there is
    no error (warnings allowed), 2 on an invalid or unreadable config or a preflight error."""
    parser = preflight_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(ExitCode.USAGE if exit_.code else ExitCode.OK)

    try:
        spec = offline_spec(args.stack, args.config_file)
    except StackError as err:
        print(f"preflight: {err}", file=sys.stderr)
        return int(ExitCode.USAGE)
    capacity_source, tier = _capacity_and_tier(args.stack, args.config_file)
    findings = check(spec) + checkpoint_interval_findings(spec, capacity_source, lustre_tier_mbps_per_tib=tier)
    lines = [str(finding) for finding in findings]
    try:
        plan = plan_for_spec(spec)
    except UnmeasuredVersion:      # check() has said so (a warning on job.release)
        plan = None
    if plan is not None and not any(f.message.endswith(format_plan(plan)) for f in findings):
        lines.append(format_plan(plan))
    try:
        lines += [f"warning: {line}" for line in capacity_findings(args.stack, args.config_file)]
    except StackError as err:
        lines.append(f"preflight: capacity not checked: {err}")
    lines += check_replacements(args.stack, args.config_file)
    lines += check_run_identity(args.stack, spec)
    print("\n".join(lines + summary(lines)))
    failed = sum(line.startswith("error: ") for line in lines)
    warnings = sum(line.startswith("warning: ") for line in lines)
    print(f"preflight {args.stack}: {spec.framework} run {spec.run_id} on {spec.total_gpus} GPUs: "
          f"{failed} error(s), {warnings} warning(s)")
    return int(ExitCode.USAGE if failed else ExitCode.OK)


def summary(lines: list[str]) -> list[str]:
    """The errors again, one line each (a memory error's plan is detail), when anything was
    printed after the first: the last screen of preflight's output says what to fix."""
    errors_at = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    if not errors_at or all(line.startswith("error: ") and "\n" not in line for line in lines[errors_at[0]:]):
        return []   # nothing but the errors themselves after the first one
    return ["", f"{len(errors_at)} error(s) to fix:"] + [lines[i].split("\n", 1)[0] for i in errors_at]
