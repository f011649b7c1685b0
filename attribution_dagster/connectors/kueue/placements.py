"""The pod placement record: where the pods of running Kueue workloads were placed.

Kubernetes garbage-collects the pods of finished jobs within minutes, and with them the
only record of which node ran which pod. The pod placement sensor writes what
`KueueClient.running_placements()` sees into one table of the results database, and the
Kueue connector reads it back (`pods_for`) when a finished workload's pods are gone.

Table ``attribution_pod_placements``, created on first use, one row per
(cluster, namespace, pod); writing a pod again updates its row (idempotent upsert), so a
sensor ticking every minute keeps one row per pod with `recorded_at` = last seen.
Size: about 340 bytes per pod in SQLite, table plus both indexes, i.e. 2.7 MB per 1,000
jobs of 8 pods (docs/kubernetes.md has the measurement).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy import (
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)

from attribution_dagster.core.context import PodRef
from attribution_dagster.core.database import aware, shared_engine

# Its own MetaData: the results sink does not create this table, the recorder does.
metadata = MetaData()

placements_table = Table(
    "attribution_pod_placements",
    metadata,
    Column("cluster", String(255), primary_key=True),
    Column("namespace", String(253), primary_key=True),
    Column("pod", String(253), primary_key=True),
    Column("workload", String(253), nullable=False),
    Column("owner", String(300)),
    Column("node", String(253), nullable=False),
    Column("host_ip", String(64)),
    Column("pod_ip", String(64)),
    Column("started", DateTime(timezone=True)),
    Column("restarts", Integer, nullable=False, default=0),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)
Index(
    "ix_pod_placements_workload",
    placements_table.c.cluster,
    placements_table.c.namespace,
    placements_table.c.workload,
)

_KEY = ("cluster", "namespace", "pod")


class PlacementStore:
    """Writes and reads the placement record over SQLAlchemy (SQLite, PostgreSQL, ...)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = shared_engine(url)
        metadata.create_all(self.engine, checkfirst=True)

    def record(self, placements: Iterable[Any], *, now: datetime | None = None) -> int:
        """Upsert placements (objects with the PodPlacement fields); returns how many."""
        recorded_at = aware(now) or datetime.now(timezone.utc)
        rows = [
            {
                "cluster": p.cluster,
                "namespace": p.namespace,
                "pod": p.pod,
                "workload": p.workload,
                "owner": getattr(p, "owner", None),
                "node": p.node,
                "host_ip": p.host_ip,
                "pod_ip": p.pod_ip,
                "started": aware(p.started),
                "restarts": int(p.restarts or 0),
                "recorded_at": recorded_at,
            }
            for p in placements
        ]
        if not rows:
            return 0
        t = placements_table
        with self.engine.begin() as conn:
            dialect = conn.dialect.name
            if dialect in ("sqlite", "postgresql"):
                if dialect == "sqlite":
                    from sqlalchemy.dialects.sqlite import insert as dialect_insert
                else:
                    from sqlalchemy.dialects.postgresql import insert as dialect_insert
                stmt = dialect_insert(t)
                stmt = stmt.on_conflict_do_update(
                    index_elements=[t.c.cluster, t.c.namespace, t.c.pod],
                    set_={k: stmt.excluded[k] for k in rows[0] if k not in _KEY},
                )
                conn.execute(stmt, rows)
            else:  # any other database: one statement per row, still idempotent
                for row in rows:
                    where = (
                        (t.c.cluster == row["cluster"])
                        & (t.c.namespace == row["namespace"])
                        & (t.c.pod == row["pod"])
                    )
                    if conn.execute(select(t.c.pod).where(where)).first() is None:
                        conn.execute(insert(t).values(**row))
                    else:
                        conn.execute(update(t).where(where).values(**row))
        return len(rows)

    def pods_for(self, cluster: str, namespace: str, workload: str) -> list[PodRef]:
        """The recorded pods of one workload (a `PlacementReader` for the Kueue client)."""
        t = placements_table
        q = (
            select(t)
            .where(t.c.cluster == cluster, t.c.namespace == namespace, t.c.workload == workload)
            .order_by(t.c.pod)
        )
        with self.engine.connect() as conn:
            rows = [r._mapping for r in conn.execute(q)]
        return [
            PodRef(
                namespace=r["namespace"],
                name=r["pod"],
                node=r["node"],
                host_ip=r["host_ip"],
                pod_ip=r["pod_ip"],
                restarts=r["restarts"] or 0,
                started=aware(r["started"]),
            )
            for r in rows
        ]

    def prune(self, before: datetime) -> int:
        """Forget pods last seen before `before` (retention); returns how many rows went."""
        t = placements_table
        with self.engine.begin() as conn:
            return int(conn.execute(delete(t).where(t.c.recorded_at < aware(before))).rowcount)

    def count(self, cluster: str | None = None) -> int:
        t = placements_table
        q = select(func.count()).select_from(t)
        if cluster is not None:
            q = q.where(t.c.cluster == cluster)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())


PlacementReader = Callable[[str, str, str], list[PodRef]]
"""`(cluster, namespace, workload) -> [PodRef]`: the recorded pods of a gone workload."""


class PodPlacement(BaseModel):
    """Where one pod of a running workload is placed (one row of the placement record)."""

    model_config = ConfigDict(frozen=True)

    cluster: str
    namespace: str
    workload: str
    pod: str
    node: str
    host_ip: str | None = None
    pod_ip: str | None = None
    started: AwareDatetime | None = None
    restarts: int = 0
    owner: str | None = Field(default=None, description="'JobSet/<name>' or 'Job/<name>'")


def store_reader(
    url: str, password_env: str | None
) -> PlacementReader:
    """`(cluster, namespace, workload) -> [PodRef]` over the store at `url` (the password
    from `password_env`), opened on first read."""
    password = os.environ.get(password_env) if password_env else None
    if password:
        from sqlalchemy.engine import make_url

        url = make_url(url).set(password=password).render_as_string(hide_password=False)
    store: PlacementStore | None = None

    def read(cluster: str, namespace: str, workload: str) -> list[PodRef]:
        nonlocal store
        if store is None:
            store = PlacementStore(url)
        return store.pods_for(cluster, namespace, workload)

    return read
