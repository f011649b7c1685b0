"""The report's rows, in the words people read: summary, categories, offenders.

Shared by the Markdown and HTML pages (render.py), the CLI's text tables and the Dagster
asset's metadata.
"""

from __future__ import annotations

from attribution_dagster.reports.weekly.model import (
    CLASSES,
    FABRIC_KINDS,
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


RECOMMENDS = "The report recommends; it never drains a node or acts on a switch."
_ADVICE = {
    "node": "drain candidate: check the node",
    "gpu": "drain candidate: check or replace the GPU",
    "port": "check the host port, its cable and transceiver",
    "switch": "check the switch",
    "switch_port": "check the switch port",
    "nvlink_domain": "check the domain's NVSwitch trays and fabric manager",
    "storage": "check the shared storage",
}
CABLE_SUSPECT = "cable or transceiver suspect: reseat or replace"


WITH_ITS_SWITCH = "hit only with its switch's other ports: check the switch"


def recommendation(rep: WeeklyReport, kind: str, name: str) -> str:
    """What a person might do about an offender. A switch port that failed on its own in
    two or more jobs (any of the weeks looked back) is a cable or transceiver suspect; one
    that never failed on its own points at its switch."""
    if kind == "switch_port":
        for f in rep.fabric_offenders:
            if f.kind == kind and f.name == name:
                if f.cable_suspect:
                    return CABLE_SUSPECT
                if not f.levels.get("link"):
                    return WITH_ITS_SWITCH
    return _ADVICE.get(kind, "check it")


def offender_rows(rep: WeeklyReport, limit: int = MAX_OFFENDERS) -> list[list[str]]:
    """The worst `limit` of each kind (node, GPU, port, switch, switch port, NVLink domain,
    storage), in that order."""
    rows = []
    for kind in OFFENDER_KINDS:
        for o in rep.offenders_of(kind)[:limit]:
            cats = ", ".join(f"{k} x{v}" for k, v in o.categories.items())
            rows.append([KIND_LABELS.get(o.kind, o.kind), o.name, str(len(o.jobs)), cats,
                         _some(o.jobs), recommendation(rep, o.kind, o.name)])
    return rows


def _some(items: list[str], n: int = 8) -> str:
    return ", ".join(items[:n]) + (f" (+{len(items) - n})" if len(items) > n else "")


def fabric_rows(rep: WeeklyReport, limit: int = MAX_OFFENDERS) -> list[list[str]]:
    """Switches, switch ports and NVLink domains across weeks, worst first, `limit` of each."""
    rows = []
    for kind in FABRIC_KINDS:
        for f in [f for f in rep.fabric_offenders if f.kind == kind][:limit]:
            rows.append([
                KIND_LABELS[f.kind], f.name, str(len(f.jobs)), str(f.this_week),
                ", ".join(f"{w} x{n}" for w, n in f.weeks.items()),
                _some(f.cables, 4),
                ", ".join(f"{k} x{v}" for k, v in f.levels.items()),
                recommendation(rep, f.kind, f.name),
            ])
    return rows


def failed_job_rows(rep: WeeklyReport, limit: int | None = None) -> list[list[str]]:
    """The week's failed jobs and their verdicts, worst first (infrastructure, then by
    GPU-hours)."""
    jobs = rep.failed_jobs if limit is None else rep.failed_jobs[:limit]
    return [
        [f.job, f.state or "", f.category or f.status, f.failure_class, _some(f.suspects, 4),
         "unknown" if f.gpu_hours is None else f"{f.gpu_hours:,.1f}", f.summary or ""]
        for f in jobs
    ]


ACCOUNTING_NOTE = (
    "Failures are split into infrastructure (gpu.*, network.*, node.*, storage), application "
    "(app.*), scheduler policy (scheduler.*; TIMEOUT, PREEMPTED, CANCELLED) and unexplained "
    "(ambiguous, unattributed, not attributed yet). Only the infrastructure share is GPU-hours "
    "lost to the fleet."
)
SUMMARY_HEADER = ["", "this week", "previous week", "change"]
CATEGORY_HEADER = ["category", "class", "meaning", "failed jobs", "GPU-hours lost",
                   "change in jobs"]
OFFENDER_HEADER = ["kind", "suspect", "jobs hurt", "categories", "jobs", "recommendation"]
FABRIC_HEADER = ["kind", "name", "jobs hurt", "this week", "weeks", "cable ends", "levels",
                 "recommendation"]
FAILED_JOB_HEADER = ["job", "state", "verdict", "class", "suspects", "GPU-hours", "summary"]


def why_rows(why: dict[str, int]) -> list[list[str]]:
    return [[k, str(v)] for k, v in why.items()]



def figures(rep: WeeklyReport) -> dict[str, float | int | None]:
    """The week's numbers, for plotting over weeks (the asset's metadata) and for scripts
    (`report --json`): failed jobs and GPU-hours lost per failure class, abstention rate.
    A class's GPU-hours are None when a failed job of it had no GPU count (not known, never
    0)."""
    t = rep.this
    out: dict[str, float | int | None] = {"jobs": t.jobs, "failed": t.failed}
    out |= {f"{c} failures": t.by_class.get(c, 0) for c in CLASSES}
    out |= {f"GPU-hours lost: {c}": None if t.gpu_hours_unknown_by_class.get(c)
            else t.gpu_hours_by_class.get(c, 0.0) for c in CLASSES}
    out |= {
        "failed jobs without a GPU count": t.failed_without_gpu_count,
        "abstention rate": round(t.abstention_rate, 4),
        "ambiguous rate": round(t.rate("ambiguous"), 4),
        "unattributed rate": round(t.rate("unattributed"), 4),
        "repeat offenders": len(rep.offenders),
        "cable or transceiver suspects": sum(f.cable_suspect for f in rep.fabric_offenders),
    }
    return out
