"""Jobs that come from a scheduler rather than a hand-packed case: the `clusters:`
configuration, `attribution discover / analyze CLUSTER/JOB / export`, and the
finished-jobs sensor (cursor with overlap, dedupe, bounded ticks, SkipReason with the
cursor kept when the scheduler cannot answer).

The scheduler here is the `static` kind (a directory of cases or a JSON-lines file of
contexts, what `discover` prints); Slurm and Kueue have their own tests.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from dagster import SensorResult, SkipReason, build_sensor_context
from dagster_cases import write_case

from attribution_dagster.cli.app import main
from attribution_dagster.connectors.base import JobQuery, SchedulerError
from attribution_dagster.connectors.clusters import Cluster, load_checked_config
from attribution_dagster.core.config import AttributionConfig, ConfigError, load_config
from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions
from attribution_dagster.resources import AssetStoreResource, ClustersResource
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sensors import SchedulerCursor, build_finished_jobs_sensor, sensor_name

T0 = datetime(2026, 11, 2, tzinfo=timezone.utc)


def contexts_file(tmp_path: Path, n: int, start_minute: int = 0) -> Path:
    """A JSON-lines scheduler answer: n jobs ending one minute apart."""
    path = tmp_path / "jobs.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        for i in range(start_minute, start_minute + n):
            end = T0 + timedelta(minutes=i + 1)
            fh.write(
                json.dumps(
                    {
                        "job_id": str(1000 + i),
                        "scheduler": "slurm",
                        "state": "FAILED" if i % 2 else "COMPLETED",
                        "start": (end - timedelta(minutes=30)).isoformat(),
                        "end": end.isoformat(),
                        "nodes": ["node-a", "node-b"],
                    }
                )
                + "\n"
            )
    return path


def write_config(tmp_path: Path, clusters: dict) -> Path:
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(yaml.safe_dump({"clusters": clusters}), encoding="utf-8")
    return cfg


# -- configuration ----------------------------------------------------------------------


def test_cluster_blocks_validate_per_kind_with_clear_errors(tmp_path):
    ok = load_config(
        write_config(tmp_path, {"atlas": {"scheduler": {"kind": "static", "path": "cases"}}}),
        environ={},
    )
    assert ok.clusters["atlas"].scheduler.kind == "static"
    assert ok.clusters["atlas"].logs == []
    # core keeps the blocks as written; the connectors' registry validates them on load
    bad = write_config(tmp_path, {"atlas": {"scheduler": {"kind": "pbs"}}})
    with pytest.raises(
        ConfigError, match=r"clusters\.atlas\.scheduler.*unknown scheduler kind 'pbs'"
    ):
        load_checked_config(bad, environ={})
    typo = write_config(tmp_path, {"atlas": {"scheduler": {"kind": "static", "pth": "x"}}})
    with pytest.raises(ConfigError, match=r"clusters\.atlas\.scheduler \(static\): .*key 'pth'"):
        load_checked_config(typo, environ={})
    dup = write_config(tmp_path, {"a": {"scheduler": {"kind": "kai"}, "logs": "not-a-list"}})
    with pytest.raises(ConfigError, match="must be a list"):
        load_config(dup, environ={})


def test_kai_is_accepted_but_discovery_says_it_is_not_implemented(tmp_path, capsys):
    cfg = write_config(tmp_path, {"kai-pool": {"scheduler": {"kind": "kai"}}})
    config = load_config(cfg, environ={})
    client = Cluster("kai-pool", config.clusters["kai-pool"]).scheduler
    with pytest.raises(SchedulerError, match="KAI scheduler discovery is not implemented"):
        client.finished_jobs(JobQuery(since=T0))
    code = main(["--config", str(cfg), "discover", "kai-pool", "--since", "2026-11-01"])
    err = capsys.readouterr().err
    assert code == 4
    assert "KAI scheduler discovery is not implemented" in err
    assert "static context.json" in err
    assert "Traceback" not in err


# -- static scheduler and the CLI ------------------------------------------------------------


def test_static_scheduler_lists_jobs_by_end_time_and_state(tmp_path):
    path = contexts_file(tmp_path, 10)
    (path.parent / "jobs.jsonl").open("a").write("{not json}\n")  # one damaged line
    config = AttributionConfig.model_validate(
        {"clusters": {"x": {"scheduler": {"kind": "static", "path": str(path)}}}}
    )
    client = Cluster("x", config.clusters["x"]).scheduler
    jobs = client.finished_jobs(
        JobQuery(since=T0 + timedelta(minutes=3), until=T0 + timedelta(minutes=7))
    )
    assert [j.job_id for j in jobs] == ["1002", "1003", "1004", "1005"]  # end in [3, 7)
    assert all(j.cluster == "x" for j in jobs)
    failed = client.finished_jobs(JobQuery(since=T0, states=("FAILED",)))
    assert {j.state.value for j in failed} == {"FAILED"} and len(failed) == 5
    assert client.get_job("1009").end == T0 + timedelta(minutes=10)


def test_discover_prints_contexts_as_json_lines_and_a_table(tmp_path, capsys):
    cfg = write_config(
        tmp_path,
        {"atlas": {"scheduler": {"kind": "static", "path": str(contexts_file(tmp_path, 6))}}},
    )
    assert (
        main(
            [
                "--config",
                str(cfg),
                "discover",
                "atlas",
                "--since",
                "2026-11-02T00:02Z",
                "--state",
                "failed",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    objs = [json.loads(x) for x in lines]
    assert [o["job_id"] for o in objs] == ["1001", "1003", "1005"]  # ended at or after 00:02
    assert objs[0]["cluster"] == "atlas" and objs[0]["nodes"] == ["node-a", "node-b"]
    assert (
        main(["--config", str(cfg), "discover", "atlas", "--since", "2026-11-02", "--table"]) == 0
    )
    out = capsys.readouterr().out
    assert "ended (UTC)" in out and "1005" in out
    assert main(["--config", str(cfg), "discover", "atlas", "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err
    assert main(["--config", str(cfg), "discover", "nowhere", "--since", "2026-11-02"]) == 2
    assert "no cluster named 'nowhere'" in capsys.readouterr().err


def test_analyze_and_export_a_job_of_a_configured_cluster(tmp_path, capsys, samples_root):
    """`analyze atlas/<job>` takes the context from the scheduler; the evidence of a static
    scheduler's case tree comes with it. `export` writes a case that analyses the same."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(samples_root / "xid149-nvlink-3node", tree / "xid149")
    cfg = write_config(tmp_path, {"atlas": {"scheduler": {"kind": "static", "path": str(tree)}}})
    assert main(["--config", str(cfg), "analyze", "atlas/4812", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    expected = json.loads((samples_root / "xid149-nvlink-3node" / "expected.json").read_text())
    assert result["category"] == expected["category"] == "gpu.nvlink"
    assert result["suspect_nodes"] == expected["suspect_nodes"]

    out = tmp_path / "exported"
    assert main(["--config", str(cfg), "export", "atlas/4812", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert json.loads((out / "context.json").read_text())["job_id"] == "4812"
    assert main(["analyze", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["status"], again["category"], again["suspect_nodes"]) == (
        result["status"],
        result["category"],
        result["suspect_nodes"],
    )
    assert main(["--config", str(cfg), "export", "atlas/4812", str(out)]) == 2  # no overwrite
    assert main(["--config", str(cfg), "analyze", "atlas/nope"]) == 2
    assert "job nope not found in atlas" in capsys.readouterr().err
    assert main(["--config", str(cfg), "analyze", "elsewhere/1"]) == 2
    assert "not a case directory" in capsys.readouterr().err


def test_case_with_only_a_context_reads_its_clusters_sources(tmp_path, capsys):
    """A case holding only context.json takes evidence from its cluster's sources; with
    none configured the result says no source was configured instead of guessing."""
    case = write_case(tmp_path / "cases", "bare", job_id="77", cluster="atlas", with_logs=False)
    (case / "logs").rmdir()
    assert main(["analyze", str(case), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "unattributed"
    assert any(
        "no evidence source is configured" in e for c in result["coverage"] for e in c["errors"]
    )


# -- the finished-jobs sensor ----------------------------------------------------------------


@pytest.fixture
def sensor_env(tmp_path):
    path = contexts_file(tmp_path, 5)
    config = AttributionConfig.model_validate(
        {"clusters": {"atlas": {"scheduler": {"kind": "static", "path": str(path)}}}}
    )
    url = f"sqlite:///{tmp_path}/store.db"
    resources = {
        "clusters": ClustersResource.from_configs(config.clusters),
        "store": AssetStoreResource(url=url),
    }
    job = build_definitions(AttributionConfig()).resolve_job_def(ATTRIBUTE_JOB)
    return path, url, resources, job


def _tick(sensor, instance, resources, cursor):
    ctx = build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = sensor(ctx)
    if isinstance(result, SensorResult):
        for req in result.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def test_sensor_registers_finished_jobs_once_in_bounded_ticks(instance, sensor_env, tmp_path):
    path, url, resources, job = sensor_env
    sensor = build_finished_jobs_sensor(
        "atlas", job, max_jobs_per_tick=3, first_lookback_seconds=10 * 365 * 86400
    )
    assert sensor.name == sensor_name("atlas") == "atlas_finished_jobs_sensor"
    first = _tick(sensor, instance, resources, None)
    assert [r.partition_key for r in first.run_requests] == [
        "atlas.1000",
        "atlas.1001",
        "atlas.1002",
    ]
    assert all(r.run_key == r.partition_key for r in first.run_requests)
    second = _tick(sensor, instance, resources, first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["atlas.1003", "atlas.1004"]
    third = _tick(sensor, instance, resources, second.cursor)
    assert not third.run_requests and "no new finished jobs" in third.skip_reason.skip_message
    # the contexts the scheduler gave are kept for execution_context
    stored = AssetValueStore(url).indexed_contexts(["atlas.1004"])
    assert stored["atlas.1004"].end == T0 + timedelta(minutes=5)
    # a job recorded late, with an end inside the overlap, is still picked up, exactly once
    with path.open("a") as fh:
        late = {
            "job_id": "late-1",
            "scheduler": "slurm",
            "state": "NODE_FAIL",
            "start": T0.isoformat(),
            "end": (T0 + timedelta(minutes=4, seconds=30)).isoformat(),
            "nodes": ["node-c"],
        }
        fh.write(json.dumps(late) + "\n")
    fourth = _tick(sensor, instance, resources, third.cursor)
    assert [r.partition_key for r in fourth.run_requests] == ["atlas.late-1"]
    fifth = _tick(sensor, instance, resources, fourth.cursor)
    assert not fifth.run_requests


def test_sensor_asks_per_job_not_for_every_partition(instance, sensor_env, monkeypatch):
    """Jobs registered before (here: a lost cursor) are not requested again, and the tick
    never lists every `jobs` partition: their number grows with the retention."""
    _, _, resources, job = sensor_env
    sensor = build_finished_jobs_sensor("atlas", job, first_lookback_seconds=10 * 365 * 86400)
    instance.add_dynamic_partitions("jobs", ["atlas.1000", "atlas.1002", "other.1"])

    def refuse(*_a, **_k):
        raise AssertionError("the sensor listed every jobs partition")

    monkeypatch.setattr(type(instance), "get_dynamic_partitions", refuse)
    first = _tick(sensor, instance, resources, None)  # no cursor: everything listed again
    assert [r.partition_key for r in first.run_requests] == [
        "atlas.1001",
        "atlas.1003",
        "atlas.1004",
    ]
    assert SchedulerCursor.parse(first.cursor).watermark == T0 + timedelta(minutes=5)


def test_sensor_skips_with_the_error_and_keeps_the_cursor(instance, sensor_env, tmp_path):
    path, _, resources, job = sensor_env
    sensor = build_finished_jobs_sensor("atlas", job, first_lookback_seconds=10 * 365 * 86400)
    first = _tick(sensor, instance, resources, None)
    path.unlink()  # the scheduler's answer is gone: like sacct failing
    result = _tick(sensor, instance, resources, first.cursor)
    assert isinstance(result, SkipReason)
    assert "scheduler did not answer, cursor kept" in result.skip_message
    assert "does not exist" in result.skip_message
    assert SchedulerCursor.parse(first.cursor).watermark == T0 + timedelta(minutes=5)


def test_definitions_have_one_sensor_per_cluster_with_a_scheduler(tmp_path):
    config = AttributionConfig.model_validate(
        {
            "clusters": {
                "atlas": {"scheduler": {"kind": "static", "path": str(tmp_path)}},
                "gke-a3": {"scheduler": {"kind": "kai"}, "sensor": False},
                "logs-only": {},
            }
        }
    )
    defs = build_definitions(config)
    names = {s.name for s in defs.sensors}
    assert names == {
        "case_directory_sensor",
        "atlas_finished_jobs_sensor",
        "job_partition_retention_sensor",
    }


def test_per_job_assets_take_the_context_from_the_scheduler(instance, tmp_path, samples_root):
    """A sensor-registered job (context in the job index) and a job only the scheduler
    knows both materialize through the four assets; the result lands in the sink."""
    import shutil

    from dagster import AssetKey, materialize

    from attribution_dagster.assets import build_job_assets
    from attribution_dagster.core.context import job_partition_key
    from attribution_dagster.definitions import build_resources
    from attribution_dagster.sinks import SqlSink

    tree = tmp_path / "tree"
    for name in ("xid149-nvlink-3node", "app-cuda-oom"):
        shutil.copytree(samples_root / name, tree / name)
    url = f"sqlite:///{tmp_path}/r.db"
    config = AttributionConfig.model_validate(
        {
            "case_root": str(tmp_path / "no-cases"),
            "sink": {"url": url},
            "clusters": {"atlas": {"scheduler": {"kind": "static", "path": str(tree)}}},
        }
    )
    scheduler = Cluster("atlas", config.clusters["atlas"]).scheduler
    registered = scheduler.get_job("4812").model_copy(update={"cluster": "atlas"})
    AssetValueStore(url).index_jobs([registered])
    other = next(
        c
        for c in scheduler.finished_jobs(JobQuery(since=T0.replace(year=2020)))
        if c.job_id != "4812"
    )
    keys = [registered.partition_key, f"atlas.{other.job_id}"]
    instance.add_dynamic_partitions("jobs", keys)
    resources = build_resources(config)
    for key in keys:
        result = materialize(
            build_job_assets(), instance=instance, partition_key=key, resources=resources
        )
        assert result.success
    assert instance.get_materialized_partitions(AssetKey("attribution")) == set(keys)
    by_job = {r.job_id: r for r in SqlSink(url).read()}
    assert by_job["4812"].category == "gpu.nvlink"
    assert by_job[other.job_id].status in {"attributed", "ambiguous", "unattributed", "not_failed"}

    # a shortened key (job_partition_key: cleaned or cut) holds no job id to ask for: an
    # unregistered one fails saying so, instead of asking the scheduler for `x_y~hash`
    short = job_partition_key("atlas", "x/y")
    instance.add_dynamic_partitions("jobs", [short])
    failed = materialize(
        build_job_assets(), instance=instance, partition_key=short, resources=resources,
        raise_on_error=False,
    )
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.is_step_failure]
    assert "is a shortened partition key" in failure.step_failure_data.user_failure_data.description


def test_retention_deletes_old_job_partitions_and_keeps_results(instance, tmp_path):
    from attribution_dagster.core.result import AttributionResult
    from attribution_dagster.resources import SqlSinkResource
    from attribution_dagster.sensors.retention import build_job_retention_sensor
    from attribution_dagster.sinks import SqlSink

    url = f"sqlite:///{tmp_path}/r.db"
    now = datetime.now(timezone.utc)
    sink = SqlSink(url)
    for job, age_days in (("old", 40), ("new", 1)):
        sink.write(
            [
                AttributionResult(
                    job_id=job,
                    cluster="atlas",
                    failed=True,
                    status="unattributed",
                    category=None,
                    rules_version="t",
                    analyzed_at=now - timedelta(days=age_days),
                )
            ]
        )
    instance.add_dynamic_partitions("jobs", ["atlas.old", "atlas.new", "atlas.unrelated"])
    AssetValueStore(url).put("attribution", values={"atlas.old": "{}", "atlas.new": "{}"})
    resources = {"sink": SqlSinkResource(url=url), "store": AssetStoreResource(url=url)}
    sensor = build_job_retention_sensor(30)
    result = _tick(sensor, instance, resources, None)
    assert [list(r.partition_keys) for r in result.dynamic_partitions_requests] == [["atlas.old"]]
    instance.delete_dynamic_partition("jobs", "atlas.old")
    assert set(instance.get_dynamic_partitions("jobs")) == {"atlas.new", "atlas.unrelated"}
    assert {r.job_id for r in sink.read()} == {"old", "new"}  # results stay
    assert set(AssetValueStore(url).get("attribution", ["atlas.old", "atlas.new"])) == {"atlas.new"}
    again = _tick(sensor, instance, resources, None)
    assert isinstance(again, SkipReason)
