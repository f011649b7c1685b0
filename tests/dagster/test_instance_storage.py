"""The batched SQLite event log (instance_storage.py) against Dagster's stock SQLite storage:
a batched run of the per-job assets must leave the same record behind (what the UI reads:
materialized partitions, each job's own metadata, the latest materialization, the indexed
tags) while opening far fewer database connections. Real Dagster instances on disk."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster_cases import write_case

from attribution_dagster.cli.local_run import run_cases_report, write_instance_yaml
from attribution_dagster.instance.storage import BatchedSqliteEventLogStorage

ASSETS = ["execution_context", "raw_evidence", "observations", "attribution"]
JOBS = 12


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cases")
    for i in range(JOBS):
        write_case(
            root,
            f"case-{i:02d}",
            job_id=str(900 + i),
            state="COMPLETED" if i % 4 == 0 else "FAILED",
            bad_node=None if i % 4 == 0 else "node-b",
        )
    return root


def run_into(home: Path, cases: Path, *, stock: bool, monkeypatch) -> dict[str, int]:
    """A batched run into a new instance at `home`; returns connections opened per shard."""
    home.mkdir()
    if stock:
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    opened = {"index": 0, "run": 0}

    def counting(real):
        def connect(self, shard):
            opened["index" if shard == "index" else "run"] += 1
            return real(self, shard)

        return connect

    with monkeypatch.context() as patch:
        # the same Dagster settings for both: the batched storage sets them for its own
        # instance (instance/tuning.py); here the stock storage gets them too, so the two
        # differ only in how they write
        patch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000")
        patch.setenv("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
        for cls in (SqliteEventLogStorage, BatchedSqliteEventLogStorage):
            patch.setattr(cls, "_connect", counting(cls.__dict__["_connect"]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = run_cases_report(cases, f"sqlite:///{home}/results.db", instance_dir=home)
    assert len(report.results) == JOBS and report.failed == {}
    return opened


def ui_record(home: Path) -> dict:
    """What the UI shows of the per-job assets, read back through Dagster's own API."""
    out: dict = {}
    with DagsterInstance.from_config(str(home)) as inst:
        out["storage"] = type(inst.event_log_storage)
        for name in ASSETS:
            key = AssetKey(name)
            partitions = inst.get_materialized_partitions(key)
            per_job = {}
            for p in sorted(partitions):
                [rec] = inst.fetch_materializations(
                    AssetRecordsFilter(asset_key=key, asset_partitions=[p]), limit=1
                ).records
                meta = rec.asset_materialization.metadata
                per_job[p] = {k: str(v.value) for k, v in meta.items() if "ms" not in k}
            latest = inst.get_latest_materialization_event(key)
            runs = inst.get_runs()
            events = sum(
                e.dagster_event.asset_key == key
                for r in runs
                for e in inst.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
            )
            out[name] = {
                "partitions": partitions,
                "metadata": per_job,
                "latest partition": latest.dagster_event.partition,
                "events in run shards": events,
            }
    with sqlite3.connect(home / "history" / "runs" / "index.db") as db:
        out["tag rows"] = db.execute("select count(*) from asset_event_tags").fetchone()[0]
        out["index events"] = db.execute(
            "select count(*) from event_logs where dagster_event_type = 'ASSET_MATERIALIZATION'"
        ).fetchone()[0]
    return out


def test_batched_storage_leaves_what_the_stock_storage_leaves(cases, tmp_path, monkeypatch):
    stock_conns = run_into(tmp_path / "stock", cases, stock=True, monkeypatch=monkeypatch)
    batched_conns = run_into(tmp_path / "batched", cases, stock=False, monkeypatch=monkeypatch)
    stock, batched = ui_record(tmp_path / "stock"), ui_record(tmp_path / "batched")

    assert stock.pop("storage") is SqliteEventLogStorage
    assert batched.pop("storage") is BatchedSqliteEventLogStorage
    keys = {f"c1.{900 + i}" for i in range(JOBS)}
    for name in ASSETS:
        assert batched[name]["partitions"] == keys, name
        assert batched[name]["events in run shards"] == JOBS, name
        assert batched[name]["metadata"]["c1.901"], name  # a job's own facts are there
    assert batched["attribution"]["metadata"]["c1.901"]["category"] == "gpu.lost"
    assert batched == stock

    # The point of it: the stock path opens the run's shard and the index once per asset
    # event (a materialization per asset per job, a planned event per asset); the batched
    # one once per batch (one per asset's materializations, one for the planned events).
    asset_events = JOBS * len(ASSETS) + len(ASSETS)
    batches = len(ASSETS) + 1
    for shard in ("run", "index"):
        saved = stock_conns[shard] - batched_conns[shard]
        assert saved == asset_events - batches, (shard, stock_conns, batched_conns)


def test_a_new_local_instance_selects_the_batched_storage(tmp_path):
    write_instance_yaml(tmp_path)
    text = (tmp_path / "dagster.yaml").read_text()
    assert "BatchedSqliteEventLogStorage" in text and "enabled: false" in text
    with DagsterInstance.from_config(str(tmp_path)) as inst:
        assert isinstance(inst.event_log_storage, BatchedSqliteEventLogStorage)
    # an existing instance's settings are the user's: never rewritten
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    write_instance_yaml(tmp_path)
    assert "Batched" not in (tmp_path / "dagster.yaml").read_text()


def test_a_job_failing_inside_a_batch_is_not_shown_as_materialized(tmp_path, monkeypatch):
    """The failure path (materializations logged one by one, then the run fails) on the
    batched storage: the other jobs are attributed with their metadata, the lost one not."""
    import shutil

    from attribution_dagster.cli import local_run as lr

    root = tmp_path / "cases"
    for i in range(4):
        write_case(root, f"case-{i}", job_id=str(810 + i))
    real = lr.discover_cases

    def discover_then_delete(case_root):
        found = real(case_root)
        shutil.rmtree(root / "case-2")  # gone between listing and analysis
        return found

    monkeypatch.setattr(lr, "discover_cases", discover_then_delete)
    home = tmp_path / "home"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = lr.run_cases_report(root, f"sqlite:///{tmp_path}/r.db", instance_dir=home)
    assert list(report.failed) == ["c1.812"]
    with DagsterInstance.from_config(str(home)) as inst:
        assert isinstance(inst.event_log_storage, BatchedSqliteEventLogStorage)
        done = {"c1.810", "c1.811", "c1.813"}
        assert inst.get_materialized_partitions(AssetKey("attribution")) == done
        # earlier assets of a batch carry the lost job too, its metadata saying why
        for name in ASSETS[:-1]:
            assert inst.get_materialized_partitions(AssetKey(name)) == done | {"c1.812"}
            [rec] = inst.fetch_materializations(
                AssetRecordsFilter(asset_key=AssetKey(name), asset_partitions=["c1.812"]),
                limit=1,
            ).records
            assert "FAILED" in rec.asset_materialization.metadata, name
        [rec] = inst.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("attribution"), asset_partitions=["c1.811"]),
            limit=1,
        ).records
        assert rec.asset_materialization.metadata["category"].value == "gpu.lost"


def test_a_locked_index_is_retried_without_storing_the_batch_twice(cases, tmp_path, monkeypatch):
    """The run's file is committed before the index: a failure there must not hand the batch
    back to Dagster, which would store every event again."""
    import sqlalchemy.exc

    from attribution_dagster.instance import storage as instance_storage

    real = BatchedSqliteEventLogStorage._index_asset_events
    failures = {"left": 2}

    def locked_twice(self, events, rows):
        if failures["left"]:
            failures["left"] -= 1
            raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database is locked"))
        return real(self, events, rows)

    monkeypatch.setattr(instance_storage, "_INDEX_RETRY_SECONDS", 0.0)
    monkeypatch.setattr(BatchedSqliteEventLogStorage, "_index_asset_events", locked_twice)
    home = tmp_path / "home"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = run_cases_report(cases, f"sqlite:///{tmp_path}/r.db", instance_dir=home)
    assert len(report.results) == JOBS and failures["left"] == 0
    monkeypatch.undo()
    record = ui_record(home)
    for name in ASSETS:
        assert record[name]["events in run shards"] == JOBS, name  # not twice
        assert len(record[name]["partitions"]) == JOBS
    assert record["index events"] == JOBS * len(ASSETS)


def test_tuning_is_scoped_to_the_instance_engines(tmp_path):
    """synchronous=NORMAL on the batched storage's own engines, not on another SQLite
    database of the process (the results database keeps FULL); one planned event per asset
    per run is the storage's own answer, not a process setting."""
    import sqlalchemy

    storage = BatchedSqliteEventLogStorage(str(tmp_path / "runs"))
    with storage.index_connection() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    assert storage.supports_partition_subset_in_asset_materialization_planned_events
    other = sqlalchemy.create_engine(f"sqlite:///{tmp_path}/results.db")
    with other.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    assert not SqliteEventLogStorage(
        str(tmp_path / "stock")
    ).supports_partition_subset_in_asset_materialization_planned_events


def test_a_new_run_file_is_stamped_as_the_stock_storage_stamps_it(tmp_path: Path) -> None:
    """Our `_initdb` reads Dagster's migration scripts once per process; the file it makes
    must be what the stock one makes: the same tables, and the alembic head the stock
    check reads back as current."""
    from alembic.migration import MigrationContext
    from dagster._core.storage.event_log.sqlite import sqlite_event_log as stock_module
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    ours = BatchedSqliteEventLogStorage(str(tmp_path / "ours"))
    stock = SqliteEventLogStorage(str(tmp_path / "stock"))
    tables = {}
    for name, storage in (("ours", ours), ("stock", stock)):
        with storage.run_connection("run-1") as conn:
            db_rev, head = check_alembic_revision(
                get_alembic_config(stock_module.__file__), conn
            )
            assert db_rev == head and head is not None
            assert MigrationContext.configure(conn).get_current_revision() == head
        db = sqlite3.connect(tmp_path / name / "run-1.db")
        tables[name] = sorted(r[0] for r in db.execute(
            "select name from sqlite_master where type in ('table', 'index')"
        ))
        db.close()
    assert tables["ours"] == tables["stock"]


def test_a_local_instance_captures_step_output_to_files_without_mirror_processes(
    tmp_path, cases, monkeypatch
):
    """instance/compute_logs.py: a run's stdout and stderr land in the files the UI reads
    (get_log_data), and no `tail` or watcher process is started; a real run completes with
    its capture marked complete."""
    import os
    import subprocess
    import sys

    from attribution_dagster.instance.compute_logs import FileComputeLogManager

    home = tmp_path / "home"
    home.mkdir()
    write_instance_yaml(home)
    started: list[object] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):  # type: ignore[no-untyped-def]
        started.append(args[0] if args else kwargs.get("args"))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    with DagsterInstance.from_config(str(home)) as inst:
        logs = inst.compute_log_manager
        assert isinstance(logs, FileComputeLogManager)
        assert Path(logs._base_dir) == home.resolve() / "storage"  # Dagster's default place
        key = ["run-1", "compute_logs", "step"]
        with logs.capture_logs(key):
            print("to stdout from python")
            sys.stdout.flush()
            # at the stream's descriptor (under pytest's capture it is not 2)
            os.write(sys.stderr.fileno(), b"to stderr at the descriptor\n")
        data = logs.get_log_data(key)
        assert b"to stdout from python" in (data.stdout or b"")
        assert b"to stderr at the descriptor" in (data.stderr or b"")
        assert logs.is_capture_complete(key)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = run_cases_report(cases, f"sqlite:///{tmp_path}/r.db", instance=inst)
        assert len(report.results) == JOBS and not report.failed
    assert not any("tail" in str(cmd) for cmd in started), started
    assert list((home / "storage").rglob("*.complete"))
