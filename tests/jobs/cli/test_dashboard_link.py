"""The stack's Cloud Monitoring dashboard (stack output dashboardUrl, components/monitoring.py) in
the report and in `gke-grpo status`, when the stack is given; nothing when it is not."""

from __future__ import annotations

from jobs.cli.report import build_report, collect_inputs, run_status_rows
from jobs.cli.stack_outputs import target_from_outputs
from tests.jobs.cli.test_report_sections import _dev_spec
from tools.synthetic_run import write_synthetic_run

URL = "https://console.cloud.google.com/monitoring/dashboards/builder/0123abcd?project=my-grpo-dev"


def test_the_report_and_the_offline_status_link_the_dashboard(tmp_path):
    run = write_synthetic_run(tmp_path / "exp-dash", "verl", total_steps=4)
    inputs = collect_inputs(run.path, spec=_dev_spec(), now=run.end_time + 10)
    assert 'id="dashboard"' not in build_report(inputs).html
    assert not [r for r in run_status_rows(inputs) if r[0] == "dashboard"]
    inputs.dashboard_url = URL
    assert f'<a href="{URL}">' in build_report(inputs).html
    assert ("dashboard", URL) in run_status_rows(inputs)


def test_the_stack_outputs_carry_the_dashboard_url():
    outputs = {"rayNamespace": "grpo", "rayClusterName": "grpo-dev", "rayDashboardService": "grpo-dev-head-svc",
               "dashboardUrl": URL}
    assert target_from_outputs(outputs, stack="dev", source="deployed", origin="test").dashboard_url == URL
    del outputs["dashboardUrl"]
    assert target_from_outputs(outputs, stack="dev", source="deployed", origin="test").dashboard_url is None
