"""The report's figures (jobs/cli/report_figures.py): a constant series is drawn as a constant."""

from __future__ import annotations

import pytest

from jobs.cli.report_figures import _pyplot, _show_constant, constant_value


@pytest.mark.parametrize("ys,value", [([1e-6] * 5, 1e-6), ([0.0, 0.0], 0.0), ([1.0, 1.0000001], None), ([], None)])
def test_a_constant_series_is_recognised(ys, value):
    assert constant_value(ys) == value


def test_a_constant_learning_rate_has_an_axis_from_zero_and_no_offset():
    plt = _pyplot()
    fig, ax = plt.subplots()
    try:
        ys = [1e-6] * 30
        ax.plot(range(30), ys)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        _show_constant(ax, ys)
        fig.canvas.draw()
        assert ax.get_ylim() == pytest.approx((0.0, 2e-6))
        assert ax.yaxis.get_major_formatter().get_useOffset() is False
        assert "constant: 1e-06" in [t.get_text() for t in ax.texts]
        # A varying series keeps matplotlib's own axis.
        fig2, ax2 = plt.subplots()
        ax2.plot([0, 1], [0.2, 0.4])
        before = ax2.get_ylim()
        _show_constant(ax2, [0.2, 0.4])
        assert ax2.get_ylim() == before and not ax2.texts
        plt.close(fig2)
    finally:
        plt.close(fig)
