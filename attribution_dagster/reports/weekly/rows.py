"""The report's rows, in the words people read: summary, categories, offenders.

Shared by the Markdown and HTML pages (render.py), the CLI's text tables and the Dagster
asset's metadata.
"""

from __future__ import annotations

from attribution_dagster.reports.weekly.model import (
    CLASSES,
    INFRA,
    KIND_LABELS,
    MAX_OFFENDERS,
    OFFENDER_KINDS,
    WeeklyReport,
    WeekStats,
    failure_class,
)


def _delta(now: float, before: float) -> str:
    d = now - before
    if before == 0:
        return "new" if now else "0"
    return f"{d:+.0f} ({d / before:+.0%})"


def summary_rows(rep: WeeklyReport) -> list[list[str]]:
    t, p = rep.this, rep.previous
    failed_share = f"{t.failed / t.jobs:.1%}" if t.jobs else "-"
    return [
        ["jobs", f"{t.jobs}", f"{p.jobs}", _delta(t.jobs, p.jobs)],
        ["failed", f"{t.failed} ({failed_share})", f"{p.failed}", _delta(t.failed, p.failed)],
        *[[f"  {c} failures", f"{t.by_class.get(c, 0)}", f"{p.by_class.get(c, 0)}",
           _delta(t.by_class.get(c, 0), p.by_class.get(c, 0))] for c in CLASSES],
        ["GPU-hours lost to the fleet (infrastructure)", t.class_hours_text(INFRA),
         p.class_hours_text(INFRA),
         _delta(t.fleet_gpu_hours, p.fleet_gpu_hours)
         if t.fleet_gpu_hours_known and p.fleet_gpu_hours_known else ""],
        *[[f"  GPU-hours of {c} failures", t.class_hours_text(c), p.class_hours_text(c), ""]
          for c in CLASSES[1:]],
        ["ambiguous (of failed)", f"{t.rate('ambiguous'):.1%}", f"{p.rate('ambiguous'):.1%}", ""],
        ["unattributed (of failed)", f"{t.rate('unattributed'):.1%}",
         f"{p.rate('unattributed'):.1%}", ""],
        ["not attributed yet", f"{t.pending}", f"{p.pending}", ""],
    ]


_STATUS_ROWS = ("ambiguous", "unattributed", "pending")  # rows that are statuses, not categories


def failed_jobs_of(st: WeekStats, key: str) -> int:
    return st.by_status.get(key, 0) if key in _STATUS_ROWS else st.by_category.get(key, 0)


def category_keys(rep: WeeklyReport) -> list[str]:
    """The rows of the category table, and the bars of its charts, top to bottom: this
    week's categories (most jobs first), then ambiguous / unattributed / pending, then the
    categories seen only last week (shown at -100%)."""
    t, p = rep.this, rep.previous
    other = [k for k in _STATUS_ROWS if t.by_status.get(k)]
    before = [k for k in _STATUS_ROWS if p.by_status.get(k) and k != "pending"]
    return list(dict.fromkeys([*t.by_category, *other, *t.gpu_hours_lost, *p.by_category,
                               *before]))


def category_rows(rep: WeeklyReport) -> list[list[str]]:
    """Per category (plus ambiguous / unattributed / pending): failed jobs, GPU-hours."""
    t, p = rep.this, rep.previous
    keys = category_keys(rep)
    return [
        [
            k,
            failure_class(None if k in _STATUS_ROWS else k),
            rep.meanings.get(k, k.replace("_", " ")),
            str(failed_jobs_of(t, k)),
            t.gpu_hours_text(k),
            _delta(failed_jobs_of(t, k), failed_jobs_of(p, k)),
        ]
        for k in keys
    ]


def offender_rows(rep: WeeklyReport, limit: int = MAX_OFFENDERS) -> list[list[str]]:
    """The worst `limit` of each kind (node, GPU, port, switch, storage), in that order."""
    rows = []
    for kind in OFFENDER_KINDS:
        for o in rep.offenders_of(kind)[:limit]:
            shown = ", ".join(o.jobs[:8]) + (f" (+{len(o.jobs) - 8})" if len(o.jobs) > 8 else "")
            cats = ", ".join(f"{k} x{v}" for k, v in o.categories.items())
            rows.append([KIND_LABELS.get(o.kind, o.kind), o.name, str(len(o.jobs)), cats, shown])
    return rows




ACCOUNTING_NOTE = (
    "Failures are split into infrastructure (gpu.*, network.*, node.*, storage), application "
    "(app.*), scheduler policy (scheduler.*; TIMEOUT, PREEMPTED, CANCELLED) and unexplained "
    "(ambiguous, unattributed, not attributed yet). Only the infrastructure share is GPU-hours "
    "lost to the fleet."
)
SUMMARY_HEADER = ["", "this week", "previous week", "change"]
CATEGORY_HEADER = ["category", "class", "meaning", "failed jobs", "GPU-hours lost",
                   "change in jobs"]
OFFENDER_HEADER = ["kind", "suspect", "jobs hurt", "categories", "jobs"]


def why_rows(why: dict[str, int]) -> list[list[str]]:
    return [[k, str(v)] for k, v in why.items()]

