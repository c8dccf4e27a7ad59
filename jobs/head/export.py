"""Export a run's checkpoint as a Hugging Face model directory under /data/exports.

    python3 -m jobs.head.export --run-id RUN [--checkpoint-dir DIR] [--framework verl|nemo-rl]
                                [--step N ... | --every-steps M] [--hub-repo ID]
    python3 -m jobs.head.export --plan /opt/gke-grpo/run/plan.json --run-id RUN [--step N]

The run driver starts it after a completed trainer (the plan's ``export`` command); ``jobs
export RUN [--step N]`` submits it as a Ray job (``--plan``: the deployed plan's export options,
for any run on /data). Where the weights come from (jobs/contract/converters.py):

- the trainer wrote them (every run rendered by this program): ``global_step_<n>/actor/
  huggingface`` (verl ``hf_model``) or ``step_<n>/policy/weights/model/consolidated`` plus
  ``step_<n>/policy/tokenizer`` (NeMo RL ``save_consolidated``). The export copies them: CPU and
  a few MiB of memory on the head, streaming files, never the model in RAM;
- otherwise the framework's converter (verl's model merger, NeMo RL's DCP converter), which
  holds the whole model in host RAM: it runs as a Ray task that asks for that memory
  (``memory=``), so Ray places it on a node that has it, never on the head (48 GiB by default).

Idempotent and crash-safe: a step whose export is complete (jobs/contract/exports.py: marker
last, every listed file at its size) is skipped; a directory without a valid marker is a
half-written export: it is said so and replaced. Files are written to a hidden sibling
``.step-<n>.partial-<pid>``, renamed into place, and the marker is written last.

Upload (optional): ``--hub-repo`` pushes the newest export to that Hugging Face model repo
(created private if missing) with the token from the mounted hf-secret file (``--hf-token-file``)
or HF_TOKEN, passed to huggingface_hub as an argument: never in argv, logs or errors.

Exit codes: 0 exported (or already), 1 a conversion, copy or upload failed, 2 bad input (an
unknown run, a step without a complete checkpoint, an invalid hub repo name): one line each.
Standard library only at import (huggingface_hub and ray where used).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract import converters as conv
from jobs.contract.credentials import redact
from jobs.contract.exit_codes import ExitCode
from jobs.contract.exports import (
    EXPORT_FORMAT,
    EXPORT_MARKER,
    EXPORTS_ROOT,
    ExportError,
    export_dir,
    export_state,
    missing_model_files,
)
from jobs.contract.layout import DATA_LAYOUT, HF_TOKEN_FILE
from jobs.contract.records import run_dir
from jobs.head.checkpoints import VERL_TRACKER, tracker_step

LOG_PREFIX = "[export]"
EXPORTED_MARKER = "[jobs.export] EXPORTED "
# huggingface_hub's REPO_ID_REGEX and validate_repo_id checks (src/huggingface_hub/utils/
# _validators.py, identical at v0.36.0 and v1.28.0), ASCII only: the Hub's names are.
HUB_REPO_ID = re.compile(r"^(?:[A-Za-z0-9_.\-]+/)?[A-Za-z0-9_.\-]{1,96}$")
# Memory a converter task asks Ray for: the checkpoint's weight files twice (every shard held at
# once, then the merged tensors) plus room for the interpreter and libraries.
CONVERTER_MEMORY_FACTOR = 2.0
CONVERTER_MEMORY_EXTRA = 16 * 2**30
COPY_CHUNK = 64 * 2**20

Runner = Callable[[Sequence[str], str | None, int], int]   # (argv, cwd, memory bytes) -> exit code


def hub_repo_problem(repo_id: str) -> str | None:
    """Why ``repo_id`` is not a valid Hugging Face repo id, or None (huggingface_hub's rules)."""
    if repo_id.count("/") > 1:
        return "must be 'name' or 'namespace/name'"
    if not HUB_REPO_ID.match(repo_id):
        return ("may use letters, digits, '-', '_' and '.' (at most 96 in the name), with an "
                "optional 'namespace/'")
    for part in repo_id.split("/"):
        if part[:1] in "-." or part[-1:] in "-.":
            return "a name cannot start or end with '-' or '.'"
    if "--" in repo_id or ".." in repo_id:
        return "cannot contain '--' or '..'"
    if repo_id.endswith(".git"):
        return "cannot end with '.git'"
    return None


# ---- what is on disk ---------------------------------------------------------------------------

_VERL_STEP = re.compile(r"^global_step_(\d+)$")
_NEMO_STEP = re.compile(r"^step_(\d+)$")


def checkpoint_framework(checkpoint_dir: Path) -> str | None:
    names = [p.name for p in checkpoint_dir.iterdir()] if checkpoint_dir.is_dir() else []
    if any(_VERL_STEP.match(n) for n in names) or VERL_TRACKER in names:
        return "verl"
    if any(_NEMO_STEP.match(n) or n.startswith("tmp_step_") for n in names):
        return "nemo-rl"
    return None


def complete_steps(checkpoint_dir: Path, framework: str) -> list[int]:
    """Steps whose checkpoint is complete. verl writes latest_checkpointed_iteration.txt after a
    save completed (verl/trainer/ppo/ray_trainer.py _save_checkpoint, v0.7.1): every step up to
    it is complete, a later one is being written or was cut off. NeMo RL renames tmp_step_<n> to
    step_<n> once complete (nemo_rl/utils/checkpoint.py finalize_checkpoint, v0.5.0)."""
    pattern = _VERL_STEP if framework == "verl" else _NEMO_STEP
    try:
        steps = sorted(int(m.group(1)) for p in checkpoint_dir.iterdir() if p.is_dir()
                       for m in [pattern.match(p.name)] if m)
    except OSError:
        return []
    if framework == "verl":
        latest = tracker_step(checkpoint_dir)
        if latest is None:
            return []
        steps = [s for s in steps if s <= latest]
    return steps


@dataclass(frozen=True)
class ExportSource:
    """Where one step's Hugging Face files come from."""
    kind: str                                   # "copy" | "convert"
    description: str
    files: dict[str, Path] = field(default_factory=dict)     # copy: name -> source file
    argv: tuple[str, ...] = ()                  # convert: the converter command
    cwd: str | None = None
    memory_bytes: int = 0
    tokenizer_dir: Path | None = None           # convert (NeMo RL): copied after


def _files_of(directory: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(directory.iterdir()) if p.is_file()}


def _has_weights(directory: Path) -> bool:
    return directory.is_dir() and (directory / "config.json").is_file() \
        and any(directory.glob("*.safetensors"))


def _weight_bytes(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def find_source(checkpoint_dir: Path, framework: str, step: int, target: Path,
                nemo_rl_workdir: str) -> ExportSource:
    root = str(checkpoint_dir)
    if framework == "verl":
        hf = Path(conv.verl_hf_dir(root, step))
        if _has_weights(hf):
            return ExportSource("copy", f"{hf} (written by the trainer: save_contents hf_model)",
                          files=_files_of(hf))
        actor = Path(conv.verl_actor_dir(root, step))
        shards = sorted(actor.glob("model_world_size_*_rank_*.pt"))
        if (actor / "fsdp_config.json").is_file() and shards:
            memory = int(_weight_bytes(shards) * CONVERTER_MEMORY_FACTOR) + CONVERTER_MEMORY_EXTRA
            return ExportSource("convert", f"{actor} (verl model merger: no hf_model in this checkpoint)",
                          argv=conv.verl_merger_argv(root, step, str(target)), memory_bytes=memory)
        raise ExportError(f"step {step} in {checkpoint_dir} has neither Hugging Face weights "
                          f"({hf}) nor FSDP shards with fsdp_config.json ({actor}): not a "
                          "complete verl checkpoint")
    consolidated = Path(conv.nemo_rl_consolidated_dir(root, step))
    tokenizer = Path(conv.nemo_rl_tokenizer_dir(root, step))
    if _has_weights(consolidated):
        files = _files_of(consolidated)
        if tokenizer.is_dir():
            files.update(_files_of(tokenizer))
        return ExportSource("copy", f"{consolidated} + {tokenizer} (written by the trainer: "
                      "checkpointing.save_consolidated)", files=files)
    weights = Path(conv.nemo_rl_step_dir(root, step), *conv.NEMO_RL_DCP_WEIGHTS)
    if (weights / conv.NEMO_RL_DCP_METADATA).is_file():
        memory = int(_weight_bytes(sorted(weights.glob("*.distcp"))) * CONVERTER_MEMORY_FACTOR) \
            + CONVERTER_MEMORY_EXTRA
        return ExportSource("convert", f"{weights} (NeMo RL convert_dcp_to_hf.py: a DCP checkpoint)",
                      argv=conv.nemo_rl_converter_argv(root, step, str(target / "converted")),
                      cwd=nemo_rl_workdir, memory_bytes=memory, tokenizer_dir=tokenizer)
    raise ExportError(
        f"step {step} in {checkpoint_dir} has no consolidated Hugging Face weights ({consolidated}) "
        "and is not a DCP checkpoint: it was trained without checkpointing.save_consolidated=true, "
        "and NeMo RL v0.5.0's convert_dcp_to_hf.py cannot read the v2 policy's sharded safetensors "
        "(NVIDIA-NeMo/RL #1427, fixed after v0.5.0)")


# ---- writing -----------------------------------------------------------------------------------

def _progress(text: str, out=None) -> None:
    print(f"{LOG_PREFIX} {text}", file=out or sys.stdout, flush=True)


def _copy_file(source: Path, target: Path) -> None:
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(COPY_CHUNK):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())


def run_on_cluster(argv: Sequence[str], cwd: str | None, memory_bytes: int) -> int:
    """Run a converter as a Ray task that reserves ``memory_bytes`` of a node's memory (never
    the head's 48 GiB: Ray places it where that much is free)."""
    import ray

    if not ray.is_initialized():
        ray.init(address="auto", logging_level="WARNING")

    def convert(argv: list[str], cwd: str | None) -> int:
        import subprocess as sp
        return sp.run(argv, cwd=cwd).returncode

    task = ray.remote(convert).options(num_cpus=4, num_gpus=0, memory=memory_bytes, max_retries=0)
    return int(ray.get(task.remote(list(argv), cwd)))


def _convert(source: ExportSource, partial: Path, runner: Runner, out) -> None:
    _progress(f"converting with `{' '.join(source.argv[:4])} ...` (asks Ray for "
         f"{source.memory_bytes / 2**30:.0f} GiB of memory)", out)
    code = runner(source.argv, source.cwd, source.memory_bytes)
    if code != 0:
        raise RuntimeError(f"the converter exited {code}: {' '.join(source.argv)}")
    if source.tokenizer_dir is not None:       # NeMo RL: a .bin re-saved as safetensors
        converted = partial / "converted"
        resaved = partial / "resaved"
        code = runner(conv.nemo_rl_resave_argv(str(converted), str(resaved)), source.cwd,
                      source.memory_bytes)
        if code != 0:
            raise RuntimeError(f"re-saving {converted} as safetensors exited {code}")
        for item in resaved.iterdir():
            item.rename(partial / item.name)
        shutil.rmtree(converted)
        resaved.rmdir()
        if source.tokenizer_dir.is_dir():
            for name, path in _files_of(source.tokenizer_dir).items():
                _copy_file(path, partial / name)


def write_export(source: ExportSource, target: Path, *, run_id: str, step: int, framework: str,
                 runner: Runner = run_on_cluster, out=None) -> dict:
    """Write one export: a hidden partial directory, renamed into place, marker last."""
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    started = time.time()
    try:
        if source.kind == "copy":
            for name, path in source.files.items():
                _copy_file(path, partial / name)
        else:
            # The converter writes into the partial directory itself.
            source = ExportSource(source.kind, source.description,
                            argv=tuple(str(partial) if a == str(target) else
                                       a.replace(str(target) + "/", str(partial) + "/")
                                       for a in source.argv),
                            cwd=source.cwd, memory_bytes=source.memory_bytes,
                            tokenizer_dir=source.tokenizer_dir)
            _convert(source, partial, runner, out)
        missing = missing_model_files(partial)
        if missing:
            raise ExportError(f"the export of step {step} lacks {', '.join(missing)} "
                              f"(source: {source.description})")
        files = {p.name: p.stat().st_size for p in sorted(partial.iterdir()) if p.is_file()}
        if target.exists():
            shutil.rmtree(target)
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    marker = {"format": EXPORT_FORMAT, "run_id": run_id, "step": step, "framework": framework,
              "method": source.kind, "source": source.description, "files": files,
              "bytes": sum(files.values()), "seconds": round(time.time() - started, 1),
              "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = target / f".{EXPORT_MARKER}.tmp"
    tmp.write_text(json.dumps(marker, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, target / EXPORT_MARKER)
    return marker


# ---- upload ------------------------------------------------------------------------------------

def read_token(path: Path) -> str | None:
    try:
        token = path.read_text().strip()
    except OSError:
        token = os.environ.get("HF_TOKEN", "").strip()
    return token or None


def upload_to_hub(directory: Path, repo_id: str, token: str | None, *, step: int, run_id: str,
                  api_factory: Callable[..., Any] | None = None) -> str:
    """Push an export to a Hugging Face model repo (created private when missing): returns the
    repo's URL. The token is an argument of HfApi, never printed."""
    if token is None:
        raise ExportError("no Hugging Face token for the upload: the hf-secret file "
                          f"({HF_TOKEN_FILE}) and HF_TOKEN are empty (gke-grpo:hfToken)")
    if api_factory is None:
        from huggingface_hub import HfApi
        api_factory = HfApi
    api = api_factory(token=token)
    api.create_repo(repo_id=repo_id, repo_type="model", private=True, exist_ok=True)
    api.upload_folder(repo_id=repo_id, repo_type="model", folder_path=str(directory),
                      commit_message=f"gke-grpo: run {run_id}, step {step}",
                      ignore_patterns=[EXPORT_MARKER, ".*"])
    return f"https://huggingface.co/{repo_id}"


# ---- the stage ---------------------------------------------------------------------------------

@dataclass
class ExportRequest:
    run_id: str
    checkpoint_dir: Path
    framework: str | None = None
    steps: tuple[int, ...] = ()           # empty: the latest complete step
    every_steps: int | None = None        # also every complete step that is a multiple of this
    exports_root: Path = Path(EXPORTS_ROOT)
    hub_repo: str | None = None
    hf_token_file: Path = Path(HF_TOKEN_FILE)
    nemo_rl_workdir: str = "/opt/nemo-rl"


def unknown_run_message(run_id: str, checkpoint_dir: Path) -> str:
    parent = checkpoint_dir.parent
    try:
        known = sorted(p.name for p in parent.iterdir() if p.is_dir())
    except OSError:
        known = []
    listed = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
    return (f"unknown run {run_id}: {checkpoint_dir} does not exist (runs with checkpoints in "
            f"{parent}: {listed or 'none'})")


def steps_to_export(request: ExportRequest, checkpoints: Path, framework: str) -> list[int]:
    """The requested steps (default: the latest complete one, and with every_steps each
    complete multiple), each checked to have a complete checkpoint."""
    complete = complete_steps(checkpoints, framework)
    if not complete:
        raise ExportError(f"run {request.run_id} has no complete checkpoint in {checkpoints} yet")
    wanted = list(request.steps) or [complete[-1]]
    if request.every_steps:
        wanted += [s for s in complete if s % request.every_steps == 0]
    for step in wanted:
        if step not in complete:
            raise ExportError(f"step {step} of run {request.run_id} has no complete checkpoint "
                              f"(complete steps in {checkpoints}: "
                              f"{', '.join(map(str, complete))})")
    return sorted(set(wanted))


def export_run(request: ExportRequest, *, runner: Runner = run_on_cluster, out=None,
               api_factory: Callable[..., Any] | None = None) -> list[dict[str, Any]]:
    """Export the requested steps of a run; the markers of the exports (new or found)."""
    try:
        run_dir(request.run_id)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    if request.hub_repo is not None and (problem := hub_repo_problem(request.hub_repo)):
        raise ExportError(f"hub repo {request.hub_repo!r} is not a valid Hugging Face repo id: {problem}")
    checkpoints = request.checkpoint_dir
    if not checkpoints.is_dir():
        raise ExportError(unknown_run_message(request.run_id, checkpoints))
    framework = request.framework or checkpoint_framework(checkpoints)
    if framework not in ("verl", "nemo-rl"):
        raise ExportError(f"{checkpoints} holds no verl (global_step_*) or NeMo RL (step_*) "
                          "checkpoint")
    wanted = steps_to_export(request, checkpoints, framework)
    markers: list[dict[str, Any]] = []
    for step in wanted:
        target = export_dir(request.run_id, step, request.exports_root)
        state = export_state(target)
        if state.complete and state.marker is not None:
            _progress(f"step {step}: {target} is already complete, skipped", out)
            markers.append(state.marker)
            continue
        if target.exists():
            _progress(f"step {step}: {state.reason}: replacing it", out)
        source = find_source(checkpoints, framework, step, target, request.nemo_rl_workdir)
        _progress(f"step {step}: exporting {source.description} -> {target}", out)
        marker = write_export(source, target, run_id=request.run_id, step=step,
                              framework=framework, runner=runner, out=out)
        _progress(f"step {step}: ready: {target} ({marker['bytes'] / 1e9:.2f} GB, "
             f"{len(marker['files'])} files, {marker['seconds']:.0f}s)", out)
        markers.append(marker)
    newest = max(markers, key=lambda m: m["step"])
    if request.hub_repo:
        token = read_token(request.hf_token_file)
        try:
            url = upload_to_hub(export_dir(request.run_id, newest["step"], request.exports_root),
                                request.hub_repo, token, step=newest["step"],
                                run_id=request.run_id, api_factory=api_factory)
        except ExportError:
            raise
        except Exception as exc:
            text = str(exc).replace(token, "[HF_TOKEN]") if token else str(exc)
            raise RuntimeError(f"upload to {request.hub_repo} failed: {type(exc).__name__}: "
                               f"{redact(text)[:500]}") from None
        _progress(f"step {newest['step']}: uploaded to {url}", out)
    for marker in markers:
        line = {k: marker[k] for k in ("run_id", "step", "framework", "method", "bytes")}
        line["path"] = str(export_dir(request.run_id, marker["step"], request.exports_root))
        print(EXPORTED_MARKER + json.dumps(line, sort_keys=True), file=out or sys.stdout, flush=True)
    return markers


def export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.export",
                                     description="Export a run's checkpoint as a Hugging Face "
                                                 "model directory (see the module docstring).")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--checkpoint-dir", help="default: /data/checkpoints/<run-id>")
    parser.add_argument("--framework", choices=("verl", "nemo-rl"),
                        help="default: told from the checkpoint directory's layout")
    parser.add_argument("--step", type=int, action="append", default=[],
                        help="a checkpoint step (repeat; default: the latest complete one)")
    parser.add_argument("--every-steps", type=int, help="also every complete step that is a "
                        "multiple of this (job.evaluate every-K)")
    parser.add_argument("--exports-root", default=EXPORTS_ROOT)
    parser.add_argument("--hub-repo", help="Hugging Face model repo to push the newest export to")
    parser.add_argument("--hf-token-file", default=HF_TOKEN_FILE)
    parser.add_argument("--nemo-rl-workdir", default="/opt/nemo-rl")
    parser.add_argument("--plan", help="take the options of this run plan's export command "
                        "(the deployed plan), then those given here")
    return parser


def request_from_args(argv: Sequence[str]) -> ExportRequest:
    parser = export_parser()
    args = parser.parse_args(argv)
    if args.plan:
        from jobs.contract.run_plan import load_plan

        plan = load_plan(args.plan)
        defaults = export_options(plan)
        # The plan's options first, the command line's after them (argparse: the last wins).
        merged = [*defaults, *argv]
        args = parser.parse_args(merged)
        if args.run_id != plan.run_id:      # another run: only the plan's generic options
            args.hub_repo = None if "--hub-repo" not in argv else args.hub_repo
            if "--framework" not in argv:
                args.framework = None
            args.every_steps = None if "--every-steps" not in argv else args.every_steps
    if any(s < 0 for s in args.step):
        raise ExportError(f"--step {min(args.step)}: a checkpoint step is >= 0")
    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    if checkpoint_dir is None:
        try:
            checkpoint_dir = Path(DATA_LAYOUT.run_checkpoint_dir(args.run_id))
        except ValueError as exc:
            raise ExportError(str(exc)) from None
    return ExportRequest(run_id=args.run_id, checkpoint_dir=checkpoint_dir,
                         framework=args.framework, steps=tuple(args.step),
                         every_steps=args.every_steps, exports_root=Path(args.exports_root),
                         hub_repo=args.hub_repo, hf_token_file=Path(args.hf_token_file),
                         nemo_rl_workdir=args.nemo_rl_workdir)


def export_options(plan) -> list[str]:
    """The options of a plan's export command (its argv after ``-m jobs.head.export``), less the
    run-specific ones (--run-id, --checkpoint-dir, --step), which the caller gives."""
    if plan.export is None:
        return []
    argv = list(plan.export.argv)
    options = argv[argv.index("jobs.head.export") + 1:] if "jobs.head.export" in argv else []
    kept: list[str] = []
    words = iter(options)
    for word in words:
        if word in ("--run-id", "--checkpoint-dir", "--step"):
            next(words, None)       # and its value
            continue
        kept.append(word)
    return kept


def main(argv: Sequence[str] | None = None, *, runner: Runner = run_on_cluster) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        request = request_from_args(argv)
    except SystemExit as exc:
        return int(ExitCode.USAGE) if exc.code else 0
    except ExportError as exc:
        print(f"{LOG_PREFIX} error: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.USAGE)
    except Exception as exc:        # an unreadable plan: RunPlanError
        print(f"{LOG_PREFIX} error: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.USAGE)
    try:
        export_run(request, runner=runner)
    except ExportError as exc:
        print(f"{LOG_PREFIX} error: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.USAGE)
    except Exception as exc:
        print(f"{LOG_PREFIX} failed: {type(exc).__name__}: {redact(str(exc))[:800]}",
              file=sys.stderr, flush=True)
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
