"""The weekly fleet report: what failed, what it cost in GPU-hours, who keeps hurting jobs.

Plain code over the warehouse (sinks/sql.py), no Dagster: `attribution report` and the
`weekly_report` asset both call `build_report` then `write_report`.

    build_report(url, week, cluster=None) -> WeeklyReport   (SQL aggregates, streamed)
    render_charts(report)                  -> {name: PNG bytes}  (matplotlib, Agg)
    render_html(report, charts)            -> one self-contained page (images inline)
    render_markdown(report, images)        -> Markdown next to the PNG files
    write_report(report, out_dir)          -> paths of report.html, report.md, *.png

A job belongs to the week in which it ended (`attribution_jobs.job_end`, from the
scheduler); a result with no job row (the per-job path before it recorded contexts) counts
in the week it was analysed. When a job has results under several rules versions, the
newest written one counts. GPU-hours lost = nodes x GPUs per node x duration of failed jobs;
jobs whose scheduler gave no GPU count are counted apart, never guessed.

Failures are split into four classes (`failure_class`): infrastructure (gpu.*, network.*,
node.*, storage), application (app.*), scheduler policy (scheduler.*, and any TIMEOUT,
PREEMPTED or CANCELLED job not blamed on the infrastructure or the application) and
unexplained (ambiguous, unattributed, not attributed yet). Only the infrastructure share is
"GPU-hours lost to the fleet"; a user's time limit is not the fleet's loss.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import and_, exists, func, or_, select

from attribution_dagster.reports.tables import markdown_table
from attribution_dagster.sinks.sql import SqlSink, jobs_table, results_table, suspects_table

FLEET = "fleet"
MAX_OFFENDERS = 10  # shown per kind; the report model keeps all
# Repeat offenders are infrastructure: a node blamed for a job's own Python error, OOM or
# time limit is where the job ran, not something to go and fix.
INFRA_PREFIXES = ("gpu.", "network.", "node.", "storage")
OFFENDER_KINDS = ("node", "gpu", "port", "switch", "storage")
INFRA = "infrastructure"
APPLICATION = "application"
SCHEDULER = "scheduler policy"
UNEXPLAINED = "unexplained"
CLASSES = (INFRA, APPLICATION, SCHEDULER, UNEXPLAINED)
# the scheduler ended these jobs by its policy (time limit, preemption, cancellation)
POLICY_STATES = ("TIMEOUT", "PREEMPTED", "CANCELLED")


def failure_class(category: str | None, state: str | None = None) -> str:
    """The class of a failed job: by its category when attributed, else by the scheduler's
    state (a TIMEOUT, PREEMPTED or CANCELLED job is policy), else unexplained."""
    cat = category or ""
    if cat.startswith(INFRA_PREFIXES):
        return INFRA
    if cat.startswith("app."):
        return APPLICATION
    if cat.startswith("scheduler."):
        return SCHEDULER
    if (state or "").split(" ")[0].upper() in POLICY_STATES:
        return SCHEDULER
    return UNEXPLAINED


KIND_LABELS = {
    "node": "node",
    "gpu": "GPU (node/PCI id)",
    "port": "network port",
    "switch": "switch (port @ nodes hit together)",
    "storage": "shared storage",
}


class ReportError(ValueError):
    """Bad week or scope; the message says what is expected."""


def parse_week(week: str) -> date:
    """The Monday of `2026-W46` (ISO week) or of the week holding a date `2026-11-09`."""
    m = re.fullmatch(r"(\d{4})-?W(\d{1,2})", week.strip(), flags=re.IGNORECASE)
    try:
        if m:
            return date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
        d = date.fromisoformat(week.strip())
    except ValueError:
        raise ReportError(f"week {week!r}: expected an ISO week like 2026-W46 or a date") from None
    return d - timedelta(days=d.weekday())


def iso_week(monday: date) -> str:
    y, w, _ = monday.isocalendar()
    return f"{y}-W{w:02d}"


class WeekStats(BaseModel):
    """Counts of one week for one scope."""

    jobs: int = 0
    failed: int = 0
    pending: int = 0  # listed by the scheduler, no result yet
    by_status: dict[str, int] = Field(default_factory=dict)
    by_category: dict[str, int] = Field(default_factory=dict)  # attributed failed jobs
    gpu_hours_lost: dict[str, float] = Field(default_factory=dict)  # category or status
    gpu_hours_lost_total: float = 0.0  # over the failed jobs with a GPU count only
    failed_without_gpu_count: int = 0
    # category or status -> failed jobs of it without a GPU count (their hours are unknown)
    gpu_hours_unknown: dict[str, int] = Field(default_factory=dict)
    partial_evidence: int = 0
    ambiguous_why: dict[str, int] = Field(default_factory=dict)
    unattributed_why: dict[str, int] = Field(default_factory=dict)
    daily: dict[str, dict[str, int]] = Field(default_factory=dict)  # day -> status -> jobs
    # failure class (CLASSES) -> failed jobs / GPU-hours of those with a GPU count / jobs
    # without one
    by_class: dict[str, int] = Field(default_factory=dict)
    gpu_hours_by_class: dict[str, float] = Field(default_factory=dict)
    gpu_hours_unknown_by_class: dict[str, int] = Field(default_factory=dict)

    def rate(self, status: str) -> float:
        return self.by_status.get(status, 0) / self.failed if self.failed else 0.0

    @property
    def gpu_hours_known(self) -> bool:
        """Every failed job had a GPU count (no failed job: 0 is known, and true)."""
        return self.failed_without_gpu_count == 0

    @property
    def fleet_gpu_hours(self) -> float:
        """GPU-hours lost to the fleet: the infrastructure class only."""
        return self.gpu_hours_by_class.get(INFRA, 0.0)

    @property
    def fleet_gpu_hours_known(self) -> bool:
        return not self.gpu_hours_unknown_by_class.get(INFRA, 0)

    def class_hours_text(self, cls: str, fmt: str = ",.0f") -> str:
        """GPU-hours of one failure class, in the words of `gpu_hours_text`."""
        return _hours_text(self.gpu_hours_by_class.get(cls, 0.0),
                           self.gpu_hours_unknown_by_class.get(cls, 0),
                           cls in self.gpu_hours_by_class, fmt)

    def gpu_hours_text(self, key: str | None = None, fmt: str = ",.0f") -> str:
        """GPU-hours lost (of one category / status, or in all) for people: a number when
        every job counted had a GPU count; `unknown (N jobs without a GPU count)` when none
        had; `at least X (+N jobs without a GPU count)` when some had. Never a 0 that means
        "not known"."""
        hours = self.gpu_hours_lost.get(key, 0.0) if key else self.gpu_hours_lost_total
        missing = self.gpu_hours_unknown.get(key, 0) if key else self.failed_without_gpu_count
        known = key in self.gpu_hours_lost if key else len(self.gpu_hours_lost) > 0
        return _hours_text(hours, missing, known, fmt)


def _hours_text(hours: float, missing: int, known: bool, fmt: str) -> str:
    if not missing:
        return format(hours, fmt)
    jobs = f"{missing} job{'s' if missing != 1 else ''} without a GPU count"
    return f"at least {format(hours, fmt)} (+{jobs})" if known else f"unknown ({jobs})"


class Offender(BaseModel):
    """Something named as suspect in two or more jobs of the week."""

    kind: str
    name: str
    jobs: list[str]  # cluster/job_id
    categories: dict[str, int] = Field(default_factory=dict)


class WeeklyReport(BaseModel):
    scope: str  # a cluster name or "fleet"
    week: str  # 2026-W46
    start: datetime
    end: datetime
    this: WeekStats
    previous: WeekStats
    offenders: list[Offender] = Field(default_factory=list)
    # category -> what it means (rules/categories.yaml, passed in by the caller: reports read
    # results, not the rules); a category without one is shown by its name
    meanings: dict[str, str] = Field(default_factory=dict)
    generated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    def offenders_of(self, kind: str) -> list[Offender]:
        return [o for o in self.offenders if o.kind == kind]


# -- queries ---------------------------------------------------------------------------------


def _scope_clause(table: Any, cluster: str | None) -> Any:
    return table.c.cluster == cluster if cluster else True


def _population(
    sink: SqlSink, start: datetime, end: datetime, cluster: str | None
) -> Iterator[dict[str, Any]]:
    """One row per job of the week (newest result first per job; the caller keeps one)."""
    j, r = jobs_table, results_table
    cols = [r.c.id, r.c.status, r.c.category, r.c.failed, r.c.partial, r.c.summary]
    by_end = (
        select(j.c.cluster, j.c.job_id, j.c.state, j.c.gpu_hours, j.c.job_end.label("t"), *cols)
        .select_from(
            j.outerjoin(r, and_(r.c.cluster == j.c.cluster, r.c.job_id == j.c.job_id))
        )
        .where(j.c.job_end >= start, j.c.job_end < end, _scope_clause(j, cluster))
        .order_by(j.c.cluster, j.c.job_id, r.c.written_at.desc())
    )
    has_job = exists().where(j.c.cluster == r.c.cluster, j.c.job_id == r.c.job_id)
    by_analysis = (
        select(r.c.cluster, r.c.job_id, r.c.state, r.c.analyzed_at.label("t"), *cols)
        .where(r.c.analyzed_at >= start, r.c.analyzed_at < end, _scope_clause(r, cluster), ~has_job)
        .order_by(r.c.cluster, r.c.job_id, r.c.written_at.desc())
    )
    with sink.engine.connect() as conn:
        for q in (by_end, by_analysis):
            last: tuple[str, str] | None = None
            for row in conn.execution_options(stream_results=True, yield_per=2000).execute(q):
                m = row._mapping
                key = (m["cluster"], m["job_id"])
                if key == last:
                    continue  # an older rules version of the same job
                last = key
                yield dict(m)


_NUMBER = re.compile(r"\d+(\.\d+)?")
_CATEGORY = re.compile(r"\b([a-z]+\.[a-z_]+) \(")


def ambiguous_reason(summary: str | None) -> str:
    """`ambiguous: gpu.lost (...); or network.fabric (...)` -> `gpu.lost vs network.fabric`."""
    cats = sorted(set(_CATEGORY.findall(summary or "")))
    return " vs ".join(cats) if cats else "candidates tied"


def unattributed_reason(summary: str | None, partial: bool) -> str:
    """A short, countable reason: numbers and node lists dropped."""
    if partial:
        return "evidence partial: a source failed or missed nodes"
    text = (summary or "no summary").split(",")[0]
    text = re.sub(r"\(.*?\)", "", text)
    return " ".join(_NUMBER.sub("N", text).split())[:90]


def week_stats(sink: SqlSink, start: datetime, end: datetime, cluster: str | None) -> WeekStats:
    st = WeekStats()
    status: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    lost: defaultdict[str, float] = defaultdict(float)
    unknown: Counter[str] = Counter()
    amb: Counter[str] = Counter()
    una: Counter[str] = Counter()
    daily: defaultdict[str, Counter[str]] = defaultdict(Counter)
    classes: Counter[str] = Counter()
    class_lost: defaultdict[str, float] = defaultdict(float)
    class_unknown: Counter[str] = Counter()
    for row in _population(sink, start, end, cluster):
        st.jobs += 1
        has_result = row["id"] is not None
        s = row["status"] if has_result else "pending"
        failed = bool(row["failed"]) if has_result else (row.get("state") not in ("COMPLETED",))
        status[s] += 1
        t = row["t"]
        if t is not None:
            if t.tzinfo is None:
                t = t.replace(tzinfo=timezone.utc)
            daily[t.date().isoformat()][s] += 1
        if not has_result:
            st.pending += 1
        if has_result and row["partial"]:
            st.partial_evidence += 1
        if not failed:
            continue
        st.failed += 1
        what = row["category"] or s
        cls = failure_class(row["category"] if s == "attributed" else None, row.get("state"))
        classes[cls] += 1
        if s == "attributed" and row["category"]:
            cats[row["category"]] += 1
        elif s == "ambiguous":
            amb[ambiguous_reason(row["summary"])] += 1
        elif s == "unattributed":
            una[unattributed_reason(row["summary"], bool(row["partial"]))] += 1
        hours = row.get("gpu_hours")
        if hours is None:
            st.failed_without_gpu_count += 1
            unknown[what] += 1
            class_unknown[cls] += 1
        else:
            lost[what] += float(hours)
            class_lost[cls] += float(hours)
    st.by_status = dict(status.most_common())
    st.by_category = dict(cats.most_common())
    st.gpu_hours_lost = {k: round(v, 1) for k, v in sorted(lost.items(), key=lambda kv: -kv[1])}
    st.gpu_hours_lost_total = float(round(sum(lost.values()), 1))  # 0 is an int: not a float
    st.gpu_hours_unknown = dict(unknown.most_common())
    st.ambiguous_why = dict(amb.most_common(10))
    st.unattributed_why = dict(una.most_common(10))
    st.daily = {d: dict(c) for d, c in sorted(daily.items())}
    st.by_class = {c: classes[c] for c in CLASSES}
    st.gpu_hours_by_class = {c: float(round(class_lost[c], 1)) for c in CLASSES if c in class_lost}
    st.gpu_hours_unknown_by_class = {c: class_unknown[c] for c in CLASSES if class_unknown[c]}
    return st


def repeat_offenders(
    sink: SqlSink, start: datetime, end: datetime, cluster: str | None, min_jobs: int = 2
) -> list[Offender]:
    """Suspects named in `min_jobs` or more distinct jobs of the week, worst first."""
    s, r, j = suspects_table, results_table, jobs_table
    week_job = exists().where(
        j.c.cluster == r.c.cluster,
        j.c.job_id == r.c.job_id,
        j.c.job_end >= start,
        j.c.job_end < end,
    )
    no_job = ~exists().where(j.c.cluster == r.c.cluster, j.c.job_id == r.c.job_id)
    in_week = week_job | (no_job & (r.c.analyzed_at >= start) & (r.c.analyzed_at < end))
    # Only names that recur at all: the database does the first cut.
    infra = or_(*[r.c.category.startswith(p) for p in INFRA_PREFIXES])
    recurring = (
        select(s.c.kind, s.c.name)
        .select_from(s.join(r, r.c.id == s.c.result_id))
        .where(in_week, infra, _scope_clause(r, cluster))
        .group_by(s.c.kind, s.c.name)
        .having(func.count(func.distinct(r.c.cluster + "/" + r.c.job_id)) >= min_jobs)
    ).subquery()
    q = (
        select(s.c.kind, s.c.name, r.c.cluster, r.c.job_id, r.c.category)
        .select_from(
            s.join(r, r.c.id == s.c.result_id).join(
                recurring, and_(recurring.c.kind == s.c.kind, recurring.c.name == s.c.name)
            )
        )
        .where(in_week, infra, _scope_clause(r, cluster))
    )
    jobs: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    cats: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    with sink.engine.connect() as conn:
        for kind, name, cl, job, cat in conn.execute(q):
            ref = f"{cl}/{job}" if cl else job
            if ref not in jobs[(kind, name)]:
                jobs[(kind, name)].add(ref)
                cats[(kind, name)][cat or "?"] += 1
    found = [
        Offender(kind=k, name=n, jobs=sorted(js), categories=dict(cats[(k, n)].most_common()))
        for (k, n), js in jobs.items()
        if len(js) >= min_jobs
    ]
    found.sort(key=lambda o: (-len(o.jobs), OFFENDER_KINDS.index(o.kind), o.name))
    return found


def build_report(
    url: str,
    week: str | date,
    cluster: str | None = None,
    meanings: dict[str, str] | None = None,
) -> WeeklyReport:
    """The report of one ISO week, for one cluster or (cluster None) the whole fleet;
    `meanings` explain the categories (rules/categories.yaml)."""
    monday = parse_week(week) if isinstance(week, str) else week
    start = datetime(monday.year, monday.month, monday.day, tzinfo=timezone.utc)
    end = start + timedelta(days=7)
    sink = SqlSink(url)
    return WeeklyReport(
        scope=cluster or FLEET,
        week=iso_week(monday),
        start=start,
        end=end,
        this=week_stats(sink, start, end, cluster),
        previous=week_stats(sink, start - timedelta(days=7), start, cluster),
        offenders=repeat_offenders(sink, start, end, cluster),
        meanings=dict(meanings or {}),
    )


# -- rendering -------------------------------------------------------------------------------


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


def _failed_jobs(st: WeekStats, key: str) -> int:
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
            str(_failed_jobs(t, k)),
            t.gpu_hours_text(k),
            _delta(_failed_jobs(t, k), _failed_jobs(p, k)),
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
            "this": [_failed_jobs(t, k) for k in keys],
            "previous": [_failed_jobs(p, k) for k in keys],
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
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#777")


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


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


def _why_rows(why: dict[str, int]) -> list[list[str]]:
    return [[k, str(v)] for k, v in why.items()]


def render_markdown(rep: WeeklyReport, images: dict[str, str]) -> str:
    """Markdown; `images` maps chart name -> link (a file name, or a data URI)."""
    t = rep.this
    parts = [
        f"# Weekly failure report: {rep.scope}, {rep.week}",
        f"{rep.start:%Y-%m-%d} to {rep.end - timedelta(days=1):%Y-%m-%d} (jobs by end time, "
        f"UTC). Generated {rep.generated_at:%Y-%m-%d %H:%M} UTC.",
        markdown_table(SUMMARY_HEADER, summary_rows(rep)),
        "## Failed jobs and GPU-hours lost by category",
        markdown_table(CATEGORY_HEADER, category_rows(rep)),
    ]
    parts += [f"![{n}]({images[n]})" for n in ("failed_by_category", "gpu_hours_lost")
              if n in images]
    parts.append(ACCOUNTING_NOTE)
    if t.failed_without_gpu_count:
        parts.append(f"{t.failed_without_gpu_count} failed jobs had no GPU count from the "
                     "scheduler; their GPU-hours are not counted.")
    parts.append("## Repeat offenders (suspect of an infrastructure failure in two or more jobs)")
    parts.append(markdown_table(OFFENDER_HEADER, offender_rows(rep)) if rep.offenders
                 else "None this week.")
    parts.append("## Why jobs stayed ambiguous or unattributed")
    parts.append(markdown_table(["ambiguous between", "jobs"], _why_rows(t.ambiguous_why))
                 if t.ambiguous_why else "No ambiguous jobs.")
    parts.append(markdown_table(["unattributed because", "jobs"], _why_rows(t.unattributed_why))
                 if t.unattributed_why else "No unattributed jobs.")
    parts.append("## Jobs per day")
    if "jobs_per_day" in images:
        parts.append(f"![jobs_per_day]({images['jobs_per_day']})")
    parts.append(markdown_table(["status", "jobs"], [[k, str(v)] for k, v in t.by_status.items()]))
    return "\n\n".join(parts) + "\n"


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;
color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;
padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.charts img{max-width:49%;vertical-align:top}.muted{color:#777;font-size:12px}
"""


def render_html(rep: WeeklyReport, charts: dict[str, bytes]) -> str:
    """One self-contained page: tables plus the charts as inline PNG data URIs."""
    t = rep.this
    img = {n: f'<img alt="{n}" src="{data_uri(b)}">' for n, b in charts.items()}
    amb = (_html_table(["ambiguous between", "jobs"], _why_rows(t.ambiguous_why))
           if t.ambiguous_why else "<p>No ambiguous jobs.</p>")
    una = (_html_table(["unattributed because", "jobs"], _why_rows(t.unattributed_why))
           if t.unattributed_why else "<p>No unattributed jobs.</p>")
    off = (_html_table(OFFENDER_HEADER, offender_rows(rep)) if rep.offenders
           else "<p>None this week.</p>")
    gpu_note = (f"<p class=muted>{t.failed_without_gpu_count} failed jobs had no GPU count "
                "from the scheduler; their GPU-hours are not counted.</p>"
                if t.failed_without_gpu_count else "")
    title = f"Weekly failure report: {html.escape(rep.scope)}, {rep.week}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head>
<body><h1>{title}</h1>
<p class=muted>{rep.start:%Y-%m-%d} to {rep.end - timedelta(days=1):%Y-%m-%d} (jobs by end
time, UTC). Generated {rep.generated_at:%Y-%m-%d %H:%M} UTC by attribution-dagster.</p>
{_html_table(SUMMARY_HEADER, summary_rows(rep))}
<h2>Failed jobs and GPU-hours lost by category</h2>
<div class=charts>{img.get("failed_by_category", "")}{img.get("gpu_hours_lost", "")}</div>
{_html_table(CATEGORY_HEADER, category_rows(rep))}
<p class=muted>{html.escape(ACCOUNTING_NOTE)}</p>{gpu_note}
<h2>Repeat offenders (suspect of an infrastructure failure in two or more jobs)</h2>{off}
<h2>Why jobs stayed ambiguous or unattributed</h2>{amb}{una}
<h2>Jobs per day</h2><div class=charts>{img.get("jobs_per_day", "")}</div>
</body></html>
"""


def write_report(rep: WeeklyReport, out_dir: str | Path) -> dict[str, Path]:
    """report.html (self-contained), report.md with the PNGs beside it, report.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    charts = render_charts(rep)
    paths: dict[str, Path] = {}
    for name, png in charts.items():
        p = out / f"{name}.png"
        p.write_bytes(png)
        paths[name] = p
    paths["html"] = out / "report.html"
    paths["html"].write_text(render_html(rep, charts), encoding="utf-8")
    paths["md"] = out / "report.md"
    paths["md"].write_text(
        render_markdown(rep, {n: f"{n}.png" for n in charts}), encoding="utf-8"
    )
    paths["json"] = out / "report.json"
    paths["json"].write_text(rep.model_dump_json(indent=2), encoding="utf-8")
    return paths
