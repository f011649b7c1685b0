"""Results in a SQL database: a SQLite file by default, or any SQLAlchemy URL (PostgreSQL, ...).

Tables, created on first use (docs/fleet.md draws them):

- ``attribution_results``: one row per (cluster, job_id, rules_version), with the columns a
  fleet report filters on and the whole contract JSON;
- ``attribution_symptoms``: the symptom chain, one row per link (role, kind, node, time);
- ``attribution_evidence``: the evidence list, one row per reference (source, locator);
- ``attribution_suspects``: what a result names as suspect, one row per node / GPU (PCI id)
  / network port / switch / switch port / NVLink domain / shared storage, so the weekly
  report finds repeat offenders by index;
- ``attribution_fault_ports``: the result's ``fault_domain`` (where a network or NVLink cause
  sits in the topology), one row per cable (node, host port, switch, switch port) with the
  domain's level and name, so the report groups switch ports across jobs and weeks;
- ``attribution_jobs``: one row per (cluster, job_id): the scheduler's facts the report
  needs (end time, nodes, GPUs per node, GPU-hours) and the window that listed the job;
- ``attribution_windows``: one row per (cluster, window) of the fleet path: its status,
  job count and, when it failed, why.

New tables only, never new columns on old ones: ``create_all`` adds missing tables to an
existing database, so a results file from an earlier version keeps working.

Writing the same job again under the same rules version replaces its rows (idempotent
upsert); another rules version adds a row, so results of rule changes can be compared.
Log content is data: every value goes through bound parameters, never into SQL text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    insert,
    select,
    update,
)

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.database import aware, shared_engine
from attribution_dagster.core.result import AttributionResult

metadata = MetaData()

results_table = Table(
    "attribution_results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # '' when the context names no cluster: NULL would defeat the unique key.
    Column("cluster", String(255), nullable=False),
    Column("job_id", String(255), nullable=False),
    Column("rules_version", String(64), nullable=False),
    Column("failed", Boolean, nullable=False),
    Column("status", String(32), nullable=False),
    Column("category", String(64)),
    Column("state", String(32)),
    Column("confidence", Float),
    Column("scope", String(16)),
    Column("suspect_nodes", Text, nullable=False),  # JSON list
    Column("summary", Text),
    Column("partial", Boolean, nullable=False),  # some evidence source failed or was partial
    Column("analyzed_at", DateTime(timezone=True)),
    Column("written_at", DateTime(timezone=True), nullable=False),
    Column("result_json", Text, nullable=False),
    UniqueConstraint("cluster", "job_id", "rules_version", name="uq_attribution_job_rules"),
)
Index("ix_attribution_results_category", results_table.c.category, results_table.c.analyzed_at)
# The weekly report reads the results of jobs it found by end time, or (jobs without a
# scheduler row: the per-job path) by analysis time.
Index("ix_attribution_results_analyzed", results_table.c.analyzed_at)

def _row_of_result() -> tuple[Column, Column]:
    """Key of a child table's row: the result it belongs to (deleted with it) and a position."""
    return (
        Column(
            "result_id",
            Integer,
            ForeignKey("attribution_results.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        Column("seq", Integer, primary_key=True),
    )


symptoms_table = Table(
    "attribution_symptoms",
    metadata,
    *_row_of_result(),
    Column("time", DateTime(timezone=True)),
    Column("node", String(255), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    Column("summary", Text, nullable=False),
    Column("gpu", Integer),
    Column("pci", String(64)),
    Column("port", String(128)),
    Column("count", Integer, nullable=False),
    Column("locator", Text, nullable=False),
)
Index("ix_attribution_symptoms_node", symptoms_table.c.node, symptoms_table.c.kind)

evidence_table = Table(
    "attribution_evidence",
    metadata,
    *_row_of_result(),
    Column("source", String(64), nullable=False),
    Column("locator", Text, nullable=False),
    Column("time", DateTime(timezone=True)),
    Column("node", String(255), nullable=False),
    Column("excerpt", Text, nullable=False),
)


suspects_table = Table(
    "attribution_suspects",
    metadata,
    *_row_of_result(),
    # node | gpu | port | switch | switch_port | nvlink_domain | storage
    Column("kind", String(16), nullable=False),
    # node, node/pci, node/port, switch name (or, without topology, `port @ nodes`),
    # `switch port N`, NVLink domain name, storage category
    Column("name", String(512), nullable=False),
    Column("node", String(255), nullable=False),
)
Index("ix_attribution_suspects_kind_name", suspects_table.c.kind, suspects_table.c.name)

# A new table rather than columns on attribution_results: create_all adds it to a results
# database of an earlier version (whose results have no fault_domain), on SQLite and
# PostgreSQL alike. The whole fault_domain is also in result_json.
fault_ports_table = Table(
    "attribution_fault_ports",
    metadata,
    *_row_of_result(),
    Column("level", String(16), nullable=False),  # link | leaf | spine | nvlink_domain
    Column("domain", String(255), nullable=False),  # the switch or NVLink domain's name
    Column("node", String(255), nullable=False),  # '' when the domain names no node
    Column("host_port", String(128)),
    Column("switch", String(255)),
    Column("switch_port", String(64)),
)
Index("ix_attribution_fault_ports_switch", fault_ports_table.c.switch,
      fault_ports_table.c.switch_port)
Index("ix_attribution_fault_ports_domain", fault_ports_table.c.level, fault_ports_table.c.domain)

jobs_table = Table(
    "attribution_jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cluster", String(255), nullable=False),
    Column("job_id", String(255), nullable=False),
    Column("window_key", String(64), nullable=False),  # fleet window; '' per-job path
    Column("scheduler", String(32)),
    Column("state", String(32), nullable=False),
    Column("exit_code", Integer),
    Column("job_start", DateTime(timezone=True), nullable=False),
    Column("job_end", DateTime(timezone=True), nullable=False),
    Column("node_count", Integer, nullable=False),
    Column("gpus_per_node", Integer),
    Column("gpu_hours", Float),  # node_count x gpus_per_node x duration; NULL: GPUs unknown
    Column("context_json", Text, nullable=False),
    Column("listed_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("cluster", "job_id", name="uq_attribution_jobs_job"),
)
Index("ix_attribution_jobs_end", jobs_table.c.cluster, jobs_table.c.job_end)
Index(
    "ix_attribution_jobs_window", jobs_table.c.cluster, jobs_table.c.window_key, jobs_table.c.job_id
)

windows_table = Table(
    "attribution_windows",
    metadata,
    Column("cluster", String(255), primary_key=True),
    Column("window_key", String(64), primary_key=True),
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("window_end", DateTime(timezone=True), nullable=False),
    Column("status", String(16), nullable=False),  # listed | done | failed
    Column("rules_version", String(64)),
    Column("jobs", Integer, nullable=False, default=0),
    Column("attributed", Integer, nullable=False, default=0),  # jobs with a result row
    Column("failed_jobs", Integer, nullable=False, default=0),
    Column("error", Text),
    Column("seconds", Float),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


def gpu_hours(ctx: ExecutionContext) -> float | None:
    """Nodes x GPUs per node x duration in hours; None when the scheduler gave no GPU count."""
    if ctx.gpus_per_node is None:
        return None
    hours = max(0.0, (ctx.end - ctx.start).total_seconds()) / 3600.0
    return len(ctx.nodes) * ctx.gpus_per_node * hours


def job_row(ctx: ExecutionContext, window: str = "") -> dict[str, Any]:
    """The `attribution_jobs` row of one execution context."""
    return {
        "cluster": ctx.cluster or "",
        "job_id": ctx.job_id,
        "window_key": window,
        "scheduler": ctx.scheduler,
        "state": ctx.state.value,
        "exit_code": ctx.exit_code,
        "job_start": aware(ctx.start),
        "job_end": aware(ctx.end),
        "node_count": len(ctx.nodes),
        "gpus_per_node": ctx.gpus_per_node,
        "gpu_hours": gpu_hours(ctx),
        "context_json": ctx.model_dump_json(),
        "listed_at": datetime.now(timezone.utc),
    }


def switch_port_name(switch: str, port: str) -> str:
    """The name of one switch port in the suspects table and the report: `ib-leaf-07 port 12`."""
    return f"{switch} port {port}"


def suspect_rows(result: AttributionResult) -> list[dict[str, Any]]:
    """What the result blames, one row per thing a person would go and fix.

    A node-scope result names its nodes, each GPU of a GPU fault (by PCI bus id, else
    index) and each network port of a network fault. A shared-scope result names no node.
    With a `fault_domain` (the topology placed the cause), the switch or NVLink domain is
    named by the topology's name, and each switch port at the far end of a cable involved;
    without one, a shared fabric fault is keyed by the port name and the set of nodes it
    hit together (`switch`: `mlx5_5 @ node-a,node-b,...`), storage by category.
    """
    rows: list[tuple[str, str, str]] = []
    fd = result.fault_domain
    if result.status == "attributed" and result.scope == "shared":
        roots = [link for link in result.symptom_chain if link.role == "root_cause"]
        nodes = sorted({link.node for link in roots})
        ports = sorted({link.port for link in roots if link.port})
        network = (result.category or "").startswith("network")
        if not (network and fd is not None):
            kind = "switch" if network else "storage"
            key = f"{'/'.join(ports) or result.category} @ {','.join(nodes)}"
            rows.append((kind, key, ",".join(nodes)))
    else:
        for node in result.suspect_nodes:
            rows.append(("node", node, node))
        gpu_fault = (result.category or "").startswith("gpu.")
        for s in result.suspects:
            # A network fault's PCI id is the NIC's, and a GPU fault's port an NVLink link.
            if s.gpu is not None or (gpu_fault and s.pci):
                rows.append(("gpu", f"{s.node}/{s.pci or f'gpu{s.gpu}'}", s.node))
            if s.port and not gpu_fault:
                rows.append(("port", f"{s.node}/{s.port}", s.node))
    if result.status == "attributed" and fd is not None:
        kind = "nvlink_domain" if fd.level == "nvlink_domain" else "switch"
        rows.append((kind, fd.name, ",".join(sorted(fd.nodes))))
        for p in fd.ports:
            if p.switch and p.switch_port:
                rows.append(("switch_port", switch_port_name(p.switch, p.switch_port), p.node))
    seen: set[tuple[str, str]] = set()
    out = []
    for kind, name, node in rows:
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        out.append({"kind": kind, "name": clean_text(name)[:512], "node": clean_text(node)[:255]})
    return out


def fault_port_rows(result: AttributionResult) -> list[dict[str, Any]]:
    """The `attribution_fault_ports` rows of a result: one per cable of its fault_domain, or
    one per node (or one with no node) when the domain lists no cable."""
    fd = result.fault_domain
    if fd is None:
        return []
    base = {"level": fd.level, "domain": clean_text(fd.name)[:255]}
    rows = [
        {**base, "node": clean_text(p.node)[:255], "host_port": _cut(p.host_port, 128),
         "switch": _cut(p.switch, 255), "switch_port": _cut(p.switch_port, 64)}
        for p in fd.ports
    ]
    if not rows:
        blank = {"host_port": None, "switch": None, "switch_port": None}
        rows = [{**base, "node": clean_text(n)[:255], **blank} for n in fd.nodes or [""]]
    return rows


def _cut(value: str | None, n: int) -> str | None:
    return None if value is None else clean_text(value)[:n]


def clean_text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; log lines sometimes do."""
    if value is None:
        return None
    return value.replace("\x00", "\ufffd")


def is_partial(result: AttributionResult) -> bool:
    return any(c.status != "ok" or c.errors for c in result.coverage if c.status != "empty")


class SqlSink:
    """Idempotent result store over SQLAlchemy; creates its schema on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = shared_engine(url)
        metadata.create_all(self.engine, checkfirst=True)

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        results: Iterable[AttributionResult],
        contexts: Iterable[ExecutionContext] | None = None,
    ) -> int:
        """Upsert results keyed by (cluster, job_id, rules_version); returns how many.

        `contexts` (the jobs' execution contexts) also upsert `attribution_jobs`, which the
        weekly report needs for end times and GPU-hours; a job already listed by a fleet
        window keeps its window key.
        """
        written = 0
        batch = list(results)
        ctxs = list(contexts or ())
        if not batch and not ctxs:
            return 0
        with self.engine.begin() as conn:
            if ctxs:
                self._upsert_jobs(conn, [job_row(c) for c in ctxs], keep_window=True)
            for result in batch:
                self._upsert(conn, result)
                written += 1
        return written

    def write_jobs(self, contexts: Iterable[ExecutionContext], window: str) -> int:
        """Upsert the scheduler's contexts of one fleet window into `attribution_jobs`."""
        rows = [job_row(c, window) for c in contexts]
        if rows:
            with self.engine.begin() as conn:
                self._upsert_jobs(conn, rows, keep_window=False)
        return len(rows)

    def _upsert_jobs(self, conn: Any, rows: list[dict[str, Any]], keep_window: bool) -> None:
        t = jobs_table
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            if dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert as dialect_insert
            else:
                from sqlalchemy.dialects.postgresql import insert as dialect_insert
            for i in range(0, len(rows), 500):
                stmt = dialect_insert(t).values(rows[i : i + 500])
                skip = {"cluster", "job_id"} | ({"window_key"} if keep_window else set())
                stmt = stmt.on_conflict_do_update(
                    index_elements=[t.c.cluster, t.c.job_id],
                    set_={k: stmt.excluded[k] for k in rows[0] if k not in skip},
                )
                conn.execute(stmt)
            return
        for row in rows:
            where = (t.c.cluster == row["cluster"]) & (t.c.job_id == row["job_id"])
            if conn.execute(select(t.c.id).where(where)).first() is None:
                conn.execute(insert(t).values(**row))
            else:
                values = {k: v for k, v in row.items() if not keep_window or k != "window_key"}
                conn.execute(update(t).where(where).values(**values))

    def _upsert(self, conn: Any, result: AttributionResult) -> None:
        key = {
            "cluster": result.cluster or "",
            "job_id": result.job_id,
            "rules_version": result.rules_version,
        }
        row = {
            **key,
            "failed": result.failed,
            "status": result.status,
            "category": result.category,
            "state": result.state,
            "confidence": result.confidence,
            "scope": result.scope,
            "suspect_nodes": json.dumps(result.suspect_nodes),
            "summary": clean_text(result.summary),
            "partial": is_partial(result),
            "analyzed_at": aware(result.analyzed_at),
            "written_at": datetime.now(timezone.utc),
            # JSON escapes NUL as \u0000, which a TEXT column stores fine.
            "result_json": result.model_dump_json(),
        }
        t = results_table
        where = (
            (t.c.cluster == key["cluster"])
            & (t.c.job_id == key["job_id"])
            & (t.c.rules_version == key["rules_version"])
        )
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            # One statement, safe against a concurrent writer of the same key.
            if dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert as dialect_insert
            else:
                from sqlalchemy.dialects.postgresql import insert as dialect_insert
            stmt = dialect_insert(t).values(**row)
            stmt = stmt.on_conflict_do_update(
                index_elements=[t.c.cluster, t.c.job_id, t.c.rules_version],
                set_={k: stmt.excluded[k] for k in row if k not in key},
            ).returning(t.c.id)
            existing = conn.execute(stmt).scalar_one()
        else:
            existing = conn.execute(select(t.c.id).where(where)).scalar_one_or_none()
            if existing is None:
                existing = conn.execute(insert(t).values(**row)).inserted_primary_key[0]
            else:
                conn.execute(update(t).where(t.c.id == existing).values(**row))
        self._write_children(conn, existing, result)

    def _write_children(self, conn: Any, existing: int, result: AttributionResult) -> None:
        """The result's rows in the child tables, replacing those of an earlier write."""
        for child in (symptoms_table, evidence_table, suspects_table, fault_ports_table):
            conn.execute(delete(child).where(child.c.result_id == existing))
        fault_ports = fault_port_rows(result)
        if fault_ports:
            conn.execute(
                insert(fault_ports_table),
                [{"result_id": existing, "seq": i, **row} for i, row in enumerate(fault_ports)],
            )
        suspects = suspect_rows(result)
        if suspects:
            conn.execute(
                insert(suspects_table),
                [{"result_id": existing, "seq": i, **row} for i, row in enumerate(suspects)],
            )
        if result.symptom_chain:
            conn.execute(
                insert(symptoms_table),
                [
                    {
                        "result_id": existing,
                        "seq": i,
                        "time": aware(link.time),
                        "node": clean_text(link.node),
                        "kind": link.kind,
                        "role": link.role,
                        "summary": clean_text(link.summary),
                        "gpu": link.gpu,
                        "pci": link.pci,
                        "port": clean_text(link.port),
                        "count": link.count,
                        "locator": clean_text(link.evidence.locator),
                    }
                    for i, link in enumerate(result.symptom_chain)
                ],
            )
        if result.evidence:
            conn.execute(
                insert(evidence_table),
                [
                    {
                        "result_id": existing,
                        "seq": i,
                        "source": ev.source,
                        "locator": clean_text(ev.locator),
                        "time": aware(ev.time),
                        "node": clean_text(ev.node),
                        "excerpt": clean_text(ev.excerpt),
                    }
                    for i, ev in enumerate(result.evidence)
                ],
            )

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        job_id: str | None = None,
        *,
        cluster: str | None = None,
        rules_version: str | None = None,
        category: str | None = None,
        limit: int | None = None,
    ) -> list[AttributionResult]:
        """Stored results, newest analysis first, filtered by the given fields."""
        t = results_table
        q = select(t.c.result_json)
        if job_id is not None:
            q = q.where(t.c.job_id == job_id)
        if cluster is not None:
            q = q.where(t.c.cluster == cluster)
        if rules_version is not None:
            q = q.where(t.c.rules_version == rules_version)
        if category is not None:
            q = q.where(t.c.category == category)
        q = q.order_by(t.c.analyzed_at.desc(), t.c.id.desc())
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(q).scalars().all()
        return [AttributionResult.model_validate_json(r) for r in rows]

    def symptom_rows(self, job_id: str, cluster: str | None = None) -> list[dict[str, Any]]:
        """The stored symptom chain of a job (all rules versions), for reports and tests."""
        return self._rows_of_job(symptoms_table, job_id, cluster)

    def evidence_rows(self, job_id: str, cluster: str | None = None) -> list[dict[str, Any]]:
        """The stored evidence of a job (all rules versions)."""
        return self._rows_of_job(evidence_table, job_id, cluster)

    def _rows_of_job(self, table: Table, job_id: str, cluster: str | None) -> list[dict[str, Any]]:
        """A child table's rows of one job's results, by rules version and position."""
        t = results_table
        q = (
            select(t.c.rules_version, table)
            .join(t, t.c.id == table.c.result_id)
            .where(t.c.job_id == job_id, t.c.cluster == (cluster or ""))
            .order_by(t.c.rules_version, table.c.seq)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def jobs_analyzed_before(self, cutoff: datetime, limit: int = 10_000) -> list[tuple[str, str]]:
        """(cluster, job_id) of results analysed before `cutoff`, oldest first."""
        t = results_table
        q = (
            select(t.c.cluster, t.c.job_id)
            .where(t.c.analyzed_at < cutoff)
            .group_by(t.c.cluster, t.c.job_id)
            .order_by(func.min(t.c.analyzed_at))
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [(c, j) for c, j in conn.execute(q)]

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(results_table)).scalar_one())
