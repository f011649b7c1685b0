"""PostgreSQL restarted during a backfill (issue 21, item 2): the deployment of
test_deployment.py (code server, daemon, a process per run, run_retries and monitoring) on a
private PostgreSQL server of its own (scripts/ci-services.sh with its own PG_ROOT and port,
about a second to start), so that restarting it disturbs no other test.

The server is stopped (`pg_ctl -m fast`: every connection is cut) while a window run is
past its first step, and started again 2 s later. Runs and daemon ticks that hit the
outage fail; the failed runs are retried; the backfill completes with one result row per
job and every run succeeded or was retried to success.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import deploy_stack as ds  # noqa: E402
import week_data  # noqa: E402

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
JOBS = int(os.environ.get("ATTRIBUTION_DEPLOY_RESTART_JOBS", "700"))
DAYS = [f"2026-11-{d:02d}" for d in range(9, 16)]

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.deploy,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not PG_URL and not REQUIRE,
        reason="ATTRIBUTION_TEST_PG_URL is not set (scripts/ci-services.sh start prints it)",
    ),
]


class PrivatePostgres:
    """scripts/ci-services.sh on a PG_ROOT and port of its own."""

    def __init__(self) -> None:
        # under /tmp itself: the server runs as user postgres, who cannot enter pytest's
        # root-only temp directories
        self.root = Path(f"/tmp/attr-deploy-pg-{uuid.uuid4().hex[:8]}")
        self.env = {**os.environ, "PG_ROOT": str(self.root), "PG_PORT": str(ds.free_port())}

    def _run(self, cmd: str) -> str:
        out = subprocess.run(
            [str(ROOT / "scripts" / "ci-services.sh"), cmd],
            env=self.env, capture_output=True, text=True, timeout=120,
        )
        if out.returncode:
            raise RuntimeError(f"ci-services.sh {cmd}: {out.stderr.strip()}")
        return out.stdout.strip()

    def start(self) -> str:
        return self._run("start")

    def stop(self) -> None:
        self._run("stop")

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def test_a_postgres_restart_mid_backfill_loses_nothing(tmp_path):
    if not PG_URL:
        pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
    if not (PG_BIN / "pg_ctl").exists():
        pytest.fail(f"no PostgreSQL server binaries in {PG_BIN} (set PG_BIN)")
    from dagster import DagsterRunStatus
    from dagster._core.execution.backfill import BulkActionStatus

    from attribution_dagster.core.database import shared_engine

    jsonl = week_data.generate(
        tmp_path / "window", jobs=JOBS, seed=23, cluster=ds.WINDOW_CLUSTER, first_id=2_300_000
    )
    expected = {c["job_id"] for c in map(json.loads, jsonl.open())}
    pg = PrivatePostgres()
    stack = None
    try:
        url = pg.start()
        stack = ds.Stack(tmp_path, url, max_concurrent_runs=2, window_jsonl=jsonl)
        stack.create()
        stack.start_code_server()
        stack.start_daemon()
        with stack.instance() as instance:
            backfill = ds.submit_window_backfill(
                instance, stack.config_path, ds.WINDOW_CLUSTER, DAYS, "restart"
            )

            def window_run_mid_way():
                for r in instance.get_runs():
                    if r.status == DagsterRunStatus.STARTED and (
                        instance.get_run_stats(r.run_id).steps_succeeded >= 1
                    ):
                        return r
                return None

            ds.wait_for("a window run mid-way", window_run_mid_way, 300, stack, 0.3)
            pg.stop()
            time.sleep(2)
            pg.start()
            t_back = time.monotonic()

            def done():
                try:
                    runs = list(instance.get_runs())
                    status = instance.get_backfill(backfill).status
                except Exception:  # noqa: BLE001 - this process's connections heal too
                    return None
                finished = all(r.is_finished for r in runs)
                return finished and status != BulkActionStatus.REQUESTED and (status, runs)

            status, runs = ds.wait_for("the backfill after the restart", done, 600, stack, 2)
            recovered = time.monotonic() - t_back

        assert status == BulkActionStatus.COMPLETED_SUCCESS
        by_id = {r.run_id: r for r in runs}
        children: dict[str, list] = {}
        for r in runs:
            if r.tags.get("dagster/parent_run_id"):
                children.setdefault(r.tags["dagster/parent_run_id"], []).append(r)

        def retried_to_success(run) -> bool:
            kids = children.get(run.run_id, [])
            return any(k.status == DagsterRunStatus.SUCCESS or retried_to_success(k) for k in kids)

        failed = [r for r in runs if r.status != DagsterRunStatus.SUCCESS]
        assert [r.tags.get("dagster/partition") for r in failed if not retried_to_success(r)] == []
        done_days = {
            r.tags["dagster/partition"] for r in by_id.values()
            if r.status == DagsterRunStatus.SUCCESS
        }
        assert done_days == {f"{ds.WINDOW_CLUSTER}|{d}" for d in DAYS}

        from sqlalchemy import text

        with shared_engine(stack.results_url).connect() as conn:
            rows = [j for (j,) in conn.execute(text("SELECT job_id FROM attribution_results"))]
        assert len(rows) == len(set(rows)), "a job has two result rows"
        assert set(rows) == expected, f"missing {len(expected - set(rows))} jobs"
        print(
            f"\npostgres restart: {len(failed)} runs failed and were retried, "
            f"{len(runs)} runs, backfill done {recovered:.0f} s after the server was back"
        )
    finally:
        if stack is not None:
            stack.close()
        pg.remove()
