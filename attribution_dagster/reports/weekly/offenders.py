"""Repeat offenders: what results name as suspect in two or more jobs.

`repeat_offenders`: the week's, from sinks/sql.py's `attribution_suspects` (one indexed row
per node, GPU, port, switch, switch port, NVLink domain or storage blamed).
`fabric_offenders`: switches, switch ports and NVLink domains across the last weeks, from
`attribution_fault_ports` (the results' `fault_domain`), with the cable suspects marked.

Only infrastructure failures count: a node blamed for a job's own Python error, OOM or time
limit is where the job ran, not something to go and fix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import and_, exists, func, or_, select

from attribution_dagster.reports.weekly.model import (
    FABRIC_KINDS,
    INFRA_PREFIXES,
    LOOKBACK_WEEKS,
    OFFENDER_KINDS,
    FabricOffender,
    Offender,
    iso_week,
)
from attribution_dagster.reports.weekly.stats import scope_clause
from attribution_dagster.sinks.sql import (
    SqlSink,
    fault_ports_table,
    jobs_table,
    results_table,
    suspects_table,
    switch_port_name,
)


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
    # Only names that recur at all: the database does the first cut. A name is a cluster's
    # own (two clusters both have a `node-b`, an `ib-leaf-07`): grouped per cluster, and
    # across the fleet named with it.
    infra = or_(*[r.c.category.startswith(p) for p in INFRA_PREFIXES])
    recurring = (
        select(s.c.kind, s.c.name, r.c.cluster)
        .select_from(s.join(r, r.c.id == s.c.result_id))
        .where(in_week, infra, scope_clause(r, cluster))
        .group_by(s.c.kind, s.c.name, r.c.cluster)
        .having(func.count(func.distinct(r.c.job_id)) >= min_jobs)
    ).subquery()
    q = (
        select(s.c.kind, s.c.name, r.c.cluster, r.c.job_id, r.c.category)
        .select_from(
            s.join(r, r.c.id == s.c.result_id).join(
                recurring,
                and_(recurring.c.kind == s.c.kind, recurring.c.name == s.c.name,
                     recurring.c.cluster == r.c.cluster),
            )
        )
        .where(in_week, infra, scope_clause(r, cluster))
    )
    jobs: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    cats: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    with sink.engine.connect() as conn:
        for kind, name, cl, job, cat in conn.execute(q):
            ref = f"{cl}/{job}" if cl else job
            key = (kind, f"{cl}/{name}" if cluster is None and cl else name)
            if ref not in jobs[key]:
                jobs[key].add(ref)
                cats[key][cat or "?"] += 1
    found = [
        Offender(kind=k, name=n, jobs=sorted(js), categories=dict(cats[(k, n)].most_common()))
        for (k, n), js in jobs.items()
        if len(js) >= min_jobs
    ]
    found.sort(key=lambda o: (-len(o.jobs), OFFENDER_KINDS.index(o.kind), o.name))
    return found



def fabric_offenders(
    sink: SqlSink,
    start: datetime,
    end: datetime,
    cluster: str | None,
    weeks: int = LOOKBACK_WEEKS,
    min_jobs: int = 2,
) -> list[FabricOffender]:
    """Switches, switch ports and NVLink domains named by the `fault_domain` of infrastructure
    failures in `min_jobs` or more jobs of the `weeks` weeks ending at `end`, worst first
    (most jobs, then most weeks). A job's week is its end (or, with no job row, its
    analysis), as in the counts. Fault-domain rows are few (network and NVLink causes with a
    topology only), so they are grouped here rather than in SQL."""
    f, r, j = fault_ports_table, results_table, jobs_table
    since = start - timedelta(days=7 * (max(weeks, 1) - 1))
    infra = or_(*[r.c.category.startswith(p) for p in INFRA_PREFIXES])
    q = (
        select(r.c.cluster, r.c.job_id, r.c.category, r.c.analyzed_at, j.c.job_end, f.c.level,
               f.c.domain, f.c.node, f.c.host_port, f.c.switch, f.c.switch_port)
        .select_from(
            f.join(r, r.c.id == f.c.result_id).outerjoin(
                j, and_(j.c.cluster == r.c.cluster, j.c.job_id == r.c.job_id))
        )
        .where(
            infra,
            r.c.status == "attributed",
            scope_clause(r, cluster),
            or_(
                and_(j.c.job_end >= since, j.c.job_end < end),
                and_(j.c.id.is_(None), r.c.analyzed_at >= since, r.c.analyzed_at < end),
            ),
        )
    )
    acc: dict[tuple[str, str], _Tally] = {}
    with sink.engine.connect() as conn:
        for row in conn.execute(q):
            m = row._mapping
            when = m["job_end"] if m["job_end"] is not None else m["analyzed_at"]
            ref = f"{m['cluster']}/{m['job_id']}" if m["cluster"] else m["job_id"]
            job = (ref, _week_of(when), m["category"] or "?", m["level"])
            kind = "nvlink_domain" if m["level"] == "nvlink_domain" else "switch"
            cable = f"{m['node']} {m['host_port']}" if m["host_port"] else m["node"]
            # switch names are a cluster's own (two fabrics may both have an `ib-leaf-07`):
            # across the fleet, a switch is named with its cluster
            where = f"{m['cluster']}/" if cluster is None and m["cluster"] else ""
            acc.setdefault((kind, where + m["domain"]), _Tally()).add(job, cable)
            if m["switch"] and m["switch_port"]:
                port = switch_port_name(m["switch"], m["switch_port"])
                acc.setdefault(("switch_port", where + port), _Tally()).add(job, cable)
    this_week = iso_week(start.date())
    found = [t.offender(kind, name, this_week) for (kind, name), t in acc.items()
             if len(t.jobs) >= min_jobs]
    found.sort(key=lambda o: (-len(o.jobs), -len(o.weeks), FABRIC_KINDS.index(o.kind),
                              not o.cable_suspect, o.name))
    return found


def _week_of(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    d: date = t.astimezone(timezone.utc).date()
    return iso_week(d - timedelta(days=d.weekday()))


class _Tally:
    """The jobs (once each, whatever the rules versions), weeks, levels and cable ends of one
    switch, switch port or NVLink domain."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[str, str, str]] = {}  # ref -> (week, category, level)
        self.cables: set[str] = set()

    def add(self, job: tuple[str, str, str, str], cable: str | None = None) -> None:
        ref, week, category, level = job
        # a job counts once; `link` wins over a wider level for the same job (its cable)
        if ref not in self.jobs or level == "link":
            self.jobs[ref] = (week, category, level)
        if cable:
            self.cables.add(cable)

    def offender(self, kind: Any, name: str, this_week: str) -> FabricOffender:
        weeks = Counter(w for w, _, _ in self.jobs.values())
        levels = Counter(lv for _, _, lv in self.jobs.values())
        return FabricOffender(
            kind=kind,
            name=name,
            jobs=sorted(self.jobs),
            weeks=dict(sorted(weeks.items())),
            this_week=weeks.get(this_week, 0),
            levels=dict(levels.most_common()),
            cables=sorted(self.cables),
            categories=dict(Counter(c for _, c, _ in self.jobs.values()).most_common()),
            # it failed on its own (one cable) in two or more jobs: the cable or its optics
            cable_suspect=kind == "switch_port" and levels.get("link", 0) >= 2,
        )
