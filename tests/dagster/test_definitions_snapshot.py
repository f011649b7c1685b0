"""The code location's shape against a checked-in snapshot (tests/dagster/snapshots/).

`attribution_dagster.definitions:defs` is loaded as workspace.yaml names it, under a fixed
configuration (three clusters: a Slurm one with a sensor, a Kueue one, a static one without
a sensor; retention on), and every asset spec (key, deps, partitions, group, kinds,
backfill policy, check specs), job, sensor, schedule and resource key is written as JSON.
A change to any of them is a visible diff of definitions.json in review.

After an intended change: `UPDATE_SNAPSHOTS=1 pytest tests/dagster/test_definitions_snapshot.py`
and commit the new file.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from dagster import Definitions

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "definitions.json"
CONFIG = """\
case_root: {root}/cases
sink:
  url: sqlite:///{root}/results.db
sensor:
  retention_days: 30
clusters:
  atlas:
    scheduler: {{kind: slurm}}
    topology:
      - {{kind: files, paths: [{root}/topology]}}
      - {{kind: slurm_scontrol}}
  h100-east:
    scheduler: {{kind: kueue, context: east}}
  lab:
    scheduler: {{kind: static, path: {root}/cases}}
    sensor: false
"""


def partitions(pdef: Any) -> Any:
    """A partitions definition by what it is: kind, name, dimensions, cron, keys."""
    if pdef is None:
        return None
    out: dict[str, Any] = {"type": type(pdef).__name__}
    if getattr(pdef, "name", None):
        out["name"] = pdef.name
    if hasattr(pdef, "partitions_defs"):  # multi
        out["dimensions"] = {d.name: partitions(d.partitions_def) for d in pdef.partitions_defs}
    if hasattr(pdef, "cron_schedule"):
        out["cron"] = pdef.cron_schedule
        out["timezone"] = pdef.timezone
        out["start"] = pdef.start.isoformat()
    if type(pdef).__name__ == "StaticPartitionsDefinition":
        out["keys"] = list(pdef.get_partition_keys())
    return out


def snapshot(defs: Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    repo = defs.get_repository_def()  # sensors and schedules resolved against the jobs
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        policy = node.backfill_policy
        assets[key.to_user_string()] = {
            "deps": sorted(p.to_user_string() for p in node.parent_keys),
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "partitions": partitions(node.partitions_def),
            "backfill_policy": None if policy is None else {
                "type": policy.policy_type.value,
                "max_partitions_per_run": policy.max_partitions_per_run,
            },
            "checks": sorted(k.name for k in node.check_keys),
        }  # fmt: skip
    jobs = {}
    for job in sorted(repo.get_all_jobs(), key=lambda j: j.name):
        if job.name.startswith("__"):
            continue  # Dagster's implicit asset job
        jobs[job.name] = {
            "executor": job.executor_def.name,
            "partitions": partitions(job.partitions_def),
            "assets": sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys),
        }
    sensors = {
        s.name: {
            "jobs": sorted(j.name for j in s.jobs) if s.has_jobs else [],
            "minimum_interval_seconds": s.minimum_interval_seconds,
            "default_status": s.default_status.value,
            "resources": sorted(s.required_resource_keys),
        }
        for s in sorted(repo.sensor_defs, key=lambda s: s.name)
    }
    schedules = {
        s.name: {
            "cron": s.cron_schedule,
            "timezone": s.execution_timezone,
            "job": s.job_name,
            "default_status": s.default_status.value,
        }
        for s in sorted(repo.schedule_defs, key=lambda s: s.name)
    }
    resources = {k: type(v).__name__ for k, v in sorted((defs.resources or {}).items())}
    return {
        "assets": assets,
        "jobs": jobs,
        "sensors": sensors,
        "schedules": schedules,
        "resources": resources,
    }


@pytest.fixture
def loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Definitions:
    """The workspace's code location under the fixed configuration."""
    root = Path("/srv/attribution")  # fixed, so paths in the snapshot do not vary
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(CONFIG.format(root=root))
    for k in list(os.environ):
        if k.startswith("ATTRIBUTION_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("ATTRIBUTION_CONFIG", str(cfg))
    from paths_harness import code_location, workspace_entry

    name, attribute = workspace_entry()
    module = importlib.import_module(name)
    defs = code_location(getattr(module, attribute))
    Definitions.validate_loadable(defs)
    return defs


def test_definitions_match_the_snapshot(loaded: Definitions) -> None:
    got = json.dumps(snapshot(loaded), indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(got)
    want = SNAPSHOT.read_text()
    assert got == want, (
        "the code location's shape changed: review the diff, then "
        "UPDATE_SNAPSHOTS=1 pytest tests/dagster/test_definitions_snapshot.py"
    )


def test_the_snapshot_names_follow_the_conventions() -> None:
    """Sensors `<cluster>_<subject>_sensor` or `<subject>_sensor`, jobs `_job`, schedules
    `_schedule` (STYLE.md)."""
    snap = json.loads(SNAPSHOT.read_text())
    assert set(snap["sensors"]) >= {
        "atlas_finished_jobs_sensor",
        "h100_east_finished_jobs_sensor",
        "h100_east_pod_placement_sensor",
        "case_directory_sensor",
        "job_partition_retention_sensor",
    }
    assert "lab_finished_jobs_sensor" not in snap["sensors"]  # sensor: false
    assert all(name.endswith("_sensor") for name in snap["sensors"])
    assert all(name.endswith("_job") for name in snap["jobs"])
    assert all(name.endswith("_schedule") for name in snap["schedules"])
