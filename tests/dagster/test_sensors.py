"""The case-directory sensor: registration, cursor, idempotence, bounded ticks, bad cases."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dagster import SensorResult, SkipReason, build_sensor_context
from dagster_cases import write_case

from attribution_dagster.core.config import AttributionConfig, SensorConfig
from attribution_dagster.core.context import job_partition_key
from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions
from attribution_dagster.resources import AssetStoreResource, StaticCasesResource
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sensors import Cursor, build_case_directory_sensor


@pytest.fixture
def env(tmp_path):
    root = tmp_path / "cases"
    root.mkdir()
    url = f"sqlite:///{tmp_path}/store.db"
    resources = {
        "cases": StaticCasesResource(case_root=str(root)),
        "store": AssetStoreResource(url=url),
    }
    return root, url, resources


def make_sensor(max_cases_per_tick: int = 200, settle_seconds: float = 0.0):
    defs = build_definitions(AttributionConfig())
    job = defs.resolve_job_def(ATTRIBUTE_JOB)
    return build_case_directory_sensor(
        job, max_cases_per_tick=max_cases_per_tick, settle_seconds=settle_seconds
    )


def tick(sensor, instance, resources, cursor):
    """Evaluate once and apply the partition requests, as the daemon would."""
    ctx = build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = sensor(ctx)
    if isinstance(result, SensorResult):
        for req in result.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        return result, result.cursor or cursor
    return result, cursor


def requested(result) -> list[str]:
    if not isinstance(result, SensorResult):
        return []
    return sorted(r.partition_key for r in result.run_requests or [])


def test_registers_new_cases_and_requests_one_run_each(instance, env):
    root, url, resources = env
    write_case(root, "a", job_id="100")
    write_case(root, "b", job_id="101", cluster="west")
    sensor = make_sensor()
    result, cursor = tick(sensor, instance, resources, None)
    assert requested(result) == ["c1.100", "west.101"]
    assert {r.run_key for r in result.run_requests} == {"c1.100", "west.101"}
    [add] = result.dynamic_partitions_requests
    assert add.partitions_def_name == "jobs"
    assert sorted(add.partition_keys) == ["c1.100", "west.101"]
    assert Cursor.parse(cursor).mark_ns > 0
    # the case index tells the assets where each case lives
    assert AssetValueStore(url).case_dirs(["c1.100"]) == {"c1.100": str(root / "a")}


def test_second_tick_and_restart_register_nothing_twice(instance, env, monkeypatch):
    root, _, resources = env
    write_case(root, "a", job_id="100")
    sensor = make_sensor()
    first, cursor = tick(sensor, instance, resources, None)
    assert requested(first) == ["c1.100"]
    again, cursor2 = tick(sensor, instance, resources, cursor)
    assert requested(again) == []
    assert isinstance(again, SkipReason) or not again.run_requests
    # a restart that lost the cursor re-scans but registers nothing twice, asking about
    # the keys it read rather than listing every partition (they grow with the retention)
    write_case(root, "b", job_id="101")
    listing = type(instance).get_dynamic_partitions
    with monkeypatch.context() as patch:
        patch.setattr(type(instance), "get_dynamic_partitions", lambda *a, **k: 1 / 0)
        lost, _ = tick(sensor, instance, resources, None)
    assert requested(lost) == ["c1.101"]
    assert sorted(listing(instance, "jobs")) == ["c1.100", "c1.101"]


def test_a_new_case_appearing_is_picked_up(instance, env):
    root, _, resources = env
    write_case(root, "a", job_id="100")
    sensor = make_sensor()
    _, cursor = tick(sensor, instance, resources, None)
    case = write_case(root, "b", job_id="200")
    # an old mtime (rsync -a / cp -p) must not hide it: the change time still moves
    os.utime(case / "context.json", (1_000_000_000, 1_000_000_000))
    result, cursor = tick(sensor, instance, resources, cursor)
    assert requested(result) == ["c1.200"]
    assert sorted(instance.get_dynamic_partitions("jobs")) == ["c1.100", "c1.200"]


def test_malformed_context_is_skipped_without_failing_the_tick(instance, env):
    root, _, resources = env
    (root / "broken").mkdir()
    (root / "broken" / "context.json").write_text("{not json", encoding="utf-8")
    (root / "missing-field").mkdir()
    (root / "missing-field" / "context.json").write_text(json.dumps({"job_id": "1"}))
    (root / "binary").mkdir()
    (root / "binary" / "context.json").write_bytes(b"\xff\xfe\x00garbage")
    write_case(root, "good", job_id="300")
    sensor = make_sensor()
    result, cursor = tick(sensor, instance, resources, None)
    assert requested(result) == ["c1.300"]
    # the bad ones are behind the cursor now: the next tick is quiet
    result2, _ = tick(sensor, instance, resources, cursor)
    assert requested(result2) == []


def test_fixed_case_is_picked_up_after_being_malformed(instance, env):
    root, _, resources = env
    (root / "late").mkdir()
    (root / "late" / "context.json").write_text("{", encoding="utf-8")
    sensor = make_sensor()
    result, cursor = tick(sensor, instance, resources, None)
    assert requested(result) == []
    # the tick's skip reason (shown in the UI) names the case and why, not only the logs
    why = result.skip_reason.skip_message
    assert why.startswith("no new jobs (1 case(s) read, 1 malformed); skipped ")
    assert f"{root / 'late'}: " in why
    write_case(root, "late", job_id="400")  # rewrites context.json
    result, _ = tick(sensor, instance, resources, cursor)
    assert requested(result) == ["c1.400"]


def test_work_per_tick_is_bounded_and_nothing_is_missed(instance, env):
    root, _, resources = env
    for i in range(7):
        write_case(root, f"case{i}", job_id=str(500 + i), with_logs=False)
    sensor = make_sensor(max_cases_per_tick=3)
    seen: list[str] = []
    cursor = None
    for _ in range(4):
        result, cursor = tick(sensor, instance, resources, cursor)
        got = requested(result)
        assert len(got) <= 3
        seen += got
    assert sorted(seen) == sorted(f"c1.{500 + i}" for i in range(7))
    assert len(seen) == len(set(seen))


def test_recent_case_waits_for_settle_time(instance, env):
    root, _, resources = env
    write_case(root, "fresh", job_id="600")
    sensor = make_sensor(settle_seconds=3600)
    result, cursor = tick(sensor, instance, resources, None)
    assert requested(result) == []
    assert Cursor.parse(cursor).mark_ns == 0  # the cursor did not move past it
    result, _ = tick(make_sensor(settle_seconds=0), instance, resources, cursor)
    assert requested(result) == ["c1.600"]


def test_unsafe_ids_become_safe_keys_and_duplicates_register_once(instance, env):
    root, _, resources = env
    write_case(root, "odd", job_id="12345_[3]/x y", cluster="gpu west")
    write_case(root, "dup1", job_id="700")
    write_case(root, "dup2", job_id="700")
    result, _ = tick(make_sensor(), instance, resources, None)
    keys = requested(result)
    # cleaned, so it ends in a hash of the exact name (`gpu_west.12345__3_x_y` alone could
    # be another job's key); the full name is in the metadata (`job`)
    [odd] = [k for k in keys if k.startswith("gpu_west.12345__3_x_y~")]
    assert odd == job_partition_key("gpu west", "12345_[3]/x y") and len(odd) == 30
    assert keys.count("c1.700") == 1
    for key in keys:
        assert all(ch.isalnum() or ch in "_.-~" for ch in key)


def test_missing_case_root_is_a_skip_not_an_error(instance, tmp_path):
    resources = {
        "cases": StaticCasesResource(case_root=str(tmp_path / "nope")),
        "store": AssetStoreResource(url=f"sqlite:///{tmp_path}/s.db"),
    }
    result, _ = tick(make_sensor(), instance, resources, None)
    assert isinstance(result, SkipReason)
    assert "does not exist" in result.skip_message


def test_garbage_cursor_means_rescan_not_crash(instance, env):
    root, _, resources = env
    write_case(root, "a", job_id="800")
    result, cursor = tick(make_sensor(), instance, resources, "]]not json[[")
    assert requested(result) == ["c1.800"]
    assert Cursor.parse(cursor).names_at_mark == ("a",)


def test_sensor_targets_the_in_process_job():
    defs = build_definitions(AttributionConfig(sensor=SensorConfig(interval_seconds=45)))
    sensor = defs.resolve_sensor_def("case_directory_sensor")
    assert sensor.minimum_interval_seconds == 45
    assert sensor.job_name == ATTRIBUTE_JOB
    job = defs.resolve_job_def(ATTRIBUTE_JOB)
    assert job.executor_def.name == "in_process"


def test_nested_case_directories_are_found_but_not_inside_a_case(instance, env):
    root, _, resources = env
    write_case(root / "2026-11", "a", job_id="900")
    inner = write_case(root, "b", job_id="901")
    # a context.json inside a case's logs is not another case
    write_case(inner / "logs", "not-a-case", job_id="902")
    result, _ = tick(make_sensor(), instance, resources, None)
    assert requested(result) == ["c1.900", "c1.901"]
    assert Path(root / "2026-11" / "a").is_dir()
