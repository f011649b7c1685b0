"""Results in a SQL database: a SQLite file by default, or any SQLAlchemy URL (PostgreSQL, ...).

Three tables, created on first use:

- ``attribution_results``: one row per (cluster, job_id, rules_version), with the columns a
  fleet report filters on and the whole contract JSON;
- ``attribution_symptoms``: the symptom chain, one row per link (role, kind, node, time);
- ``attribution_evidence``: the evidence list, one row per reference (source, locator).

Writing the same job again under the same rules version replaces its rows (idempotent
upsert); another rules version adds a row, so results of rule changes can be compared.
Log content is data: every value goes through bound parameters, never into SQL text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
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
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine, make_url

from attribution_dagster.models import AttributionResult

RESULTS_DB_RELATIVE = Path(".attribution") / "results.db"

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

symptoms_table = Table(
    "attribution_symptoms",
    metadata,
    Column(
        "result_id",
        Integer,
        ForeignKey("attribution_results.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seq", Integer, primary_key=True),
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
    Column(
        "result_id",
        Integer,
        ForeignKey("attribution_results.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seq", Integer, primary_key=True),
    Column("source", String(64), nullable=False),
    Column("locator", Text, nullable=False),
    Column("time", DateTime(timezone=True)),
    Column("node", String(255), nullable=False),
    Column("excerpt", Text, nullable=False),
)


def default_sqlite_url(repo_root_or_cwd: str | Path | None = None) -> str:
    """``sqlite:///<abs>/.attribution/results.db`` under the given directory (default: cwd)."""
    root = Path(repo_root_or_cwd) if repo_root_or_cwd is not None else Path.cwd()
    return f"sqlite:///{(root.resolve() / RESULTS_DB_RELATIVE).as_posix()}"


def clean_text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; log lines sometimes do."""
    if value is None:
        return None
    return value.replace("\x00", "\ufffd")


def _aware(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def is_partial(result: AttributionResult) -> bool:
    return any(c.status != "ok" or c.errors for c in result.coverage if c.status != "empty")


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def shared_engine(url: str) -> Engine:
    """One engine (and pool) per URL per process; schema setup runs once per engine."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _make_engine(url)
            _engines[url] = engine
        return engine


def _make_engine(url: str) -> Engine:
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            # Several run processes may write at once (sensor runs); WAL lets readers go on.
            if u.database and u.database != ":memory:":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    return create_engine(u, pool_pre_ping=True)


class SqlSink:
    """Idempotent result store over SQLAlchemy; creates its schema on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = shared_engine(url)
        metadata.create_all(self.engine, checkfirst=True)

    # -- writing -----------------------------------------------------------------------------

    def write(self, results: Iterable[AttributionResult]) -> int:
        """Upsert results keyed by (cluster, job_id, rules_version); returns how many."""
        written = 0
        batch = list(results)
        if not batch:
            return 0
        with self.engine.begin() as conn:
            for result in batch:
                self._upsert(conn, result)
                written += 1
        return written

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
            "analyzed_at": _aware(result.analyzed_at),
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
        conn.execute(delete(symptoms_table).where(symptoms_table.c.result_id == existing))
        conn.execute(delete(evidence_table).where(evidence_table.c.result_id == existing))
        if result.symptom_chain:
            conn.execute(
                insert(symptoms_table),
                [
                    {
                        "result_id": existing,
                        "seq": i,
                        "time": _aware(link.time),
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
                        "time": _aware(ev.time),
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
        s, t = symptoms_table, results_table
        q = (
            select(t.c.rules_version, s)
            .join(t, t.c.id == s.c.result_id)
            .where(t.c.job_id == job_id, t.c.cluster == (cluster or ""))
            .order_by(t.c.rules_version, s.c.seq)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def evidence_rows(self, job_id: str, cluster: str | None = None) -> list[dict[str, Any]]:
        e, t = evidence_table, results_table
        q = (
            select(t.c.rules_version, e)
            .join(t, t.c.id == e.c.result_id)
            .where(t.c.job_id == job_id, t.c.cluster == (cluster or ""))
            .order_by(t.c.rules_version, e.c.seq)
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
