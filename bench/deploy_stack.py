"""A production-shaped Dagster deployment as real processes, for tests/deploy and
bench/deploy.py (docs/deployment.md describes the same shape for a user).

    PostgreSQL  <- instance storage (runs, event log, schedules/sensors) and the results sink,
                   two databases created for this stack and dropped by `close()`
    dagster code-server start   (the code location, gRPC, behind a temp workspace.yaml)
    dagster-daemon run          (sensors, QueuedRunCoordinator, backfills, run retries)
    run workers                 (DefaultRunLauncher: one process per run, started by the
                                 code server; `kill -9` one with `kill_run_worker`)

Every process starts in its own session (process group); `close()` kills each group, so
no process outlives the stack, even when a test fails. Nothing here imports the project:
the processes load it from `repo` (PYTHONPATH), configured by a temp attribution.yaml.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PER_JOB_CLUSTER = "atlas"  # the finished-jobs sensor drains it: one run per job
WINDOW_CLUSTER = "fleet"  # no sensor: backfills of its daily windows
PID_RE = re.compile(r"Started process for run \(pid: (\d+)\)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_alive(pgid: int) -> bool:
    """A live (not zombie) process in the process group: the run workers are in the code
    server's group; PID 1 here reaps orphans late, and a zombie still answers `kill -0`."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class Proc:
    """A process started in its own session: `kill()` signals its whole group."""

    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Stack:
    """One deployment under `root`: databases, config files, processes."""

    root: Path
    pg_url: str  # any database on the server (SQLAlchemy URL); the stack makes its own two
    max_concurrent_runs: int = 2
    max_retries: int = 2
    per_job_jsonl: Path | None = None
    window_jsonl: Path | None = None
    max_jobs_per_tick: int = 20
    window_workers: int = 1
    start_timeout_seconds: int = 60
    fleet_start: str = "2026-11-01"
    lookback_from: datetime = datetime(2026, 11, 9, tzinfo=timezone.utc)
    procs: list[Proc] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.dagster_db = f"deploy_dagster_{tag}"
        self.results_db = f"deploy_results_{tag}"
        self.home = self.root / "dagster_home"
        self.port = free_port()

    # -- URLs ---------------------------------------------------------------------------

    def _url(self, db: str, driver: str) -> str:
        return (
            make_url(self.pg_url)
            .set(drivername=driver, database=db)
            .render_as_string(hide_password=False)
        )

    @property
    def results_url(self) -> str:
        """The results sink (the project's own psycopg 3 URL)."""
        return self._url(self.results_db, "postgresql+psycopg")

    @property
    def dagster_url(self) -> str:
        """Dagster's instance storage. dagster-postgres needs psycopg2, named: SQLAlchemy
        2.1 maps a bare `postgresql://` to psycopg 3, on which its NOTIFY fails."""
        return self._url(self.dagster_db, "postgresql+psycopg2")

    def _admin(self):
        return create_engine(
            self._url("postgres", "postgresql+psycopg"), isolation_level="AUTOCOMMIT"
        )

    # -- set-up -------------------------------------------------------------------------

    def create(self) -> Stack:
        """Two fresh databases, dagster.yaml, attribution.yaml, workspace.yaml."""
        engine = self._admin()
        try:
            with engine.connect() as conn:
                for db in (self.dagster_db, self.results_db):
                    conn.execute(text(f'CREATE DATABASE "{db}"'))
                    self.databases.append(db)
        finally:
            engine.dispose()
        self.home.mkdir(parents=True, exist_ok=True)
        self.write_instance_yaml()
        self.write_attribution_yaml()
        self.workspace = self.root / "workspace.yaml"
        self.workspace.write_text(
            yaml.safe_dump(
                {
                    "load_from": [
                        {
                            "grpc_server": {
                                "host": "127.0.0.1",
                                "port": self.port,
                                "location_name": "attribution_dagster",
                            }
                        }
                    ]
                }
            )
        )
        return self

    def write_instance_yaml(self) -> None:
        """dagster.yaml.example's shape, with the DefaultRunLauncher instead of pods."""
        cfg: dict[str, Any] = {
            "storage": {"postgres": {"postgres_url": self.dagster_url}},
            "run_coordinator": {
                "module": "dagster._core.run_coordinator",
                "class": "QueuedRunCoordinator",
                "config": {
                    "max_concurrent_runs": self.max_concurrent_runs,
                    "dequeue_interval_seconds": 1,
                },
            },
            "run_launcher": {
                "module": "dagster._core.launcher",
                "class": "DefaultRunLauncher",
            },
            "run_retries": {"enabled": True, "max_retries": self.max_retries},
            # A daemon killed while launching a run leaves it STARTING with no process:
            # monitoring fails it after the start timeout, and run_retries runs it again.
            "run_monitoring": {
                "enabled": True,
                "start_timeout_seconds": self.start_timeout_seconds,
                "poll_interval_seconds": 5,
            },
            "sensors": {"use_threads": True, "num_workers": 2},
            "backfills": {"use_threads": True, "num_workers": 2},
            "telemetry": {"enabled": False},
        }
        (self.home / "dagster.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    def write_attribution_yaml(self) -> None:
        clusters: dict[str, Any] = {}
        if self.per_job_jsonl:
            clusters[PER_JOB_CLUSTER] = {
                "scheduler": {"kind": "static", "path": str(self.per_job_jsonl)},
                "sensor": True,
            }
        if self.window_jsonl:
            clusters[WINDOW_CLUSTER] = {
                "scheduler": {"kind": "static", "path": str(self.window_jsonl)},
                "sensor": False,
            }
        lookback = (datetime.now(timezone.utc) - self.lookback_from).total_seconds() + 86400
        empty_cases = self.root / "no-cases"
        empty_cases.mkdir(exist_ok=True)
        cfg = {
            "clusters": clusters,
            "case_root": str(empty_cases),
            "sink": {"url": self.results_url},
            "sensor": {
                "enabled": True,
                "scheduler_interval_seconds": 1,
                "max_jobs_per_tick": self.max_jobs_per_tick,
                "first_lookback_seconds": lookback,
                "retention_days": None,
            },
            "fleet": {
                "window": "daily",
                "start": self.fleet_start,
                "workers": self.window_workers,
                "report_schedule": False,
                "reports_dir": str(self.root / "reports"),
            },
        }
        self.config_path = self.root / "attribution.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))

    # -- processes ----------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DAGSTER_HOME=str(self.home),
            ATTRIBUTION_CONFIG=str(self.config_path),
            PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
            # dagster.yaml.example: set in every Dagster process of a deployment
            DAGSTER_EVENT_BATCH_SIZE="1000",
            DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS="1",
            PYTHONWARNINGS="ignore",
        )
        for k in ("ATTRIBUTION_SINK_URL", "ATTRIBUTION_STORE_URL", "ATTRIBUTION_CASE_ROOT"):
            env.pop(k, None)
        return env

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        log = self.root / f"{name}-{len(self.procs)}.log"
        fh = log.open("wb")
        popen = subprocess.Popen(
            argv,
            cwd=self.root,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        fh.close()
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def start_code_server(self, timeout: float = 90) -> Proc:
        proc = self._spawn(
            "code-server",
            [
                str(BIN / "dagster"), "code-server", "start",
                "-h", "127.0.0.1", "-p", str(self.port),
                "-m", "attribution_dagster.definitions", "-a", "defs",
                "--location-name", "attribution_dagster",
            ],
        )
        from dagster._grpc.client import DagsterGrpcClient

        client = DagsterGrpcClient(port=self.port, host="127.0.0.1")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"code server exited:\n{proc.tail()}")
            try:
                # ready when the location itself has loaded (the proxy answers pings first)
                if client.list_repositories():
                    self.code_server = proc
                    return proc
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.5)
        raise RuntimeError(f"code server not ready in {timeout} s:\n{proc.tail()}")

    def start_daemon(self) -> Proc:
        self.daemon = self._spawn(
            "daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(self.workspace)]
        )
        return self.daemon

    def kill_daemon(self) -> None:
        """`kill -9` of the daemon's whole process group."""
        self.daemon.kill(signal.SIGKILL)

    def close(self) -> None:
        """Kill every process group (TERM, then KILL), then drop the databases."""
        for proc in reversed(self.procs):
            if proc.alive():
                proc.kill(signal.SIGTERM)
            proc.kill(signal.SIGKILL)  # the group: run workers outlive a dead leader
        self.procs.clear()
        if self.databases:
            engine = self._admin()
            try:
                with engine.connect() as conn:
                    for db in self.databases:
                        conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            finally:
                engine.dispose()
            self.databases.clear()

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- observing ----------------------------------------------------------------------

    def instance(self):
        from dagster import DagsterInstance

        os.environ.setdefault("DAGSTER_HOME", str(self.home))
        return DagsterInstance.from_config(str(self.home))

    def logs(self, lines: int = 40) -> str:
        return "\n\n".join(f"== {p.name} ({p.log.name})\n{p.tail(lines)}" for p in self.procs)

    def describe(self) -> str:
        """Every run (status, partition, retry parent, backfill) and the logs' tails."""
        lines = []
        try:
            with self.instance() as inst:
                for r in inst.get_runs():
                    t = r.tags
                    parent = t.get("dagster/parent_run_id", "")[:8]
                    lines.append(
                        f"{r.run_id[:8]} {r.job_name} {r.status.value} "
                        f"{t.get('dagster/partition')} parent={parent}"
                        f" backfill={t.get('dagster/backfill', '')}"
                    )
                    if not r.is_finished or r.status.value == "FAILURE":
                        for e in inst.all_logs(r.run_id)[-6:]:
                            lines.append(f"    {e.dagster_event_type} {(e.message or '')[:160]}")
        except Exception as exc:  # noqa: BLE001 - a description must not hide the timeout
            lines.append(f"(runs unreadable: {exc})")
        return "\n".join(lines) + "\n\n" + self.logs()


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, stack: Stack | None = None,
    interval: float = 0.5,
) -> Any:
    """Poll `check` until it returns something truthy; on timeout, fail with the runs and
    the processes' logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            state = stack.describe() if stack else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{state}")
        time.sleep(interval)


def run_worker_pid(instance: Any, run_id: str) -> int | None:
    """The run worker's pid, from the engine event it logs when it starts."""
    from dagster import DagsterEventType

    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        m = PID_RE.search(entry.message or "")
        if m:
            return int(m.group(1))
    return None


def kill_run_worker(instance: Any, run_id: str) -> int | None:
    """`kill -9` of a run's worker process; returns its pid (None if already gone)."""
    pid = run_worker_pid(instance, run_id)
    if pid is None:
        return None
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return pid


def submit_window_backfill(
    instance: Any, config_path: Path, cluster: str, days: Iterable[str], title: str
) -> str:
    """A backfill of the window assets over `days` of `cluster`, as the UI submits one
    (the backfill daemon launches its runs)."""
    from dagster import AssetKey, MultiPartitionKey
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from attribution_dagster.core.config import load_config
    from attribution_dagster.definitions import build_definitions

    defs = build_definitions(load_config(config_path))
    graph = defs.resolve_asset_graph()
    keys = [str(MultiPartitionKey({"cluster": cluster, "window": d})) for d in days]
    backfill_id = make_new_backfill_id()
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=graph,
        partition_names=keys,
        asset_selection=[AssetKey("finished_jobs"), AssetKey("window_attributions")],
        backfill_timestamp=time.time(),
        tags={"attribution/test-backfill": title},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill_id


# -- make up / make down -----------------------------------------------------------------

STATE = "stack.json"


def up(root: Path, pg_url: str, port: int, jobs: int = 300) -> dict[str, Any]:
    """Start the stack plus a webserver and leave them running; the state file says what
    `down` stops. A generated week: `atlas` (sensor, one run per job, 12 jobs) and `fleet`
    (window backfills from the UI, `jobs` jobs)."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import week_data

    root = root.resolve()
    if (root / STATE).exists():
        raise SystemExit(f"{root / STATE} exists: the stack is up (make down stops it)")
    root.mkdir(parents=True, exist_ok=True)
    per_job = week_data.generate(root / "per-job", jobs=12, seed=41, cluster=PER_JOB_CLUSTER,
                                 first_id=4_100_000)
    window = week_data.generate(root / "window", jobs=jobs, seed=42, cluster=WINDOW_CLUSTER,
                                first_id=4_200_000)
    stack = Stack(root, pg_url, per_job_jsonl=per_job, window_jsonl=window)
    try:
        stack.create()
        stack.start_code_server()
        stack.start_daemon()
        web = stack._spawn("webserver", [
            str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
            "-w", str(stack.workspace),
        ])
        state = {
            "pgids": {p.name: p.pid for p in stack.procs},
            "databases": stack.databases,
            "pg_url": pg_url,
            "ui": f"http://127.0.0.1:{port}",
        }
        (root / STATE).write_text(json.dumps(state, indent=2))
        import urllib.request

        def ui_up() -> bool:
            try:
                with urllib.request.urlopen(f"{state['ui']}/server_info", timeout=2):
                    return True
            except OSError:
                return False

        if not web.alive():
            raise RuntimeError(web.tail())
        wait_for("the webserver", ui_up, 120, stack)
    except BaseException:
        stack.close()
        (root / STATE).unlink(missing_ok=True)
        raise
    return state


def down(root: Path) -> list[str]:
    """Kill every process group `up` started, drop its databases; returns what it did."""
    import json

    path = root.resolve() / STATE
    if not path.exists():
        return [f"nothing to stop ({path} does not exist)"]
    state = json.loads(path.read_text())
    done = []
    for name, pgid in state["pgids"].items():
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            time.sleep(1 if sig == signal.SIGTERM else 0)
        done.append(f"stopped {name} (process group {pgid})")
    stack = Stack(root, state["pg_url"])
    stack.databases = list(state["databases"])
    stack.close()
    done.append(f"dropped {', '.join(state['databases'])}")
    path.unlink()
    return done


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="make up / make down: the production-shaped "
                                 "stack with a webserver (docs/deployment.md)")
    ap.add_argument("command", choices=["up", "down"])
    ap.add_argument("--dir", type=Path, default=REPO / ".deploy")
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=300, help="window jobs in the generated week")
    args = ap.parse_args(argv)
    if args.command == "down":
        for line in down(args.dir):
            print(line)
        return 0
    pg_url = os.environ.get("ATTRIBUTION_TEST_PG_URL")
    if not pg_url:
        print("deploy_stack up: set ATTRIBUTION_TEST_PG_URL (scripts/ci-services.sh start)",
              file=sys.stderr)
        return 2
    state = up(args.dir, pg_url, args.port, args.jobs)
    print(f"up: {state['ui']} (databases {', '.join(state['databases'])}; logs in {args.dir})")
    print("the sensor atlas_finished_jobs_sensor runs one run per job; backfill the fleet "
          "windows 2026-11-09..15 from the UI (asset window_attributions). `make down` stops.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
