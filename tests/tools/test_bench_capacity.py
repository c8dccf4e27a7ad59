"""The capacity benchmark's command line (tools/bench_capacity.py): the KubeRay stand-in path's
minutes refused with one line each, before any cluster starts. The benchmark itself prints figures
and is not run here."""

from __future__ import annotations

import pytest

from tools import bench_capacity


@pytest.mark.parametrize("argv,phrase", [
    (["--kuberay", "--bring-up-minutes", "0"], "minutes must be above 0 and at most 120: '0'"),
    (["--kuberay", "--bring-up-minutes", "-2"], "minutes must be above 0 and at most 120: '-2'"),
    (["--kuberay", "--bring-up-minutes", "nan"], "minutes must be above 0 and at most 120: 'nan'"),
    (["--kuberay", "--bring-up-minutes", "121"], "minutes must be above 0 and at most 120: '121'"),
    (["--kuberay", "--bring-up-minutes", "two"], "not a number of minutes: 'two'"),
    (["--kuberay", "--trainer-minutes", "inf"], "minutes must be above 0 and at most 120: 'inf'"),
    (["--kuberay", "--nodes", "0"], "--nodes must be at least 1"),
])
def test_bad_minutes_and_nodes_are_refused_before_anything_starts(argv, phrase, capsys, monkeypatch):
    monkeypatch.setattr(bench_capacity, "measure_kuberay", lambda args: pytest.fail("started"))
    with pytest.raises(SystemExit) as exit_:
        bench_capacity.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert phrase in err and "Traceback" not in err
