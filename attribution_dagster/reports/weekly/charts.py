"""The report's three bar charts (matplotlib, Agg backend, imported only when drawn)."""

from __future__ import annotations

import base64
import io
from datetime import timedelta
from typing import Any

from attribution_dagster.reports.weekly.model import INFRA, WeeklyReport
from attribution_dagster.reports.weekly.rows import category_keys, failed_jobs_of


def chart_data(rep: WeeklyReport) -> dict[str, dict[str, list[Any]]]:
    """What the bar charts draw, top to bottom, in the order of the category table:
    `failed_by_category` (labels, this week, previous week; a category seen only last week
    is kept at 0 this week) and `gpu_hours_lost` (labels, hours; categories with hours)."""
    t, p = rep.this, rep.previous
    keys = [k for k in category_keys(rep) if k != "pending"]
    lost = [k for k in category_keys(rep) if k in t.gpu_hours_lost]
    return {
        "failed_by_category": {
            "labels": keys,
            "this": [failed_jobs_of(t, k) for k in keys],
            "previous": [failed_jobs_of(p, k) for k in keys],
        },
        "gpu_hours_lost": {"labels": lost, "hours": [t.gpu_hours_lost[k] for k in lost]},
    }


def chart_figures(rep: WeeklyReport) -> dict[str, Any]:
    """The three matplotlib figures (failed jobs and GPU-hours lost by category, jobs per
    day): integer ticks for counts, legends outside the plot, bars in table order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figs: dict[str, Any] = {}
    t = rep.this
    data = chart_data(rep)
    d = data["failed_by_category"]
    keys = d["labels"]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(keys) + 1.4))
    y = range(len(keys))
    ax.barh([i - 0.2 for i in y], d["this"], height=0.4, label=rep.week, color="#c0392b")
    ax.barh([i + 0.2 for i in y], d["previous"], height=0.4, label="previous week",
            color="#bbbbbb")
    for i, (now, before) in enumerate(zip(d["this"], d["previous"], strict=True)):
        if before and not now:  # seen last week only: kept, and said
            ax.text(0.05, i - 0.2, "-100%", va="center", fontsize=7, color="#c0392b")
    ax.set_yticks(list(y), keys)
    ax.invert_yaxis()  # the first row of the table on top
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("failed jobs")
    ax.set_title(f"{rep.scope} {rep.week}: failed jobs by category")
    if keys:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    else:
        _empty(ax, "no failed jobs this week")
    figs["failed_by_category"] = fig

    d = data["gpu_hours_lost"]
    keys = d["labels"]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(keys) + 1.4))
    ax.barh(keys, d["hours"], color="#8e44ad")
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours lost (nodes x GPUs x duration of failed jobs)")
    ax.set_title(f"{rep.scope} {rep.week}: GPU-hours lost to the fleet (infrastructure): "
                 f"{t.class_hours_text(INFRA)}", fontsize=9)
    if not keys:
        n = t.failed_without_gpu_count
        _empty(ax, f"GPU-hours unknown: {n} failed job{'s' if n != 1 else ''} without a GPU "
               "count" if n else "no GPU-hours lost this week")
    figs["gpu_hours_lost"] = fig

    days = [(rep.start + timedelta(days=i)).date().isoformat() for i in range(7)]
    statuses = ["not_failed", "attributed", "ambiguous", "unattributed", "pending"]
    colors = ["#95a5a6", "#c0392b", "#f39c12", "#2c3e50", "#3498db"]
    fig, ax = plt.subplots(figsize=(7, 3))
    bottom = [0] * 7
    for s, c in zip(statuses, colors, strict=True):
        vals = [t.daily.get(d, {}).get(s, 0) for d in days]
        if any(vals):
            ax.bar([d[5:] for d in days], vals, bottom=bottom, label=s, color=c)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("jobs ended")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"{rep.scope} {rep.week}: jobs per day by status")
    if any(bottom):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        _empty(ax, "no jobs ended this week")
    figs["jobs_per_day"] = fig
    return figs


def render_charts(rep: WeeklyReport) -> dict[str, bytes]:
    """Three PNG charts (`chart_figures`)."""
    import matplotlib.pyplot as plt

    charts: dict[str, bytes] = {}
    for name, fig in chart_figures(rep).items():
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        charts[name] = buf.getvalue()
    return charts


def _empty(ax: Any, text: str) -> None:
    """Say why there is nothing to draw, with no axis: an empty axis reads as a zero."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("")
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#777")


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

