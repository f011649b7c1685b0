"""The production instance (dagster.yaml.example): Dagster's own validation, and a real run
on PostgreSQL instance storage (marker `postgres`, ATTRIBUTION_TEST_PG_URL)."""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "dagster.yaml.example"
PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"

FAKE_ENV = {
    "DAGSTER_PG_HOST": "db.internal",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "not-a-secret",
    "ATTRIBUTION_IMAGE": "registry.example/attribution-dagster:0.1.0",
}


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    for k, v in FAKE_ENV.items():
        monkeypatch.setenv(k, v)
    shutil.copy(EXAMPLE, tmp_path / "dagster.yaml")
    return tmp_path


def _class_config_ok(section: dict) -> None:
    """Validate one `{module, class, config}` block against that class's own schema."""
    import importlib

    cls = getattr(importlib.import_module(section["module"]), section["class"])
    result = process_config(cls.config_type(), section.get("config") or {})
    assert result.success, [e.message for e in result.errors]


def test_example_passes_dagster_validation(home):
    config, _custom = dagster_instance_config(str(home))
    assert set(config["storage"]) == {"postgres"}  # runs, event log and schedules
    raw = yaml.safe_load((home / "dagster.yaml").read_text())
    assert raw["run_launcher"]["class"] == "K8sRunLauncher"
    assert raw["run_coordinator"]["class"] == "QueuedRunCoordinator"
    _class_config_ok(raw["run_launcher"])
    _class_config_ok(raw["run_coordinator"])

    from dagster_postgres import DagsterPostgresStorage

    result = process_config(DagsterPostgresStorage.config_type(), raw["storage"]["postgres"])
    assert result.success, [e.message for e in result.errors]


def test_validation_catches_a_bad_launcher_key(home):
    """The checks above can fail: an unknown K8sRunLauncher key is refused."""
    raw = yaml.safe_load((home / "dagster.yaml").read_text())
    raw["run_launcher"]["config"]["pods_per_window"] = 3
    with pytest.raises(AssertionError):
        _class_config_ok(raw["run_launcher"])


def test_pinned_integration_libraries():
    """dagster-postgres / dagster-k8s pin Dagster core exactly (DAGSTER-NOTES.md)."""
    from importlib.metadata import version

    assert version("dagster") == "1.13.27"
    assert version("dagster-postgres") == "0.29.27"
    assert version("dagster-k8s") == "0.29.27"
    text = (ROOT / "pyproject.toml").read_text()
    assert "dagster-postgres==0.29.27" in text and "dagster-k8s==0.29.27" in text


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL and not REQUIRE, reason="ATTRIBUTION_TEST_PG_URL is not set")
def test_window_run_on_postgres_instance_storage(tmp_path):
    """A real materialization of a window partition, runs and events in PostgreSQL."""
    if not PG_URL:
        pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
    from dagster import AssetKey, DagsterInstance, MultiPartitionKey, materialize
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage
    from sqlalchemy.engine import make_url

    sys.path.insert(0, str(ROOT / "bench"))
    import week_data

    from attribution_dagster.assets.per_window import build_window_assets
    from attribution_dagster.core.config import load_config
    from attribution_dagster.definitions import build_resources

    jsonl = week_data.generate(tmp_path / "week", jobs=40, seed=5)
    # psycopg2 URL for Dagster (postgresql://...), our own psycopg3 URL for the results
    dagster_url = make_url(PG_URL).set(drivername="postgresql+psycopg2").render_as_string(
        hide_password=False
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {"storage": {"postgres": {"postgres_url": dagster_url}},
             "telemetry": {"enabled": False}}
        )
    )
    (tmp_path / "attribution.yaml").write_text(
        f"clusters:\n  atlas:\n    scheduler: {{kind: static, path: {jsonl}}}\n"
        f"sink:\n  url: {PG_URL}\nfleet:\n  start: '2026-11-01'\n  workers: 2\n"
    )
    config = load_config(tmp_path / "attribution.yaml")
    from attribution_dagster.core.database import shared_engine
    from attribution_dagster.sinks.sql import metadata

    metadata.drop_all(shared_engine(PG_URL))
    day = "2026-11-10"
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = materialize(
                build_window_assets(config),
                instance=instance,
                partition_key=MultiPartitionKey({"cluster": "atlas", "window": day}),
                resources=build_resources(config),
            )
        assert result.success
        event = instance.get_latest_materialization_event(AssetKey("window_attributions"))
        assert event is not None and event.run_id == result.run_id
        assert instance.get_run_by_id(result.run_id) is not None
        jobs = event.asset_materialization.metadata["jobs"].value
    from attribution_dagster.sinks.sql import SqlSink

    assert jobs > 0 and SqlSink(PG_URL).count() == jobs
