"""`make up` / `make down` (bench/deploy_stack.py up|down): the production-shaped stack with a
webserver for a user to try, on the CI PostgreSQL; `down` leaves no process and no database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import deploy_stack as ds  # noqa: E402

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.deploy,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not PG_URL and not REQUIRE,
        reason="ATTRIBUTION_TEST_PG_URL is not set (scripts/ci-services.sh start prints it)",
    ),
]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "deploy_stack.py"), *args],
        env=env, capture_output=True, text=True, timeout=240,
    )


def databases() -> set[str]:
    url = make_url(PG_URL).set(database="postgres")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {d for (d,) in conn.execute(text("SELECT datname FROM pg_database"))}
    finally:
        engine.dispose()


def test_up_serves_the_ui_and_down_leaves_nothing(tmp_path):
    if not PG_URL:
        pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
    port = ds.free_port()
    up = cli("up", "--dir", str(tmp_path), "--port", str(port), "--jobs", "20")
    try:
        assert up.returncode == 0, up.stderr[-2000:]
        state = json.loads((tmp_path / ds.STATE).read_text())
        assert set(state["pgids"]) == {"code-server", "daemon", "webserver"}
        assert set(state["databases"]) <= databases()
        query = b'{"query": "{ workspaceOrError { ... on Workspace { locationEntries ' \
            b'{ name loadStatus } } } }"}'
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/graphql", data=query,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            [entry] = json.load(resp)["data"]["workspaceOrError"]["locationEntries"]
        assert entry == {"name": "attribution_dagster", "loadStatus": "LOADED"}
        again = cli("up", "--dir", str(tmp_path), "--port", str(port))
        assert again.returncode != 0 and "the stack is up" in again.stderr
    finally:
        down = cli("down", "--dir", str(tmp_path))
    assert down.returncode == 0, down.stderr[-2000:]
    assert "dropped" in down.stdout
    assert not any(ds.group_alive(p) for p in state["pgids"].values())
    assert not set(state["databases"]) & databases()
    assert not (tmp_path / ds.STATE).exists()
