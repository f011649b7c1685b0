"""The week's counts from the result tables (sinks/sql.py): one streamed pass per week.

A job belongs to the week in which it ended (`attribution_jobs.job_end`, from the
scheduler); a result with no job row (the per-job path before it recorded contexts) counts
in the week it was analysed. When a job has results under several rules versions, the
newest written one counts.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import and_, exists, select

from attribution_dagster.reports.weekly.model import (
    CLASSES,
    FailedJob,
    WeekStats,
    failure_class,
)
from attribution_dagster.sinks.sql import SqlSink, jobs_table, results_table


def scope_clause(table: Any, cluster: str | None) -> Any:
    return table.c.cluster == cluster if cluster else True


def _population(
    sink: SqlSink, start: datetime, end: datetime, cluster: str | None
) -> Iterator[dict[str, Any]]:
    """One row per job of the week (newest result first per job; the caller keeps one)."""
    j, r = jobs_table, results_table
    cols = [r.c.id, r.c.status, r.c.category, r.c.failed, r.c.partial, r.c.summary,
            r.c.suspect_nodes]
    by_end = (
        select(j.c.cluster, j.c.job_id, j.c.state, j.c.gpu_hours, j.c.job_end.label("t"), *cols)
        .select_from(
            j.outerjoin(r, and_(r.c.cluster == j.c.cluster, r.c.job_id == j.c.job_id))
        )
        .where(j.c.job_end >= start, j.c.job_end < end, scope_clause(j, cluster))
        .order_by(j.c.cluster, j.c.job_id, r.c.written_at.desc())
    )
    has_job = exists().where(j.c.cluster == r.c.cluster, j.c.job_id == r.c.job_id)
    by_analysis = (
        select(r.c.cluster, r.c.job_id, r.c.state, r.c.analyzed_at.label("t"), *cols)
        .where(r.c.analyzed_at >= start, r.c.analyzed_at < end, scope_clause(r, cluster), ~has_job)
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


def week_stats(
    sink: SqlSink,
    start: datetime,
    end: datetime,
    cluster: str | None,
    failed_jobs: list[FailedJob] | None = None,
) -> WeekStats:
    """The week's counts in one streamed pass; `failed_jobs`, when given, receives every
    failed job with its verdict (in no order)."""
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
        if failed_jobs is not None:
            failed_jobs.append(_failed_job(row, s, cls, t))
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



def _failed_job(row: dict[str, Any], status: str, cls: str, ended: datetime | None) -> FailedJob:
    try:
        suspects = [str(n) for n in json.loads(row.get("suspect_nodes") or "[]")]
    except (TypeError, ValueError):
        suspects = []
    hours = row.get("gpu_hours")
    return FailedJob(
        job=f"{row['cluster']}/{row['job_id']}" if row["cluster"] else row["job_id"],
        state=row.get("state"),
        status=status,
        category=row["category"] if status == "attributed" else None,
        failure_class=cls,
        suspects=suspects,
        summary=row["summary"],
        gpu_hours=None if hours is None else round(float(hours), 1),
        ended=ended,
    )


def worst_first(jobs: list[FailedJob]) -> list[FailedJob]:
    """Infrastructure first (the fleet's loss), then application, policy, unexplained; within
    a class the most GPU-hours first (unknown hours last), then by job."""
    return sorted(jobs, key=lambda f: (CLASSES.index(f.failure_class),
                                       -(f.gpu_hours if f.gpu_hours is not None else -1.0),
                                       f.job))
