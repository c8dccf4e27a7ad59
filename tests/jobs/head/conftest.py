"""The run driver reads its plan only when its directories lie under the shared storage's mount
(jobs/contract/run_plan.py: run_dir below <root>/runs/, checkpoint_dir below <root>/checkpoints/).
Here each test's tmp_path stands in for /data (GKE_GRPO_DATA_ROOT), for the driver run in-process
and as a subprocess alike."""

from __future__ import annotations

import pytest

from jobs.contract.run_plan import DATA_ROOT_ENV


@pytest.fixture(autouse=True)
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path))
    return tmp_path
