"""Make a local SQLite Dagster instance cheap enough for per-job runs.

Dagster stores every event (a materialization per asset per job, a planned event per
asset per job) with its own commit, and on SQLite each commit is an fsync: on a busy
disk that was 6-40 ms per event, 8 events per job. Two settings, applied by `make run`
(`local_run`) and by the code location when its instance is SQLite:

- `PRAGMA synchronous=NORMAL` on SQLite connections of this process. Dagster already
  puts its SQLite files in WAL mode, where NORMAL is safe against a crash of the process
  (a power loss may drop the last few commits); PostgreSQL instances are not touched.
- `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=1`: one "planned" event per asset per
  run instead of one per job. Dagster's documented cost: a job of a batch whose run fails
  is shown as missing, not failed, in the partition bar; the job's failure is still in
  the asset store and in the run's failure message (see assets/job_batch.py).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_installed = False


def _relax_sqlite(dbapi_conn: Any, _record: Any) -> None:
    if isinstance(dbapi_conn, sqlite3.Connection):
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")


def tune_local_instance() -> None:
    """Idempotent; call before the instance is opened."""
    global _installed
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    if not _installed:
        event.listen(Engine, "connect", _relax_sqlite)
        _installed = True
