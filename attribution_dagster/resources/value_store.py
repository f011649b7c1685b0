"""A partition-aware store for the intermediate values of the per-job assets.

Dagster's default filesystem IO manager refuses outputs that cover several partitions,
and the per-job assets must run many partitions in one run (a run costs seconds, a job's
work milliseconds). So each asset writes its value per partition here, keyed by
(asset, partition_key), in the same database as the results by default, and returns only
metadata to Dagster. The next asset reads its input from here.

A failed partition is stored as a failure row, so that later assets in a batched run
skip it and say why, and so that a tool can list what failed.

It also keeps two indexes written by whoever registers a partition: partition key ->
case directory (the case-directory sensor, ``local_run``) and partition key -> the
execution context a scheduler reported (the finished-job sensors), so `execution_context`
does not ask the scheduler again, and still knows a Kubernetes job after its pods are gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, insert, select

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.database import shared_engine
from attribution_dagster.sinks.sql import clean_text

store_metadata = MetaData()

values_table = Table(
    "attribution_asset_values",
    store_metadata,
    Column("asset", String(64), primary_key=True),
    Column("partition_key", String(512), primary_key=True),
    Column("status", String(16), nullable=False),  # "ok" or "failed"
    Column("payload", Text),  # JSON of the asset's value when ok
    Column("error", Text),  # one-line reason when failed
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

case_index_table = Table(
    "attribution_case_index",
    store_metadata,
    Column("partition_key", String(512), primary_key=True),
    Column("case_dir", Text, nullable=False),
    Column("registered_at", DateTime(timezone=True), nullable=False),
)


job_index_table = Table(
    "attribution_job_index",
    store_metadata,
    Column("partition_key", String(512), primary_key=True),
    Column("cluster", String(255), nullable=False),
    Column("job_id", String(255), nullable=False),
    Column("context_json", Text, nullable=False),
    Column("registered_at", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class StoredValue:
    status: str
    payload: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# SQLite allows 999 bound parameters per statement in old builds; stay well below.
_CHUNK = 400


def _chunks(keys: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(keys), _CHUNK):
        yield keys[i : i + _CHUNK]


class AssetValueStore:
    """Values of (asset, partition) in a SQL database; schema created on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = shared_engine(url)
        store_metadata.create_all(self.engine, checkfirst=True)

    def put(
        self,
        asset: str,
        values: Mapping[str, str] | None = None,
        failures: Mapping[str, str] | None = None,
    ) -> None:
        """Replace the values (JSON text) and failures (reasons) of these partitions."""
        values = values or {}
        failures = failures or {}
        keys = list(values) + list(failures)
        if not keys:
            return
        now = datetime.now(timezone.utc)
        rows = [
            {
                "asset": asset,
                "partition_key": k,
                "status": "ok",
                "payload": v,
                "error": None,
                "updated_at": now,
            }
            for k, v in values.items()
        ] + [
            {
                "asset": asset,
                "partition_key": k,
                "status": "failed",
                "payload": None,
                "error": clean_text(e)[:4000],
                "updated_at": now,
            }
            for k, e in failures.items()
        ]
        t = values_table
        with self.engine.begin() as conn:
            for chunk in _chunks(keys):
                conn.execute(delete(t).where(t.c.asset == asset, t.c.partition_key.in_(chunk)))
            conn.execute(insert(t), rows)

    def get(self, asset: str, keys: Iterable[str]) -> dict[str, StoredValue]:
        """Stored values for these partitions; a key never stored is absent from the dict."""
        t = values_table
        out: dict[str, StoredValue] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(list(keys)):
                q = select(t.c.partition_key, t.c.status, t.c.payload, t.c.error).where(
                    t.c.asset == asset, t.c.partition_key.in_(chunk)
                )
                for pk, status, payload, error in conn.execute(q):
                    out[pk] = StoredValue(status, payload, error)
        return out

    def failures(self, asset: str | None = None) -> dict[tuple[str, str], str]:
        """(asset, partition_key) -> reason, for every partition whose last attempt failed."""
        t = values_table
        q = select(t.c.asset, t.c.partition_key, t.c.error).where(t.c.status == "failed")
        if asset is not None:
            q = q.where(t.c.asset == asset)
        with self.engine.connect() as conn:
            return {(a, k): e or "" for a, k, e in conn.execute(q)}

    # -- case index -------------------------------------------------------------------------

    def index_cases(self, cases: Mapping[str, str]) -> None:
        """Remember partition key -> case directory (replaces earlier entries)."""
        if not cases:
            return
        t = case_index_table
        now = datetime.now(timezone.utc)
        keys = list(cases)
        with self.engine.begin() as conn:
            for chunk in _chunks(keys):
                conn.execute(delete(t).where(t.c.partition_key.in_(chunk)))
            conn.execute(
                insert(t),
                [
                    {"partition_key": k, "case_dir": d, "registered_at": now}
                    for k, d in cases.items()
                ],
            )

    def case_dirs(self, keys: Iterable[str]) -> dict[str, str]:
        return self._by_key(case_index_table.c.case_dir, keys)

    # -- job index (scheduler contexts) -------------------------------------------------------

    def index_jobs(self, contexts: Iterable[ExecutionContext]) -> None:
        """Remember the scheduler's context of each job under its partition key."""
        rows = {
            c.partition_key: {
                "partition_key": c.partition_key,
                "cluster": c.cluster or "",
                "job_id": c.job_id,
                "context_json": c.model_dump_json(),
            }
            for c in contexts
        }
        if not rows:
            return
        t = job_index_table
        now = datetime.now(timezone.utc)
        with self.engine.begin() as conn:
            for chunk in _chunks(list(rows)):
                conn.execute(delete(t).where(t.c.partition_key.in_(chunk)))
            conn.execute(insert(t), [{**r, "registered_at": now} for r in rows.values()])

    def indexed_contexts(self, keys: Iterable[str]) -> dict[str, ExecutionContext]:
        found = self._by_key(job_index_table.c.context_json, keys)
        return {k: ExecutionContext.model_validate_json(v) for k, v in found.items()}

    def _by_key(self, column: Any, keys: Iterable[str]) -> dict[str, Any]:
        """partition key -> `column` of its row in the column's table, for the keys found."""
        key = column.table.c.partition_key
        out: dict[str, Any] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(list(keys)):
                out.update(dict(conn.execute(select(key, column).where(key.in_(chunk))).all()))
        return out

    def forget(self, keys: Iterable[str]) -> None:
        """Drop everything kept for these jobs (values, indexes): their results stay in the sink."""
        keys = list(keys)
        with self.engine.begin() as conn:
            for chunk in _chunks(keys):
                conn.execute(delete(values_table).where(values_table.c.partition_key.in_(chunk)))
                for t in (case_index_table, job_index_table):
                    conn.execute(delete(t).where(t.c.partition_key.in_(chunk)))
