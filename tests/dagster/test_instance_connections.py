"""The local instance's SQLite storages keep their connections open (instance/storage.py,
run_storage.py, tuning.py): the settings are read back from the instance's own files and
connections, the connections a run opens are counted, and the webserver's way of following
a running run (Dagster's watch on the run's file) is checked to still see every event.
Real Dagster instances on disk; no stubs."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster_cases import write_case
from sqlalchemy import event
from sqlalchemy.pool import Pool

from attribution_dagster.cli.local_run import open_instance, run_cases_report
from attribution_dagster.instance import storage as instance_storage
from attribution_dagster.instance.run_storage import KeptSqliteRunStorage
from attribution_dagster.instance.storage import BatchedSqliteEventLogStorage


@pytest.fixture()
def cases(tmp_path) -> Path:
    root = tmp_path / "cases"
    for i in range(3):
        write_case(root, f"case-{i}", job_id=str(700 + i), bad_node="node-b")
    return root


def _run(cases: Path, home: Path, inst: DagsterInstance) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = run_cases_report(cases, f"sqlite:///{home}/results.db", instance=inst)
    assert len(report.results) == 3 and report.failed == {}


def _files(home: Path) -> dict[str, Path]:
    runs = home / "history" / "runs"
    [run_file] = [p for p in runs.glob("*.db") if p.name != "index.db"]
    return {
        "index": runs / "index.db",
        "run": run_file,
        "runs": home / "history" / "runs.db",
    }


def test_settings_read_back_from_the_instance_files(cases, tmp_path):
    """WAL is a property of each file (read with a plain sqlite3 connection); synchronous
    is a property of a connection: NORMAL on the storages' own, FULL on the results one."""
    home = tmp_path / "home"
    inst = open_instance(home)
    try:
        assert isinstance(inst.event_log_storage, BatchedSqliteEventLogStorage)
        assert isinstance(inst.run_storage, KeptSqliteRunStorage)
        _run(cases, home, inst)
        for name, path in _files(home).items():
            db = sqlite3.connect(path)
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal", name
            db.close()
        with inst.event_log_storage.index_connection() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        [run] = inst.get_runs(limit=1)
        with inst.event_log_storage.run_connection(run.run_id) as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        with inst.run_storage.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        results = sqlite3.connect(home / "results.db")
        assert results.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, untouched
        results.close()
    finally:
        inst.dispose()


def test_a_run_on_an_existing_instance_opens_one_connection(cases, tmp_path):
    """The stock storages open and close about 180 SQLite connections per run (each close
    checkpoints and deletes the file's WAL); kept ones open the new run's file only."""
    home = tmp_path / "home"
    inst = open_instance(home)
    opened: list[str] = []

    def on_connect(dbapi_conn, _record):
        opened.append(dbapi_conn.execute("PRAGMA database_list").fetchone()[2])

    try:
        _run(cases, home, inst)  # a new instance: its files are created and opened
        event.listen(Pool, "connect", on_connect)
        try:
            _run(cases, home, inst)
        finally:
            event.remove(Pool, "connect", on_connect)
        history = str(home / "history")
        mine = [p for p in opened if p.startswith(history)]
        [run] = inst.get_runs(limit=1)
        assert mine == [str(home / "history" / "runs" / f"{run.run_id}.db")], opened
    finally:
        inst.dispose()
    # disposed: every kept connection closed, so SQLite checkpointed and removed each WAL
    assert not list((home / "history").rglob("*.db-wal"))


def _entry(run_id: str, message: str) -> EventLogEntry:
    return EventLogEntry(
        error_info=None,
        level="INFO",
        user_message=message,
        run_id=run_id,
        timestamp=time.time(),
        step_key=None,
        job_name="attribute_job",
        dagster_event=None,
    )


def _watch(base: Path, run_id: str) -> tuple[SqliteEventLogStorage, list[str], threading.Event]:
    """Dagster's stock storage watching the run's file, as the webserver does."""
    reader = SqliteEventLogStorage(str(base))
    seen: list[str] = []
    got = threading.Event()

    def callback(entry, _cursor):
        seen.append(entry.user_message)
        got.set()

    reader.watch(run_id, None, callback)
    return reader, seen, got


@pytest.mark.parametrize("delay, reaches", [(0.2, True), (60.0, False)])
def test_the_webservers_watch_sees_a_running_runs_events(tmp_path, monkeypatch, delay, reaches):
    """The watch fires when the run's file changes, which with a kept connection is when
    its WAL is checkpointed: after `CHECKPOINT_DELAY_SECONDS`. With a delay longer than the
    wait, nothing reaches it, which shows it is the checkpoint that delivers."""
    monkeypatch.setattr(instance_storage, "CHECKPOINT_DELAY_SECONDS", delay)
    base = tmp_path / "runs"
    writer = BatchedSqliteEventLogStorage(str(base))
    writer.store_event(_entry("run-1", "first"))  # the run's file exists, as when watched
    time.sleep(delay + 0.3 if reaches else 0.1)
    reader, seen, got = _watch(base, "run-1")
    try:
        time.sleep(0.3)  # the observer is up
        for i in range(3):
            writer.store_event(_entry("run-1", f"step {i}"))
        assert got.wait(timeout=5.0) is reaches
        if reaches:
            deadline = time.time() + 5
            while len(seen) < 4 and time.time() < deadline:
                time.sleep(0.05)
            # every event from the watch's start (no cursor), in order, once
            assert seen == ["first", "step 0", "step 1", "step 2"]
    finally:
        reader.dispose()
        writer.dispose()
    # the close at dispose checkpoints whatever a pending timer had not
    db = sqlite3.connect(f"file:{base / 'run-1.db'}?immutable=1", uri=True)
    assert db.execute("select count(*) from event_logs").fetchone()[0] == 4
    db.close()


def test_only_existing_tables_are_remembered(tmp_path):
    storage = BatchedSqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        assert storage.has_table("dynamic_partitions")
        assert not storage.has_table("no_such_table")
        with storage.index_connection() as conn:
            conn.exec_driver_sql("CREATE TABLE no_such_table (x INTEGER)")
        assert storage.has_table("no_such_table")  # a no is asked again
    finally:
        storage.dispose()


def test_many_runs_keep_few_files_open(tmp_path):
    """Only the latest run files stay open; an older one is closed (and so checkpointed)."""
    storage = BatchedSqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        for i in range(instance_storage._KEPT_RUN_FILES + 3):
            storage.store_event(_entry(f"run-{i}", "hello"))
        first = tmp_path / "runs" / "run-0.db"
        assert not Path(f"{first}-wal").exists()  # closed: its WAL is gone
        db = sqlite3.connect(f"file:{first}?immutable=1", uri=True)
        assert db.execute("select count(*) from event_logs").fetchone()[0] == 1
        db.close()
        latest = storage.get_logs_for_run(f"run-{instance_storage._KEPT_RUN_FILES + 2}")
        assert [e.user_message for e in latest] == ["hello"]
    finally:
        storage.dispose()


def test_closing_checkpoints_even_while_another_reader_holds_the_file(tmp_path, monkeypatch):
    """SQLite checkpoints a file on close only when no other connection has it open, and a
    webserver reading the run may: the storage checkpoints pending writes itself."""
    monkeypatch.setattr(instance_storage, "CHECKPOINT_DELAY_SECONDS", 60.0)
    base = tmp_path / "runs"
    writer = BatchedSqliteEventLogStorage(str(base))
    writer.store_event(_entry("run-1", "first"))
    reader = sqlite3.connect(base / "run-1.db")
    try:
        assert reader.execute("select count(*) from event_logs").fetchone()[0] == 1
        writer.store_event(_entry("run-1", "last"))
        writer.dispose()
        db = sqlite3.connect(f"file:{base / 'run-1.db'}?immutable=1", uri=True)
        assert db.execute("select count(*) from event_logs").fetchone()[0] == 2
        db.close()
    finally:
        reader.close()
