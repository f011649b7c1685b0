"""The four per-job assets through Dagster: one partition per run and many per run,
metadata, checks, retries, partial data, and failures isolated to one job's partition."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    materialize,
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from dagster_cases import write_case

from attribution_dagster.assets import ASSET_NAMES, build_job_assets
from attribution_dagster.cli.local_run import run_cases, run_cases_report
from attribution_dagster.core.config import AttributionConfig, RetryConfig, SinkConfig
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.definitions import build_resources
from attribution_dagster.resources import LocalFilesResource
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sinks import SqlSink

REPO = Path(__file__).resolve().parents[2]


class FlakyFilesResource(LocalFilesResource):
    """The real files connector, made to fail for one job (a disk or network error).

    Attempts are counted in a file so the count survives Dagster re-creating the resource.
    """

    fail_job: str
    fail_times: int
    counter: str

    def client(self):
        real = super().client()
        resource = self

        class Client:
            def fetch_logs(self, case_dir, ctx, anchors, window):
                if ctx.job_id == resource.fail_job:
                    p = Path(resource.counter)
                    n = int(p.read_text()) if p.exists() else 0
                    p.write_text(str(n + 1))
                    if n < resource.fail_times:
                        raise OSError(5, "Input/output error", str(case_dir))
                return real.fetch_logs(case_dir, ctx, anchors, window)

            def fetch_metrics(self, case_dir, ctx, families, window):
                return real.fetch_metrics(case_dir, ctx, families, window)

        return Client()


@pytest.fixture
def setup(tmp_path):
    root = tmp_path / "cases"
    root.mkdir()
    url = f"sqlite:///{tmp_path}/results.db"
    config = AttributionConfig(
        case_root=str(root),
        sink=SinkConfig(url=url),
        retry=RetryConfig(max_retries=2, delay_seconds=0),
    )
    assets = build_job_assets()
    return root, url, config, assets, build_resources(config)


def register(instance, *keys):
    instance.add_dynamic_partitions("jobs", list(keys))


def latest_metadata(instance, asset: str, key: str) -> dict:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    assert records, f"{asset} {key} was not materialized"
    return {k: v.value for k, v in records[0].asset_materialization.metadata.items()}


def check_passed(instance, name: str) -> bool:
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey("attribution"), name), limit=1
    )
    return history[0].status.value == "SUCCEEDED"


def test_one_partition_materializes_all_four_assets(instance, setup):
    root, url, _, assets, resources = setup
    write_case(root, "xid", job_id="100", nodes=("node-a", "node-b", "node-c"))
    register(instance, "c1.100")
    result = materialize(assets, instance=instance, partition_key="c1.100", resources=resources)
    assert result.success
    for name in ASSET_NAMES:
        assert "c1.100" in instance.get_materialized_partitions(AssetKey(name))
    meta = latest_metadata(instance, "attribution", "c1.100")
    assert meta["status"] == "attributed"
    assert meta["category"] == "gpu.lost"
    assert meta["suspect nodes"] == "node-b"
    assert meta["symptom chain"].startswith("| time | node | kind | role |")
    assert (
        "root_cause" in meta["symptom chain"] and "logs/node-b/kern.log:1" in meta["symptom chain"]
    )
    assert meta["evidence items"] >= 1
    assert meta["partial data"] is False
    # shown inline in the UI, unlike Markdown over 1,000 characters
    key_rows = [r.data for r in meta["root cause, then first symptoms"].records]
    assert key_rows[0]["role"] == "root_cause" and key_rows[0]["node"] == "node-b"
    assert key_rows[0]["evidence"] == "logs/node-b/kern.log:1"
    assert 1 <= len(key_rows) <= 8
    ctx_meta = latest_metadata(instance, "execution_context", "c1.100")
    assert ctx_meta["job_id"] == "100" and ctx_meta["nodes"] == 3
    ev_meta = latest_metadata(instance, "raw_evidence", "c1.100")
    assert ev_meta["records"] >= 3 and "files:logs" in ev_meta["coverage"]
    obs_meta = latest_metadata(instance, "observations", "c1.100")
    assert "xid" in obs_meta["kinds"]
    # written through the sink, same answer as the CLI's path
    [stored] = SqlSink(url).read(job_id="100")
    assert stored.category == "gpu.lost" and stored.suspect_nodes == ["node-b"]
    from attribution_dagster import pipeline

    direct = pipeline.analyze_case(root / "xid")
    assert (direct.status, direct.category, direct.suspect_nodes) == (
        stored.status,
        stored.category,
        stored.suspect_nodes,
    )
    assert check_passed(instance, "result_matches_contract")
    assert check_passed(instance, "every_node_has_evidence_or_gap_stated")


def test_many_partitions_in_one_run_with_per_partition_metadata(instance, setup):
    root, url, _, assets, resources = setup
    keys = []
    for i in range(6):
        write_case(root, f"c{i}", job_id=str(200 + i), bad_node="node-a" if i % 2 else "node-b")
        keys.append(f"c1.{200 + i}")
    register(instance, *keys)
    result = materialize(
        assets,
        instance=instance,
        resources=resources,
        tags={ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]},
    )
    assert result.success
    assert len(instance.get_run_records()) == 1  # one run for six jobs
    # the run says what it covered: job count, first and last job
    run = instance.get_run_by_id(result.run_id)
    assert run.tags["attribution/batch_jobs"] == "6"
    assert run.tags["attribution/batch_first_job"] == keys[0]
    assert run.tags["attribution/batch_last_job"] == keys[-1]
    assert instance.get_materialized_partitions(AssetKey("attribution")) == set(keys)
    for i, key in enumerate(keys):
        meta = latest_metadata(instance, "attribution", key)
        assert meta["suspect nodes"] == ("node-a" if i % 2 else "node-b")
        assert meta["batch: partitions"] == 6
        assert latest_metadata(instance, "execution_context", key)["job_id"] == str(200 + i)
    assert len(SqlSink(url).read()) == 6


def test_partial_evidence_is_flagged_and_the_gap_stated(instance, setup):
    root, url, _, assets, resources = setup
    case = write_case(root, "p", job_id="300", nodes=("node-a", "node-b", "node-c"))
    shutil.rmtree(case / "logs" / "node-c")
    register(instance, "c1.300")
    assert materialize(
        assets, instance=instance, partition_key="c1.300", resources=resources
    ).success
    meta = latest_metadata(instance, "attribution", "c1.300")
    assert meta["partial data"] is True
    assert "files:logs" in meta["failed or partial sources"]
    [stored] = SqlSink(url).read(job_id="300")
    assert "node-c" in stored.coverage[0].nodes_missing
    # the gap is stated, so the coverage check passes
    assert check_passed(instance, "every_node_has_evidence_or_gap_stated")


def test_failed_fetch_is_retried_then_succeeds(instance, setup, tmp_path):
    root, url, _, assets, resources = setup
    write_case(root, "flaky", job_id="400")
    register(instance, "c1.400")
    counter = tmp_path / "attempts"
    flaky = FlakyFilesResource(fail_job="400", fail_times=2, counter=str(counter))
    result = materialize(
        assets, instance=instance, partition_key="c1.400", resources={**resources, "files": flaky}
    )
    assert result.success
    assert counter.read_text() == "3"  # two failures, then the third try (RetryRequested)
    assert SqlSink(url).read(job_id="400")[0].category == "gpu.lost"


def test_connector_failure_fails_only_that_jobs_run(instance, setup, tmp_path):
    root, url, _, assets, resources = setup
    write_case(root, "good", job_id="500")
    write_case(root, "bad", job_id="501")
    register(instance, "c1.500", "c1.501")
    flaky = FlakyFilesResource(fail_job="501", fail_times=99, counter=str(tmp_path / "n"))
    res = {**resources, "files": flaky}
    bad = materialize(
        assets, instance=instance, partition_key="c1.501", resources=res, raise_on_error=False
    )
    good = materialize(assets, instance=instance, partition_key="c1.500", resources=res)
    assert not bad.success and good.success
    assert (tmp_path / "n").read_text() == "3"  # 1 try + 2 retries
    assert instance.get_materialized_partitions(AssetKey("attribution")) == {"c1.500"}
    assert [r.job_id for r in SqlSink(url).read()] == ["500"]
    reason = AssetValueStore(url).failures()[("raw_evidence", "c1.501")]
    assert "Input/output error" in reason


def test_in_a_batch_a_failing_job_fails_only_its_partition(instance, setup, tmp_path):
    root, url, _, assets, resources = setup
    keys = []
    for i in range(5):
        write_case(root, f"c{i}", job_id=str(600 + i))
        keys.append(f"c1.{600 + i}")
    register(instance, *keys)
    flaky = FlakyFilesResource(fail_job="602", fail_times=99, counter=str(tmp_path / "n"))
    result = materialize(
        assets,
        instance=instance,
        resources={**resources, "files": flaky},
        tags={ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]},
        raise_on_error=False,
    )
    assert not result.success  # the run says something failed ...
    assert (tmp_path / "n").read_text() == "3"  # inline retries for that job only
    good = set(keys) - {"c1.602"}
    # ... and the others were attributed, stored and marked materialized
    assert instance.get_materialized_partitions(AssetKey("attribution")) == good
    assert {f"c1.{r.job_id}" for r in SqlSink(url).read()} == good
    failures = AssetValueStore(url).failures()
    assert "Input/output error" in failures[("raw_evidence", "c1.602")]
    assert failures[("attribution", "c1.602")].startswith("upstream observations failed")
    assert latest_metadata(instance, "raw_evidence", "c1.602")["FAILED"].startswith("OSError")
    failure_events = [e for e in result.all_events if e.is_step_failure]
    assert "c1.602" in failure_events[0].step_failure_data.error.message


def test_partition_without_a_case_fails_with_a_clear_reason(instance, setup):
    _, url, _, assets, resources = setup
    register(instance, "c1.nowhere")
    result = materialize(
        assets,
        instance=instance,
        partition_key="c1.nowhere",
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success
    reason = AssetValueStore(url).failures()[("execution_context", "c1.nowhere")]
    assert "no case directory for partition c1.nowhere" in reason


def test_local_run_goes_through_dagster_and_reads_back_from_the_sink(tmp_path):
    root = tmp_path / "cases"
    write_case(root, "a", job_id="700")
    write_case(root, "b", job_id="701", state="COMPLETED", bad_node=None)
    (root / "junk").mkdir()
    (root / "junk" / "context.json").write_text("[]", encoding="utf-8")
    url = f"sqlite:///{tmp_path}/r.db"
    home = tmp_path / "dagster-home"
    report = run_cases_report(root, url, instance_dir=home)
    assert report.runs == 1 and report.failed == {}
    assert list(report.skipped) == [str(root / "junk")]
    assert [(r.job_id, r.status) for r in report.results] == [
        ("700", "attributed"),
        ("701", "not_failed"),
    ]
    assert all(isinstance(r, AttributionResult) for r in report.results)
    # the persistent instance keeps partitions and materializations for the UI
    with DagsterInstance.from_config(str(home)) as inst:
        assert sorted(inst.get_dynamic_partitions("jobs")) == ["c1.700", "c1.701"]
        assert inst.get_materialized_partitions(AssetKey("attribution")) == {"c1.700", "c1.701"}
    # running again is idempotent: same rows, no duplicate partitions
    again = run_cases(root, url, instance_dir=home, batch=False)
    assert [r.job_id for r in again] == ["700", "701"]
    assert SqlSink(url).count() == 2


def test_local_run_reports_a_case_that_vanished(tmp_path, monkeypatch):
    root = tmp_path / "cases"
    write_case(root, "a", job_id="800")
    gone = write_case(root, "b", job_id="801")
    write_case(root, "c", job_id="802")
    from attribution_dagster.cli import local_run as lr

    real = lr.discover_cases

    def discover_then_delete(case_root):
        found = real(case_root)
        shutil.rmtree(gone)  # deleted between listing and analysis
        return found

    monkeypatch.setattr(lr, "discover_cases", discover_then_delete)
    report = lr.run_cases_report(root, f"sqlite:///{tmp_path}/r.db")
    assert [r.job_id for r in report.results] == ["800", "802"]
    assert list(report.failed) == ["c1.801"]
    assert "execution_context" in report.failed["c1.801"]


@pytest.mark.skipif(not any((REPO / "samples").glob("*/context.json")), reason="no samples yet")
def test_every_bundled_sample_through_dagster(tmp_path):
    from attribution_dagster.cli.local_run import discover_cases

    cases, skipped = discover_cases(REPO / "samples")
    report = run_cases_report(REPO / "samples", f"sqlite:///{tmp_path}/r.db")
    assert report.failed == {}
    assert len(report.results) == len(cases)
    assert {r.job_id for r in report.results} == {ctx.job_id for _, ctx in cases.values()}
    assert report.runs == 1


@pytest.mark.parametrize(
    "url", ["not a url", "postgresql+psycopg://u:hunter2@127.0.0.1:1/db", "sqlite:////proc/x/y.db"]
)
def test_local_run_bad_sink_url_is_a_clear_error(tmp_path, url):
    from attribution_dagster.core.config import ConfigError

    root = tmp_path / "cases"
    write_case(root, "a", job_id="900")
    with pytest.raises(ConfigError, match="cannot open the results database") as info:
        run_cases(root, url)
    assert "hunter2" not in str(info.value)


def test_batches_are_contiguous_ranges_without_foreign_keys():
    from attribution_dagster.cli.local_run import _contiguous_chunks

    order = ["a", "b", "x", "c", "d", "e", "f", "y"]
    wanted = {"a", "b", "c", "d", "e", "f"}
    assert _contiguous_chunks(order, wanted, 3) == [["a", "b"], ["c", "d", "e"], ["f"]]
    assert _contiguous_chunks(order, set(), 3) == []
    assert _contiguous_chunks(["a"], {"a"}, 1) == [["a"]]


def test_local_run_batches_only_its_own_partitions(tmp_path):
    """Keys registered earlier by someone else (the sensor) sit between ours: not run."""
    root = tmp_path / "cases"
    for i in range(4):
        write_case(root, f"c{i}", job_id=str(950 + i))
    with DagsterInstance.ephemeral() as inst:
        inst.add_dynamic_partitions("jobs", ["c1.950", "other.1", "c1.951"])
        report = run_cases_report(root, f"sqlite:///{tmp_path}/r.db", instance=inst)
        assert report.failed == {}
        assert sorted(r.job_id for r in report.results) == ["950", "951", "952", "953"]
        assert "other.1" not in inst.get_materialized_partitions(AssetKey("attribution"))
        assert report.runs == 2  # [950] and [951, 952, 953]: no range spans other.1


def test_local_run_applies_the_clis_analysis_settings(tmp_path):
    """A window that ends before the XID line leaves the job without its root cause."""
    from attribution_dagster.core.settings import AnalysisSettings

    root = tmp_path / "cases"
    write_case(root, "a", job_id="990")
    url = f"sqlite:///{tmp_path}/r.db"
    [wide] = run_cases(root, url, settings=AnalysisSettings(workers=1))
    assert wide.category == "gpu.lost"
    # the case starts 10:00 and the XID is at 10:03:11; the NCCL timeout at 10:03:40
    ctx_file = root / "a" / "context.json"
    import json as _json

    ctx = _json.loads(ctx_file.read_text())
    ctx.update(start="2026-11-02T10:03:20Z", job_id="991")
    ctx_file.write_text(_json.dumps(ctx))
    narrow_settings = AnalysisSettings(lead_seconds=0, lag_seconds=0, workers=1)
    [narrow] = run_cases(root, url, settings=narrow_settings)
    assert narrow.job_id == "991"
    assert narrow.category != "gpu.lost"
    [default] = run_cases(root, f"sqlite:///{tmp_path}/r2.db")  # 120 s lead sees the XID
    assert default.category == "gpu.lost"
