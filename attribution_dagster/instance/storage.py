"""A SQLite event log that stores a batch of materializations in one transaction and keeps
one SQLAlchemy engine, and its connection, per database file.

A batched run of the per-job assets reports one materialization per job for each asset.
Dagster hands such a batch to `EventLogStorage.store_event_batch` when
`DAGSTER_EVENT_BATCH_SIZE` is set (this storage sets it: instance/tuning.py). dagster-
postgres writes the batch at once; the stock SQLite storage stores it event by event, and
each event opens and closes a fresh engine on two database files, re-inspects the schema and
recompiles its SQL: about 12 ms per event, 4 events per job. This storage writes the same
rows (the run's shard, then the cross-run index with the indexed tags and the asset's latest
entry, as `SqliteEventLogStorage.store_event` does) with one connection per shard per batch.

Planned events and observations are batched the same way; any other batch (failures,
mixed event types, several runs) goes through the stock path.

The stock storage also builds a new engine for every statement, so SQLAlchemy compiles
each statement afresh (its compiled cache lives on the engine): about 165 engines per run,
each opening and closing a connection. Closing the last connection to a SQLite file in WAL
mode checkpoints the WAL into the file and deletes it, with three or four fsyncs and two
unlinks: most of a small run's storage time, and far more when other processes are writing
to the same disk (each fsync then waits for their writes). This storage keeps one engine
and one open connection per file (`_connect`):

- the index (`index.db`, read for every event's partition check) stays open for the life of
  the storage; SQLite checkpoints it as it grows (`wal_autocheckpoint`) and when it closes;
- a run's file stays open while it is among the latest `_KEPT_RUN_FILES` used. The webserver
  follows a running run by watching that file (`SqliteEventLogStorageWatchdog`), which
  changes only when its WAL is checkpointed into it: so a write is checkpointed
  `CHECKPOINT_DELAY_SECONDS` later, once for all the writes of that interval (stock: at
  each write's close), and when the file is closed (`dispose`, or a newer run's file
  taking its place). The UI shows a run's events that much later; none is lost.

Its engines, and only they, are tuned (`PRAGMA synchronous=NORMAL`, instance/tuning.py).
New files are put in WAL mode before their tables are created (one journal-less commit per
table, as SQLite in WAL mode with synchronous=NORMAL does not sync on commit).
It leans on `SqliteEventLogStorage` internals (`_connect`, `_initdb`, `_event_to_row`,
`_store_asset_event*`) of the exactly pinned Dagster 1.13.27 (tests/test_scaleout_config.py
fails on another version): on an upgrade, compare `store_event`, `_connect` and the
watchdog again.

A local instance selects it in its `dagster.yaml` (`local_run.open_instance` and
`make ui` write that):

    event_log_storage:
      module: attribution_dagster.instance.storage
      class: BatchedSqliteEventLogStorage
      config:
        base_dir: <instance dir>/history/runs/
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from dagster import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.schema import (
    SqlEventLogStorageMetadata,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.storage.sql import get_alembic_config
from dagster._serdes import ConfigurableClassData
from sqlalchemy import exc as db_exc
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from attribution_dagster.instance.tuning import batch_events, kept_engine

log = logging.getLogger(__name__)

_KEPT_RUN_FILES = 4  # run files kept open: the latest used (older ones are closed)
CHECKPOINT_DELAY_SECONDS = 0.5  # a run file's writes reach the file (and the UI) this late
_INDEX_TRIES = 4  # a locked index (another process writing past the busy timeout) heals
_INDEX_RETRY_SECONDS = 0.5


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` plus a one-transaction `store_event_batch` and a kept
    connection per database file."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()  # run files, oldest first
        self._index_engine: Engine | None = None
        self._engines_lock = threading.Lock()
        self._unchecked: set[str] = set()  # run files written since their last checkpoint
        self._tables: set[str] = set()  # index tables known to exist
        batch_events()
        super().__init__(base_dir, inst_data)

    @property
    def supports_partition_subset_in_asset_materialization_planned_events(self) -> bool:
        """One planned event per asset per run (instance/tuning.py says what it costs)."""
        return True

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> BatchedSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            if shard == INDEX_SHARD_NAME:
                if self._index_engine is None:
                    self._index_engine = kept_engine(self.conn_string_for_shard(shard))
                return self._index_engine
            engine = self._engines.get(shard)
            if engine is None:
                engine = kept_engine(self.conn_string_for_shard(shard))
                self._engines[shard] = engine
                if len(self._engines) > _KEPT_RUN_FILES:
                    self._close(*self._engines.popitem(last=False))
            self._engines.move_to_end(shard)
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        """The stock `_connect` (create the file on first use, one transaction), on the
        shard's kept connection; a run file that was written to is checkpointed soon."""
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                before = _changes(conn)
                with conn.begin():
                    yield conn
                wrote = _changes(conn) != before
        if wrote and shard != INDEX_SHARD_NAME:
            self._checkpoint_soon(shard)

    def _checkpoint_soon(self, shard: str) -> None:
        """Checkpoint the run's file in `CHECKPOINT_DELAY_SECONDS` (once for all the writes
        until then), so that the webserver watching it sees them."""
        with self._engines_lock:
            if shard in self._unchecked:
                return
            self._unchecked.add(shard)
        timer = threading.Timer(CHECKPOINT_DELAY_SECONDS, self._checkpoint, (shard,))
        timer.daemon = True
        timer.start()

    def _checkpoint(self, shard: str) -> None:
        with self._db_lock:
            with self._engines_lock:
                self._unchecked.discard(shard)
                engine = self._engines.get(shard)
            if engine is not None:  # else closed since, and checkpointed then
                _checkpoint(engine, shard)

    def _close(self, shard: str, engine: Engine) -> None:
        """Close a run file's kept connection, checkpointing first what a timer has not yet:
        SQLite checkpoints on close only when no other process has the file open (a
        webserver reading it may)."""
        if shard in self._unchecked:
            self._unchecked.discard(shard)
            _checkpoint(engine, shard)
        engine.dispose()

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """A new run's file gets the stock tables, WAL and the alembic head stamp, with the
        migration scripts read once per process: the stock `_initdb` reads all of Dagster's
        alembic scripts for every new file, which is most of a small run's storage time.
        Anything but a brand-new file (an index, a file another process is creating) goes
        the stock way."""
        if for_index_shard or _has_alembic_version(engine):
            super()._initdb(engine, for_index_shard=for_index_shard)
            return
        try:
            with engine.connect() as conn:
                # WAL first: each CREATE is then a WAL append (no journal file, no fsync under
                # synchronous=NORMAL); the stock order writes a rollback journal per table
                conn.execute(text("PRAGMA journal_mode=WAL;"))
                SqlEventLogStorageMetadata.create_all(conn)
                MigrationContext.configure(conn).stamp(_alembic_scripts(), "head")
                conn.commit()
        except (db_exc.DatabaseError, sqlite3.DatabaseError, sqlite3.OperationalError):
            super()._initdb(engine, for_index_shard=for_index_shard)  # its retries and checks

    def has_table(self, table_name: str) -> bool:
        """Whether the index has this table. Dagster asks before each dynamic-partition
        lookup (about 30 per run); a table that exists stays (migrations add tables, `wipe`
        empties them), so a yes is remembered and a no asked again."""
        if table_name in self._tables:
            return True
        engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            found = bool(engine.dialect.has_table(conn, table_name))
        if found:
            self._tables.add(table_name)
        return found

    def wipe(self) -> None:
        self._dispose_engines()  # no connection left open on a file being deleted
        self._tables.clear()
        super().wipe()
        self._dispose_engines()

    def dispose(self) -> None:
        """Also closes the kept connections (SQLite checkpoints each file then)."""
        super().dispose()
        self._dispose_engines()

    def _dispose_engines(self) -> None:
        with self._db_lock, self._engines_lock:
            for shard, engine in self._engines.items():
                self._close(shard, engine)
            self._engines.clear()
            if self._index_engine is not None:
                self._index_engine.dispose()
                self._index_engine = None

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        """Runs of same-kind asset events in one transaction per file; the rest, in order,
        one by one as the stock storage does."""
        for group in _runs_of_one_kind(events):
            if len(group) > 1 and _batchable(group[0]):
                self._store_asset_events(group)
            else:
                super().store_event_batch(group)

    def _store_asset_events(self, events: Sequence[EventLogEntry]) -> None:
        """`SqliteEventLogStorage.store_event`'s writes for many events of one run and kind:
        the run's shard, then the index with the indexed tags and each asset's entry."""
        rows = [self._event_to_row(event) for event in events]
        with self.run_connection(events[0].run_id) as conn:
            conn.execute(SqlEventLogStorageTable.insert(), rows)
        # The run's file is committed. Were the index write to raise now, Dagster would store
        # the whole batch again, event by event: the run's file would hold every event twice.
        # The index write is one transaction that rolls back whole, so it is tried again.
        for attempt in range(_INDEX_TRIES):
            try:
                self._index_asset_events(events, rows)
                return
            except (db_exc.OperationalError, sqlite3.OperationalError):
                if attempt == _INDEX_TRIES - 1:
                    raise
                time.sleep(_INDEX_RETRY_SECONDS * 2**attempt)

    def _index_asset_events(self, events: Sequence[EventLogEntry], rows: list[dict]) -> None:
        with self.index_transaction() as conn:
            insert = SqlEventLogStorageTable.insert()
            event_ids = [conn.execute(insert, row).inserted_primary_key[0] for row in rows]
            self._store_asset_event_tags(conn, events, event_ids)
            # the asset entry holds the latest event's values: apply only the latest
            latest = {}
            for event, event_id in zip(events, event_ids, strict=True):
                latest[event.get_dagster_event().asset_key] = (event, event_id)
            for event, event_id in latest.values():
                self._store_asset_event(conn, event, event_id)


_SCRIPTS: ScriptDirectory | None = None


def _checkpoint(engine: Engine, shard: str) -> None:
    """Copy the run file's WAL into the file (which the webserver's watch sees)."""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
    except (db_exc.OperationalError, sqlite3.OperationalError) as exc:
        # e.g. locked by another process: the next write or checkpoint carries it
        log.debug("checkpoint of run file %s deferred: %s", shard, exc)


def _changes(conn: Connection) -> int:
    """Rows this SQLite connection has changed since it opened."""
    return conn.connection.dbapi_connection.total_changes  # type: ignore[union-attr]


def _alembic_scripts() -> ScriptDirectory:
    """Dagster's event-log migration scripts, as the stock `_initdb` configures them."""
    global _SCRIPTS
    if _SCRIPTS is None:
        import dagster._core.storage.event_log.sqlite.sqlite_event_log as stock

        _SCRIPTS = ScriptDirectory.from_config(get_alembic_config(stock.__file__))
    return _SCRIPTS


def _has_alembic_version(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(engine.dialect.has_table(conn, "alembic_version"))


# Asset events stored by the same three writes in `SqliteEventLogStorage.store_event`.
_BATCHED = {
    DagsterEventType.ASSET_MATERIALIZATION,
    DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    DagsterEventType.ASSET_OBSERVATION,
}


def _kind(event: EventLogEntry) -> tuple[str, Any]:
    return event.run_id, event.dagster_event.event_type if event.dagster_event else None


def _batchable(event: EventLogEntry) -> bool:
    return bool(
        event.dagster_event
        and event.dagster_event.event_type in _BATCHED
        and event.dagster_event.asset_key
    )


def _runs_of_one_kind(events: Sequence[EventLogEntry]) -> list[list[EventLogEntry]]:
    """Consecutive events of the same run and type, in their order."""
    groups: list[list[EventLogEntry]] = []
    for event in events:
        if groups and _kind(groups[-1][-1]) == _kind(event):
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups
