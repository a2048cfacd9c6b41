"""The plots' shared matplotlib style: titles placed without measuring the axes again, which
is safe only while no offset text ("1e6", "+2e6") can be drawn under a title."""

from __future__ import annotations

import pytest

from pgdyno.reports import plots
from pgdyno.reports.plots import plt
from tests.test_report_rendering import iteration, run_summary


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _number(label: str) -> float:
    return float(label.replace("\N{MINUS SIGN}", "-").replace(",", ""))


@pytest.mark.parametrize(("tps", "zoomed"), [([2_000_000.0, 2_000_000.4, 2_000_000.8], False),
                                             ([1_000.1, 1_000.2, 1_000.3], True)])
def test_tick_labels_carry_full_values_and_the_title_clears_them(tps: list[float],
                                                                 zoomed: bool) -> None:
    """Millions of TPS (matplotlib's default writes "1e6" above the axis) and values close
    together (its default writes an offset): the tick labels carry the values themselves,
    nothing is drawn above the axes but the title, and the title lies inside the picture
    without touching any tick label."""
    summary = run_summary([iteration(2, 1, tps, warmup_s=0)])
    fig = plots._tps_timeline(summary)
    assert fig is not None
    ax = fig.axes[0]
    if zoomed:  # the axis around the values, not from zero
        ax.set_ylim(min(tps) - 0.05, max(tps) + 0.05)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert ax.yaxis.offsetText.get_text() == ""
    low, high = ax.get_ylim()
    shown = [(tick, label) for tick, label in zip(ax.get_yticks(), ax.get_yticklabels(),
                                                  strict=True) if low <= tick <= high]
    assert shown
    for tick, label in shown:
        assert _number(label.get_text()) == pytest.approx(tick)
    title = ax.title.get_window_extent(renderer)
    frame = ax.get_window_extent(renderer)
    assert title.ymin >= frame.ymax
    assert not any(title.overlaps(label.get_window_extent(renderer)) for _, label in shown)
