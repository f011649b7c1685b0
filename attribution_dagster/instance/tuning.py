"""What makes a local SQLite Dagster instance cheap enough for per-job runs, applied by the
instance's own storages (instance/storage.py, run_storage.py), never at import and never to other
databases (the results database keeps SQLite's defaults).

Dagster stores every event with its own commit: a batched run of the per-job assets
writes a materialization per asset per job, and a planned event per asset per job.
These settings are scoped to an instance whose `dagster.yaml` selects
`BatchedSqliteEventLogStorage` and `KeptSqliteRunStorage` (`local_run.open_instance` and
`make ui` write that):

- Their engines keep their connection open (`kept_engine`): closing the last connection to
  a SQLite file in WAL mode checkpoints and deletes the WAL (fsyncs, unlinks), and the stock
  storages open and close one per statement, some 180 per run.
- `PRAGMA synchronous=NORMAL` on the connections of those storages' own engines
  (`tune_engine`). Dagster already puts its SQLite files in WAL mode, where NORMAL is safe
  against a crash of the process (a power loss may drop the last few commits, never
  corrupts a file); a commit then writes the WAL without an fsync, and a checkpoint still
  syncs.
- One "planned" event per asset per run instead of one per job: the storage answers
  `supports_partition_subset_in_asset_materialization_planned_events` itself (the stock
  storage reads `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS`). Dagster's documented
  cost: a job of a batch whose run fails is shown as missing, not failed, in the partition
  bar; the job's failure is still in the asset store and in the run's failure message
  (see assets/job_batch.py).
- `DAGSTER_EVENT_BATCH_SIZE=1000` (`batch_events`): a step's materializations reach the
  event log as one batch (`store_event_batch`), written in one transaction per database
  file. Dagster reads this one from the process environment at each event, with no
  instance setting, so the storage sets it (if unset) when the instance opens it: only a
  process that opened such an instance batches. A production instance (PostgreSQL) sets it
  in its deployment's environment (dagster.yaml.example).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import QueuePool

EVENT_BATCH_SIZE = 1000
KEPT_OVERFLOW = 4  # connections opened past the kept one (other threads), closed after use
BUSY_TIMEOUT_SECONDS = 30  # Dagster's SQLITE_BUSY_TIMEOUT_SECONDS for its event log


def _relax_sqlite(dbapi_conn: Any, _record: Any) -> None:
    if isinstance(dbapi_conn, sqlite3.Connection):
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")


def tune_engine(engine: Engine) -> Engine:
    """`synchronous=NORMAL` on every connection of this engine only."""
    if not event.contains(engine, "connect", _relax_sqlite):
        event.listen(engine, "connect", _relax_sqlite)
    return engine


def kept_engine(url: str) -> Engine:
    """A tuned engine on one SQLite file whose connection stays open between operations
    (one kept, up to `KEPT_OVERFLOW` more while other threads use it)."""
    engine = create_engine(
        url,
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=KEPT_OVERFLOW,
        connect_args={"timeout": BUSY_TIMEOUT_SECONDS},
    )
    return tune_engine(engine)


def batch_events() -> None:
    """Let Dagster hand a step's events to the storage as one batch (unless set already)."""
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH_SIZE))
