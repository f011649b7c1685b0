"""The code location loads under fake environment variables, with the intended shape;
the configuration is read from YAML and the environment, with secrets only from the env."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, Definitions, DynamicPartitionsDefinition, EnvVar
from dagster._core.definitions.backfill_policy import BackfillPolicyType

from attribution_dagster.assets import ASSET_NAMES
from attribution_dagster.assets.per_window import WINDOW_ASSET_NAMES
from attribution_dagster.core.config import ConfigError, load_config, with_password
from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions

REPO = Path(__file__).resolve().parents[2]

FAKE_ENV = {
    "ATTRIBUTION_CASE_ROOT": "/data/cases",
    "ATTRIBUTION_SINK_URL": "postgresql+psycopg://attrib:s3cret@db.example:5432/attribution",
    "ATTRIBUTION_STDOUT_SINK": "1",
    "ATTRIBUTION_SENSOR_ENABLED": "0",
}


@pytest.fixture
def fake_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ATTRIBUTION_CONFIG", raising=False)
    for k, v in FAKE_ENV.items():
        monkeypatch.setenv(k, v)
    return FAKE_ENV


def test_module_loads_under_fake_env(fake_env):
    from attribution_dagster import definitions as module

    module = importlib.reload(module)
    defs = module.defs()  # a @definitions function: Dagster calls it when loading
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    # the per-job chain, plus the fleet path's window assets and weekly report
    assert keys == {*ASSET_NAMES, *WINDOW_ASSET_NAMES, "weekly_report"}


def test_asset_graph_shape(fake_env):
    defs = build_definitions(load_config())
    graph = defs.resolve_asset_graph()
    parents = {
        name: {p.to_user_string() for p in graph.get(AssetKey(name)).parent_keys}
        for name in ASSET_NAMES
    }
    assert parents == {
        "execution_context": set(),
        "raw_evidence": {"execution_context"},
        "observations": {"raw_evidence"},
        "attribution": {"observations"},
    }
    for name in ASSET_NAMES:
        node = graph.get(AssetKey(name))
        assert isinstance(node.partitions_def, DynamicPartitionsDefinition)
        assert node.partitions_def.name == "jobs"
        assert node.backfill_policy.policy_type == BackfillPolicyType.MULTI_RUN
        assert node.backfill_policy.max_partitions_per_run == 100
    # transient fetch errors are retried (RetryRequested) as often as the config says;
    # a Dagster RetryPolicy would also retry a 401 or a bad context
    assert defs.resources["analysis"].fetch_retries == 2
    assets = {a.key.to_user_string(): a for a in defs.assets}
    assert assets["raw_evidence"].op.retry_policy is None
    checks = {k.name for k in graph.asset_check_keys}
    assert checks == {
        "result_matches_contract",
        "every_node_has_evidence_or_gap_stated",
        "verdict_needs_no_look",  # per partition: on the job assets and on the windows
    }


def test_job_sensor_and_resources(fake_env):
    defs = build_definitions(load_config())
    job = defs.resolve_job_def(ATTRIBUTE_JOB)
    assert job.executor_def.name == "in_process"
    assert job.partitions_def.name == "jobs"
    sensor = defs.resolve_sensor_def("case_directory_sensor")
    assert sensor.default_status.value == "STOPPED"  # ATTRIBUTION_SENSOR_ENABLED=0
    res = defs.resources
    assert set(res) == {
        "cases", "clusters", "files", "analysis", "store", "sink", "stdout", "fleet_config"
    }
    assert res["cases"].case_root == "/data/cases"
    assert res["stdout"].enabled is True
    # the URL holding a password stays an EnvVar: the UI shows the name, not the secret
    assert isinstance(res["sink"].url, EnvVar)
    assert res["sink"].url == "ATTRIBUTION_SINK_URL"
    assert isinstance(res["store"].url, EnvVar)
    assert "s3cret" not in repr(res["sink"]._get_non_default_public_field_values())


def test_yaml_config_and_env_override(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTRIBUTION_SINK_URL", raising=False)
    monkeypatch.delenv("ATTRIBUTION_CASE_ROOT", raising=False)
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "case_root": "cases",
                "sink": {"url": "postgresql+psycopg://attrib@db:5432/a", "password_env": "DBPW"},
                "sensor": {"max_cases_per_tick": 50, "interval_seconds": 10},
                "analysis": {"lead_seconds": 300},
                "max_partitions_per_run": 250,
            }
        )
    )
    config = load_config(cfg, environ={"DBPW": "pw"})
    assert config.case_root_path == (tmp_path / "cases").resolve()  # relative to the file
    assert config.sensor.max_cases_per_tick == 50
    assert config.analysis.lead_seconds == 300
    assert config.resolved_sink_url({"DBPW": "p@ss/word"}) == (
        "postgresql+psycopg://attrib:p%40ss%2Fword@db:5432/a"
    )
    env = {
        "ATTRIBUTION_CONFIG": str(cfg),
        "ATTRIBUTION_CASE_ROOT": "/elsewhere",
        "ATTRIBUTION_SINK_URL": "sqlite:////tmp/x.db",
    }
    over = load_config(environ=env)
    assert over.case_root_path == Path("/elsewhere")
    assert over.resolved_sink_url(env) == "sqlite:////tmp/x.db"
    defs = build_definitions(config)
    assert (
        defs.resolve_asset_graph()
        .get(AssetKey("attribution"))
        .backfill_policy.max_partitions_per_run
        == 250
    )


def test_password_in_yaml_is_refused(tmp_path):
    cfg = tmp_path / "a.yaml"
    cfg.write_text("sink:\n  url: postgresql+psycopg://u:hunter2@db/x\n")
    with pytest.raises(ConfigError, match="secrets come only from the environment"):
        load_config(cfg, environ={})


@pytest.mark.parametrize(
    "text, message",
    [
        ("case_root: [unclosed", "not valid YAML"),
        ("- a list", "top level must be a mapping"),
        ("sensor:\n  max_cases_per_tick: 0\n", "field 'sensor.max_cases_per_tick'"),
        ("sink:\n  colour: blue\n", "field 'sink.colour'"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(cfg, environ={})
    assert str(cfg) in str(info.value)


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "nope.yaml", environ={})


def test_with_password_quotes_special_characters():
    from sqlalchemy.engine import make_url

    for secret in ("a b:c", "p@ss/w%rd#1", "x'; DROP"):
        url = make_url(with_password("postgresql+psycopg://u@h:5/db", secret))
        assert (url.password, url.host, url.port, url.database) == (secret, "h", 5, "db")
    assert with_password("sqlite:///x.db", None) == "sqlite:///x.db"


def test_workspace_yaml_names_the_module():
    ws = yaml.safe_load((REPO / "workspace.yaml").read_text())
    entry = ws["load_from"][0]["python_module"]
    assert entry["module_name"] == "attribution_dagster.definitions"
    assert entry["attribute"] == "defs"


def test_dagster_cli_loads_the_code_location(tmp_path):
    """`dagster definitions validate` loads workspace.yaml the way the webserver does."""
    env = {
        "PATH": str(Path(sys.executable).parent),
        "DAGSTER_HOME": str(tmp_path),
        "ATTRIBUTION_SINK_URL": f"sqlite:///{tmp_path}/r.db",
        "HOME": str(tmp_path),
    }
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-w",
            str(REPO / "workspace.yaml"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_production_instance_example_matches_dagsters_schema():
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config_schema

    cfg = yaml.safe_load((REPO / "dagster.yaml.example").read_text())
    result = validate_config(dagster_instance_config_schema(), cfg)
    assert result.success, [e.message for e in result.errors]
    assert cfg["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert cfg["run_launcher"]["class"] == "K8sRunLauncher"
    assert "postgres" in cfg["storage"]
    # no secret in the file: every credential is read from the environment
    db = cfg["storage"]["postgres"]["postgres_db"]
    assert db["password"] == {"env": "DAGSTER_PG_PASSWORD"}


def test_importing_the_code_location_changes_nothing_global(tmp_path):
    """Importing `attribution_dagster.definitions` builds nothing, reads no configuration
    and installs nothing process-wide (no SQLAlchemy listener on every Engine, no Dagster
    environment settings); `defs()` builds the location when Dagster loads it. A results
    database opened afterwards keeps SQLite's own durability (synchronous=FULL)."""
    script = f"""
import os, sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine
import attribution_dagster.definitions as d
from attribution_dagster.core.config import ConfigError
assert not event.contains(Engine, "connect", lambda *a: None)
assert not any(k.startswith("DAGSTER_EVENT_BATCH") or k.startswith("DAGSTER_EMIT")
               for k in os.environ), sorted(os.environ)
engine = sqlalchemy.create_engine("sqlite:///{tmp_path}/results.db")
with engine.connect() as conn:
    assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
try:
    d.defs()
except ConfigError as exc:
    print("config read at load:", exc)
else:
    raise AssertionError("defs() should have read the (missing) configuration")
"""
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path),
           "ATTRIBUTION_CONFIG": str(tmp_path / "missing.yaml")}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "config read at load" in proc.stdout
