"""Make a local SQLite Dagster instance cheap enough for per-job runs.

Dagster stores every event with its own commit: a batched run of the per-job assets
writes a materialization per asset per job, and a planned event per asset per job.
Three settings, applied by `make run` (`local_run`) and by the code location on import:

- `PRAGMA synchronous=NORMAL` on SQLite connections of this process. Dagster already
  puts its SQLite files in WAL mode, where NORMAL is safe against a crash of the process
  (a power loss may drop the last few commits); PostgreSQL instances are not touched.
- `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=1`: one "planned" event per asset per
  run instead of one per job. Dagster's documented cost: a job of a batch whose run fails
  is shown as missing, not failed, in the partition bar; the job's failure is still in
  the asset store and in the run's failure message (see assets/job_batch.py).
- `DAGSTER_EVENT_BATCH_SIZE=1000`: a step's materializations reach the event log as one
  batch (`store_event_batch`), which dagster-postgres writes at once and which
  `instance_storage.BatchedSqliteEventLogStorage` (selected by a local instance's
  `dagster.yaml`) writes in one transaction per database file; the stock SQLite storage
  still writes them one by one. A batch is flushed when its step's output is stored.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_installed = False
EVENT_BATCH_SIZE = 1000


def _relax_sqlite(dbapi_conn: Any, _record: Any) -> None:
    if isinstance(dbapi_conn, sqlite3.Connection):
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")


def tune_local_instance() -> None:
    """Idempotent; call before the instance is opened."""
    global _installed
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH_SIZE))
    if not _installed:
        event.listen(Engine, "connect", _relax_sqlite)
        _installed = True
