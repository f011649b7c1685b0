"""Repeat offenders: what results name as suspect in two or more jobs (sinks/sql.py's
`attribution_suspects`, one indexed row per node, GPU, port, switch or storage blamed).

Only infrastructure failures count: a node blamed for a job's own Python error, OOM or time
limit is where the job ran, not something to go and fix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from sqlalchemy import and_, exists, func, or_, select

from attribution_dagster.reports.weekly.model import INFRA_PREFIXES, OFFENDER_KINDS, Offender
from attribution_dagster.reports.weekly.stats import scope_clause
from attribution_dagster.sinks.sql import SqlSink, jobs_table, results_table, suspects_table


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
        .where(in_week, infra, scope_clause(r, cluster))
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
        .where(in_week, infra, scope_clause(r, cluster))
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

