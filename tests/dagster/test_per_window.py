"""The fleet path: window partitions (cluster x day), finished_jobs -> window_attributions.

Jobs come from a generated week (bench/week_data.py: a static scheduler's JSON-lines answer
plus tiny log trees), so every assertion is about real engine results.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
from dagster import MultiPartitionKey, materialize
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import week_data  # noqa: E402

from attribution_dagster import fleet, pipeline  # noqa: E402
from attribution_dagster.assets.per_window import (  # noqa: E402
    CLUSTER_DIM,
    WINDOW_DIM,
    build_window_assets,
)
from attribution_dagster.cli.app import main as cli_main  # noqa: E402
from attribution_dagster.connectors.base import SourceError  # noqa: E402
from attribution_dagster.connectors.clusters import Cluster, EvidenceSources  # noqa: E402
from attribution_dagster.core.config import load_config  # noqa: E402
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.definitions import build_resources  # noqa: E402
from attribution_dagster.sinks.sql import SqlSink, results_table, windows_table  # noqa: E402

DAY1, DAY2 = "2026-11-10", "2026-11-11"


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> Path:
    """120 generated jobs of ISO week 2026-W46 (jobs.jsonl + cases)."""
    out = tmp_path_factory.mktemp("week")
    return week_data.generate(out, jobs=120, seed=7)


def jobs_ending_on(jsonl: Path, day: str) -> list[ExecutionContext]:
    ctxs = [ExecutionContext.model_validate_json(line) for line in jsonl.open()]
    return [c for c in ctxs if c.end.astimezone(timezone.utc).strftime("%Y-%m-%d") == day]


def write_config(tmp_path: Path, week: Path, **clusters: str) -> Path:
    cfg = tmp_path / "attribution.yaml"
    blocks = clusters or {"atlas": str(week)}
    lines = ["clusters:"]
    for name, path in blocks.items():
        lines += [f"  {name}:", f"    scheduler: {{kind: static, path: {path}}}"]
    lines += [
        "sink:",
        f"  url: sqlite:///{tmp_path}/results.db",
        "fleet:",
        "  window: daily",
        '  start: "2026-11-01"',
        "  workers: 2",
        "  chunk_size: 7",
        f"  reports_dir: {tmp_path}/reports",
    ]
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def rows(url: str) -> int:
    with SqlSink(url).engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(results_table)).scalar_one()


def materialize_window(config, instance, cluster: str, day: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return materialize(
            build_window_assets(config),
            instance=instance,
            partition_key=MultiPartitionKey({CLUSTER_DIM: cluster, WINDOW_DIM: day}),
            resources=build_resources(config),
            raise_on_error=False,
        )


def metadata_of(result, asset: str) -> dict:
    for e in result.get_asset_materialization_events():
        if e.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in e.materialization.metadata.items()}
    raise AssertionError(f"no materialization of {asset}")


def test_window_keys_and_bounds():
    since = datetime(2026, 10, 1, tzinfo=timezone.utc)
    until = datetime(2026, 11, 12, tzinfo=timezone.utc)
    keys = fleet.window_keys("daily", since, until)
    assert len(keys) == 42 and keys[0] == "2026-10-01" and keys[-1] == "2026-11-11"
    assert len(fleet.window_keys("hourly", since, datetime(2026, 10, 2, tzinfo=timezone.utc))) == 24
    start, end = fleet.window_bounds("2026-11-10-13:00", "hourly")
    assert (start.hour, end.hour) == (13, 14)
    with pytest.raises(fleet.WindowError, match="not a daily key"):
        fleet.window_bounds("2026-11-10-13:00", "daily")


def test_window_assets_attribute_every_job_once(week, tmp_path, instance):
    """Both windows through Dagster: one row per job, the same rows again on a rerun."""
    config = load_config(write_config(tmp_path, week))
    url = config.resolved_sink_url()
    expected = {d: jobs_ending_on(week, d) for d in (DAY1, DAY2)}
    assert all(expected.values()), "the generated week has jobs on both days"

    for day in (DAY1, DAY2):
        r = materialize_window(config, instance, "atlas", day)
        assert r.success
        meta = metadata_of(r, "window_attributions")
        assert meta["jobs"] == len(expected[day])
        assert meta["attributed now"] == len(expected[day])
        assert meta["failed jobs"] == 0
    total = len(expected[DAY1]) + len(expected[DAY2])
    assert rows(url) == total

    # Idempotent: the same window again writes nothing new and duplicates nothing.
    again = materialize_window(config, instance, "atlas", DAY1)
    assert again.success
    meta = metadata_of(again, "window_attributions")
    assert meta["attributed now"] == 0 and meta["already done"] == len(expected[DAY1])
    assert rows(url) == total

    # The pool's results are the engine's: same status and category as a direct analysis.
    sink = SqlSink(url)
    for ctx in expected[DAY1][:10]:
        direct = pipeline.analyze_context(ctx, AnalysisSettings(workers=1))
        [stored] = sink.read(job_id=ctx.job_id, cluster="atlas")
        assert (stored.status, stored.category) == (direct.status, direct.category)
    # ... and the job facts the report needs are in the warehouse.
    status = fleet.window_status(sink, "atlas")
    assert status[DAY1]["status"] == "done" and status[DAY1]["jobs"] == len(expected[DAY1])


def test_per_job_rows_count_for_the_window(week, tmp_path):
    """A job the per-job path already attributed is not redone by its window, nor doubled."""
    config = load_config(write_config(tmp_path, week))
    url = config.resolved_sink_url()
    sink = SqlSink(url)
    ctxs = jobs_ending_on(week, DAY1)
    first = ctxs[0]
    # what the per-job `attribution` asset does: the result plus the job's context
    sink.write([pipeline.analyze_context(first, AnalysisSettings(workers=1))], contexts=[first])
    cluster = Cluster("atlas", config.clusters["atlas"])
    assert fleet.list_window(sink, cluster, DAY1) == len(ctxs)
    out = fleet.attribute_window(sink, cluster, DAY1, workers=1)
    assert out.ok
    assert out.skipped == 1 and out.attributed == len(ctxs) - 1
    assert rows(url) == len(ctxs)


def test_failing_scheduler_fails_only_its_window(week, tmp_path, instance):
    config = load_config(
        write_config(tmp_path, week, atlas=str(week), broken=str(tmp_path / "gone.jsonl"))
    )
    good = materialize_window(config, instance, "atlas", DAY1)
    bad = materialize_window(config, instance, "broken", DAY1)
    assert good.success and not bad.success
    failure = next(e for e in bad.all_events if e.is_step_failure)
    text = failure.step_failure_data.user_failure_data.description
    assert "broken 2026-11-10: scheduler unreachable" in text
    assert "does not exist" in text and "gone.jsonl" in text
    sink = SqlSink(config.resolved_sink_url())
    assert fleet.window_status(sink, "broken")[DAY1]["status"] == "failed"
    assert fleet.window_status(sink, "atlas")[DAY1]["status"] == "done"
    assert rows(config.resolved_sink_url()) == len(jobs_ending_on(week, DAY1))


class _DownLoki:
    """A log source whose back-end refuses connections (what a down Loki looks like)."""

    name = "loki:main"

    def fetch_logs(self, ctx, anchors, window, limits=None):
        raise SourceError("loki at http://loki:3100 refused the connection", transient=True)


def test_unreachable_evidence_fails_the_window_and_writes_nothing(tmp_path):
    """Jobs whose every evidence source failed are not written (a rerun redoes them)."""
    src = [json.loads(line) for line in (week_data.generate(tmp_path / "w", 30, 3)).open()]
    no_case = tmp_path / "jobs.jsonl"
    with no_case.open("w") as fh:
        for d in src:
            d.pop("case_dir")
            fh.write(json.dumps(d) + "\n")
    config = load_config(write_config(tmp_path, no_case))
    cluster = Cluster("atlas", config.clusters["atlas"])
    cluster.__dict__["sources"] = EvidenceSources(logs=(_DownLoki(),))
    sink = SqlSink(config.resolved_sink_url())
    day = datetime.fromisoformat(src[0]["end"]).strftime("%Y-%m-%d")
    n = fleet.list_window(sink, cluster, day)
    assert n > 0
    out = fleet.attribute_window(sink, cluster, day, workers=1)
    assert not out.ok and out.attributed == 0 and len(out.unreachable) == n
    assert "evidence unreachable" in out.reason and "refused the connection" in out.reason
    assert fleet.window_status(sink, "atlas")[day]["status"] == "failed"
    assert rows(config.resolved_sink_url()) == 0


def test_backfill_cli_resumes_without_redoing(week, tmp_path, capsys):
    """A killed backfill (one window half done) re-run finishes only what is missing."""
    cfg = write_config(tmp_path, week)
    config = load_config(cfg)
    url = config.resolved_sink_url()
    args = ["backfill", "atlas", "--since", "2026-11-09", "--until", "2026-11-16",
            "--config", str(cfg), "--direct", "--workers", "1"]
    assert cli_main(args) == 0
    total = rows(url)
    assert total == 120

    # Simulate a kill in the middle of DAY2: half its results gone, window not done.
    sink = SqlSink(url)
    day2 = sorted(c.job_id for c in jobs_ending_on(week, DAY2))
    lost = day2[: len(day2) // 2]
    with sink.engine.begin() as conn:
        conn.execute(results_table.delete().where(results_table.c.job_id.in_(lost)))
        conn.execute(
            windows_table.update().where(windows_table.c.window_key == DAY2).values(status="listed")
        )
    capsys.readouterr()
    assert cli_main(args) == 0
    err = capsys.readouterr().err
    assert "6 already done, 1 to run" in err
    assert f"{len(lost)} jobs attributed" in err
    assert rows(url) == total
    per_job = Counter(r.job_id for r in sink.read(cluster="atlas"))
    assert max(per_job.values()) == 1


def test_backfill_cli_through_dagster(week, tmp_path, capsys):
    cfg = write_config(tmp_path, week)
    rc = cli_main(["backfill", "atlas", "--since", DAY1, "--until", "2026-11-12",
                   "--config", str(cfg), "--instance", str(tmp_path / "dagster")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "2 windows done, 0 failed" in err and "through Dagster" in err
    # the progress bar (one line per window when stderr is not a terminal), with an ETA
    assert "] 1/2 windows" in err and "ETA" in err and f"{DAY1} done:" in err
    n = len(jobs_ending_on(week, DAY1)) + len(jobs_ending_on(week, DAY2))
    assert rows(load_config(cfg).resolved_sink_url()) == n
    # the runs are in the persistent instance, for the UI
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(tmp_path / "dagster")) as inst:
        assert len(inst.get_runs()) == 2


def test_backfill_cli_names_a_failed_window(week, tmp_path, capsys):
    cfg = write_config(tmp_path, week, broken=str(tmp_path / "missing.jsonl"))
    rc = cli_main(["backfill", "broken", "--since", DAY1, "--until", DAY2,
                   "--config", str(cfg), "--direct"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "1 failed" in err and "scheduler unreachable" in err and "missing.jsonl" in err


def test_hourly_partitions_speak_the_window_functions_format():
    """Dagster's hourly keys are the keys fleet.window_bounds reads (and daily likewise)."""
    from attribution_dagster.assets.per_window import split_key, window_partitions
    from attribution_dagster.core.config import AttributionConfig

    for window in ("hourly", "daily"):
        config = AttributionConfig.model_validate(
            {"fleet": {"window": window, "start": "2026-11-01"}, "clusters": {"a": {}, "b": {}}}
        )
        parts = window_partitions(config)
        key = parts.get_partition_keys()[30]
        cluster, w = split_key(parts, key)
        start, end = fleet.window_bounds(w, window)
        assert cluster in ("a", "b") and start.tzinfo is not None
        assert end - start == fleet.STEPS[window]


def test_the_current_window_is_a_partition_and_a_future_one_fails_alone(week, tmp_path, capsys):
    """`backfill --direct` attributes the jobs that already ended today; through Dagster
    today's window must exist too. A window that has not begun fails alone, in one line."""
    from datetime import timedelta

    from attribution_dagster.assets.per_window import window_partitions

    cfg = write_config(tmp_path, week)
    today = datetime.now(timezone.utc).date()
    parts = window_partitions(load_config(cfg))
    assert parts.has_partition_key(MultiPartitionKey({CLUSTER_DIM: "atlas",
                                                      WINDOW_DIM: today.isoformat()}))
    later = today + timedelta(days=3)
    rc = cli_main(["backfill", "atlas", "--since", today.isoformat(),
                   "--until", (later + timedelta(days=1)).isoformat(),
                   "--config", str(cfg), "--instance", str(tmp_path / "dagster")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert f"{today} done:" in err and f"{later}: window {later} is not a partition" in err
    assert "internal error" not in err
