"""A split layout's run in the report and `gke-grpo status` (jobs/cli/split_view.py): the
asynchronous trainer, each pool with its nodes, capacity source and cost per hour, and how long
each side waited for the other, from the frameworks' own TensorBoard tags (jobs/cli/metrics.py
ASYNC_TAGS). The runs are synthetic (tools/synthetic_run.py) with each placed node's ``pool``
(jobs/head/gpu_wait.py GpuNode.placement) and the wait scalars written here with the same event
file writer; a colocated run's page and status stay as they were."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jobs.cli.gpu_status import gpu_nodes
from jobs.cli.report import CostBasis, build_report, collect_inputs, run_status_rows
from jobs.cli.split_view import pool_node_rows, split_html, split_status_rows
from jobs.contract.records import EVENTS_FILE, tensorboard_dir
from tests.jobs.cli.test_report_sections import _dev_spec, _page
from tools.synthetic_run import write_scalar_events, write_synthetic_run

# The synthetic run: start 0 logs steps 1-12, start 1 resumes from step 10 and logs 11-20.
STEPS, CRASH = 20, 12
GPU_CAPACITY = {"machineType": "a3-ultragpu-8g", "currency": "USD", "workerGroup": "gpu-workers",
                "pools": [{"pool": "rollout", "workerGroup": "rollout-workers", "nodes": 1, "source": "Spot",
                           "hourly": 50.09},
                          {"pool": "trainer", "workerGroup": "trainer-workers", "nodes": 1,
                           "source": "reservation r1", "hourly": 88.5}]}


def _pool_placements(path, pools=("rollout", "trainer")) -> None:
    """Each trainer start's nodes in events.jsonl get a pool, as a split run's GPU wait records them."""
    events = [json.loads(line) for line in (path / EVENTS_FILE).read_text().splitlines()]
    for event in events:
        if event["event"] == "trainer_start":
            for node, pool in zip(event["gpu_nodes"], pools, strict=True):
                node["pool"] = pool
    (path / EVENTS_FILE).write_text("".join(json.dumps(e) + "\n" for e in events))


def _wait_points(step_tag: str, tags: dict[str, float], step: int, wall: float):
    """One step's wait scalars and a step time of 40 s (written later, so it wins over the
    synthetic run's own step time of that step)."""
    return [(step_tag, step, 40.0, wall)] + [(tag, step, value, wall) for tag, value in tags.items()]


def _write_waits(run, step_tag: str, tags_of) -> None:
    wall = run.end_time + 100.0
    for start, steps in ((0, range(1, CRASH + 1)), (1, range(11, STEPS + 1))):
        points = [p for step in steps for p in _wait_points(step_tag, tags_of(step), step, wall)]
        write_scalar_events(tensorboard_dir(run.path, 1, start), points)


def _verl_fully_async(step: int) -> dict[str, float]:
    # the trainer waits 10 s of its 40 s in steps 1-10, 6 s after; the rollouter idles 40%, 30% last
    gen = 10.0 if step <= 10 else 6.0
    return {"timing_s/gen": gen, "fully_async/trainer/idle_ratio": gen / 40.0,
            "fully_async/rollouter/idle_ratio": 0.3 if step == STEPS else 0.4,
            "timing_s/timing_s/param_sync": 1.5}


@pytest.fixture(scope="module")
def verl_split(tmp_path_factory):
    run = write_synthetic_run(tmp_path_factory.mktemp("split") / "exp-split-verl", "verl",
                              total_steps=STEPS, crash_after=CRASH)
    _pool_placements(run.path)
    _write_waits(run, "timing_s/step", _verl_fully_async)
    return run


def _split_spec(trainer: str = "fully-async"):
    return dataclasses.replace(_dev_spec(), layout="split", asynchronous_trainer=trainer, rollout_nodes=1,
                               trainer_nodes=1, staleness_threshold=0.5, trigger_parameter_sync_step=4)


def test_a_split_runs_report_shows_both_pools_their_sources_and_the_waits(verl_split):
    inputs = collect_inputs(verl_split.path, spec=_split_spec(), now=verl_split.end_time + 200)
    inputs.gpu_capacity = GPU_CAPACITY
    page, html = _page(inputs)
    assert html.index('id="attempts"') < html.index('id="split-layout"') < html.index('id="checkpoint"')
    assert "<dt>layout</dt>" in html                       # the summary's row
    assert "split: rollout and trainer pools, verl&#x27;s fully-async trainer (staleness threshold 0.5, " \
           "parameter sync every 4)" in html
    header, *rows = page.tables["pools-table"]
    pools = {row[0]: dict(zip(header, row)) for row in rows}
    assert pools["rollout"]["Ray worker group"] == "rollout-workers" and pools["rollout"]["nodes"] == "1"
    assert pools["rollout"]["capacity source"] == "Spot"
    assert pools["rollout"]["cost per hour"] == "50.09 USD /h"
    assert pools["trainer"]["capacity source"] == "reservation r1"
    assert pools["trainer"]["cost per hour"] == "88.50 USD /h"
    # the nodes the latest start got in each pool, from the placement records
    assert pools["rollout"]["nodes placed (latest start)"] == "1 x flex-start (gke-gpu-flexstart-2)"
    assert pools["trainer"]["nodes placed (latest start)"] == "1 x flex-start (gke-gpu-flexstart-3)"
    assert "Both pools: 138.59 USD per hour" in html
    waits = dict(page.tables["waits-summary"][1:])
    # steps 1-10 wait 10 s, 11-20 wait 6 s (start 1's re-logged 11 and 12 win), each of 40 s
    assert waits["trainer waited for rollouts"] == "160.0 s of 800.0 s (20%) over 20 logged steps"
    assert waits["median wait per logged step"] == "8.0 s"
    assert waits["trainer idle ratio (mean)"] == "20%"
    assert waits["rollouter idle ratio (mean)"] == "40%"      # 19 x 0.4 + 0.3, over 20
    header, *rows = page.tables["waits-table"]
    assert [row[0] for row in rows] == [str(s) for s in range(11, 21)]
    last = dict(zip(header, rows[-1]))
    assert last == {"step": "20", "trainer wait": "6.0 s", "step time": "40.0 s", "wait share": "15%",
                    "trainer idle": "15%", "rollouter idle": "30%", "weight sync": "1.5 s"}
    assert "fully_async/rollouter/idle_ratio" in html


def test_a_split_runs_status_shows_the_layout_pools_and_latest_waits(verl_split):
    inputs = collect_inputs(verl_split.path, spec=_split_spec(), now=verl_split.end_time + 200)
    inputs.gpu_capacity = GPU_CAPACITY
    rows = dict(run_status_rows(inputs))
    assert rows["layout"].startswith("split: rollout and trainer pools, verl's fully-async trainer")
    assert rows["pools"] == "rollout 1 node(s), Spot, 50.09 USD/h; trainer 1 node(s), reservation r1, 88.50 USD/h"
    assert rows["waits"] == ("step 20: trainer waited 6.0 s of 40.0 s, rollouter idle 30%; over 20 logged "
                             "steps the trainer waited 20% of its time [TensorBoard]")


def test_without_the_stack_the_pools_come_from_the_placement_records_and_the_rates(verl_split):
    """No --stack: the run is split because its nodes carry pools; the trainer is read from the
    tags, the sources from the placements and the cost from the run's per-source rates."""
    inputs = collect_inputs(verl_split.path, cost_basis=CostBasis("a3-ultragpu-8g", "spot", 2),
                            now=verl_split.end_time + 200)
    rows = dict(split_status_rows(inputs))
    assert rows["layout"] == "split: rollout and trainer pools, verl's fully-async trainer"
    rate = inputs.cost.rates["flexStart"].per_node_hour
    assert rows["pools"] == (f"rollout ? node(s), 1 x flex-start, {rate:,.2f} USD/h; "
                             f"trainer ? node(s), 1 x flex-start, {rate:,.2f} USD/h")
    page, _ = _page(inputs)
    header, *rows_ = page.tables["pools-table"]
    assert dict(zip(header, rows_[0]))["rate from"] == "its placed nodes' sources (data/prices.yaml)"


def test_nemo_rls_async_wait_is_its_exposed_generation_against_the_step_time(tmp_path):
    run = write_synthetic_run(tmp_path / "exp-split-nemo", "nemo-rl", total_steps=STEPS, crash_after=CRASH)
    _pool_placements(run.path)
    _write_waits(run, "timing/train/total_step_time",
                 lambda step: {"timing/train/exposed_generation": 10.0, "timing/train/weight_sync": 2.0,
                               "train/avg_trajectory_age": 0.8})
    inputs = collect_inputs(run.path, spec=dataclasses.replace(_split_spec("async-grpo"), framework="nemo-rl"),
                            now=run.end_time + 200)
    page, html = _page(inputs)
    waits = dict(page.tables["waits-summary"][1:])
    assert waits["trainer waited for rollouts"] == "200.0 s of 800.0 s (25%) over 20 logged steps"
    assert "rollouter idle ratio (mean)" not in waits            # NeMo RL logs none
    assert "timing/train/exposed_generation" in html and "training_worker_idle_time_ratio" not in html
    header, *rows = page.tables["waits-table"]
    assert dict(zip(header, rows[-1]))["weight sync"] == "2.0 s"
    assert dict(split_status_rows(inputs))["waits"].startswith("step 20: trainer waited 10.0 s of 40.0 s;")


def test_a_colocated_run_shows_no_split_section_and_no_wait_figures(tmp_path):
    """verl's colocated trainer logs timing_s/gen too (the generation itself, not a wait): it is
    not read as one, and the page and status rows are those of a run without the wait tags."""
    run = write_synthetic_run(tmp_path / "exp-colocated", "verl", total_steps=STEPS, crash_after=CRASH)
    before = collect_inputs(run.path, spec=_dev_spec(), now=run.end_time + 200)
    html_before = build_report(before).html
    status_before = run_status_rows(before)
    write_scalar_events(tensorboard_dir(run.path, 1, 1),
                        [("timing_s/gen", step, 30.0, run.end_time + 100) for step in range(11, STEPS + 1)])
    inputs = collect_inputs(run.path, spec=_dev_spec(), now=run.end_time + 200)
    assert not any("trainer_wait" in r.values for r in inputs.metrics.merged())
    assert split_html(inputs) == "" and split_status_rows(inputs) == []
    assert build_report(inputs).html == html_before
    assert run_status_rows(inputs) == status_before
    assert not {"layout", "pools", "waits"} & {key for key, _ in status_before}


def test_live_status_counts_each_pools_nodes_by_the_resource_its_ray_node_advertises():
    def node(node_id, pool=None):
        total = {"CPU": 200, "GPU": 8, **({f"gke_grpo_{pool}_pool": 1} if pool else {})}
        return {"node_id": node_id, "state": "ALIVE", "node_ip": "10.0.0.1", "resources_total": total,
                "labels": {"cloud.google.com/gke-spot": "true", "gke-grpo/node-name": f"node-{node_id}"}}

    nodes = gpu_nodes({"result": True, "data": {"result": {"result": [node("a", "rollout"), node("b")]}}})
    assert [n.get("pool") for n in nodes] == ["rollout", None]
    assert "pool" not in nodes[1]                                    # a colocated node's record as before
    assert pool_node_rows(nodes, {"rollout": 1, "trainer": 2}) == [
        ("GPU pools", "rollout 1 up of 1 (1 x Spot), trainer 0 up of 2")]
    assert pool_node_rows([n for n in nodes if "pool" not in n], {}) == []     # colocated: no row


def test_the_live_status_gpu_rows_add_the_pools_of_a_split_spec_or_the_stack_output():
    from types import SimpleNamespace

    from jobs.cli.live_commands import gpu_rows

    state = {"result": True, "data": {"result": {"result": [
        {"node_id": "a", "state": "ALIVE", "node_ip": "10.0.0.1", "labels": {"cloud.google.com/gke-spot": "true"},
         "resources_total": {"GPU": 8, "gke_grpo_trainer_pool": 1}}]}}}
    runs = SimpleNamespace(cluster_nodes=lambda: state)
    attempt = SimpleNamespace(live=True)
    split = SimpleNamespace(spec=_split_spec(), stack=None)
    assert dict(gpu_rows(runs, split, attempt, ""))["GPU pools"] == "rollout 0 up of 1, trainer 1 up of 1 (1 x Spot)"
    from_output = SimpleNamespace(spec=None, stack=SimpleNamespace(gpu_capacity=GPU_CAPACITY))
    assert dict(gpu_rows(runs, from_output, attempt, ""))["GPU pools"].startswith("rollout 0 up of 1, trainer 1 up of 1")
    colocated = SimpleNamespace(spec=_dev_spec(), stack=None)
    state["data"]["result"]["result"][0]["resources_total"] = {"GPU": 8}
    assert "GPU pools" not in dict(gpu_rows(runs, colocated, attempt, ""))
