"""The weekly fleet report: counts, GPU-hours, repeat offenders, charts, schedule.

The warehouse is filled by the fleet path over generated weeks (bench/week_data.py) with
planted repeat offenders; on SQLite always, and on PostgreSQL (marker `postgres`) when
ATTRIBUTION_TEST_PG_URL is set.
"""

from __future__ import annotations

import os
import sys
import warnings
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import week_data  # noqa: E402

from attribution_dagster import fleet
from attribution_dagster.connectors.clusters import Cluster  # noqa: E402
from attribution_dagster.core.config import ClusterConfig  # noqa: E402
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.reports import weekly as report
from attribution_dagster.sinks.sql import SqlSink, shared_engine  # noqa: E402
from attribution_dagster.sinks.sql import metadata as sink_metadata  # noqa: E402

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"
PREV_WEEK = week_data.WEEK_START - timedelta(days=7)


def _dbs() -> list:
    return [
        pytest.param("sqlite", id="sqlite"),
        pytest.param(
            "postgresql",
            id="postgresql",
            marks=[
                pytest.mark.postgres,
                pytest.mark.skipif(
                    not PG_URL and not REQUIRE, reason="ATTRIBUTION_TEST_PG_URL is not set"
                ),
            ],
        ),
    ]


def fill(url: str, jsonl: Path, cluster: str = week_data.CLUSTER) -> int:
    """List and attribute every day of the file's week through the fleet functions."""
    sink = SqlSink(url)
    scheduler = {"kind": "static", "path": str(jsonl)}
    c = Cluster(cluster, ClusterConfig.model_validate({"scheduler": scheduler}))
    ends = [ExecutionContext.model_validate_json(line).end for line in jsonl.open()]
    start, end = min(ends), max(ends) + timedelta(seconds=1)
    n = 0
    for key in fleet.window_keys("daily", start, end):
        fleet.list_window(sink, c, key)
        out = fleet.attribute_window(sink, c, key, workers=2)
        assert out.ok, out.reason
        n += out.jobs
    return n


@pytest.fixture(scope="module", params=_dbs())
def warehouse(request, tmp_path_factory) -> tuple[str, Path, Path]:
    """A warehouse holding week 2026-W46 (200 jobs) and the week before (40 jobs)."""
    tmp = tmp_path_factory.mktemp("reports")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp}/results.db"
    else:
        if not PG_URL:
            pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
        url = PG_URL
        from attribution_dagster.resources.value_store import store_metadata

        sink_metadata.drop_all(shared_engine(url))
        store_metadata.drop_all(shared_engine(url))
    this = week_data.generate(tmp / "w46", jobs=200, seed=11)
    prev = week_data.generate(tmp / "w45", jobs=40, seed=12, week_start=PREV_WEEK)
    assert fill(url, this) == 200
    assert fill(url, prev) == 40
    return url, this, tmp


def test_parse_week():
    assert report.parse_week("2026-W46") == date(2026, 11, 9)
    assert report.parse_week("2026-11-12") == date(2026, 11, 9)
    assert report.iso_week(date(2026, 11, 9)) == "2026-W46"
    with pytest.raises(report.ReportError, match="ISO week"):
        report.parse_week("week 46")


def test_counts_and_gpu_hours(warehouse):
    url, jsonl, _ = warehouse
    rep = report.build_report(url, "2026-W46", week_data.CLUSTER)
    ctxs = [ExecutionContext.model_validate_json(line) for line in jsonl.open()]
    failed = [c for c in ctxs if c.failed]
    assert rep.this.jobs == 200 and rep.this.pending == 0
    assert rep.this.failed == len(failed)
    assert sum(rep.this.by_status.values()) == 200
    want = sum(len(c.nodes) * 8 * (c.end - c.start).total_seconds() / 3600 for c in failed)
    assert rep.this.gpu_hours_lost_total == pytest.approx(want, abs=1.0)
    assert rep.this.by_category.get("gpu.lost", 0) >= week_data.PLANTED_GPU[2]
    assert rep.previous.jobs == 40
    # the change against the previous week is in the summary
    jobs_row = report.summary_rows(rep)[0]
    assert jobs_row[1:] == ["200", "40", "+160 (+400%)"]
    # every unattributed job has a reason
    assert sum(rep.this.unattributed_why.values()) == rep.this.by_status.get("unattributed", 0)


def test_planted_repeat_offenders_are_found(warehouse):
    url, _, _ = warehouse
    rep = report.build_report(url, "2026-W46")  # the fleet scope
    found = {(o.kind, o.name): o for o in rep.offenders}
    at = f"{week_data.CLUSTER}/"  # across the fleet a suspect is named with its cluster
    node, pci, n = week_data.PLANTED_GPU
    gpu = found[("gpu", f"{at}{node}/{pci}")]
    assert len(gpu.jobs) == n and gpu.categories == {"gpu.lost": n}
    pnode, port, n_port = week_data.PLANTED_PORT
    assert len(found[("port", f"{at}{pnode}/{port}")].jobs) == n_port
    sw_nodes, sw_port, n_sw = week_data.PLANTED_SWITCH
    switch = found[("switch", f"{at}{sw_port} @ {','.join(sw_nodes)}")]
    assert len(switch.jobs) == n_sw and all(j.startswith("atlas/") for j in switch.jobs)
    assert all(len(o.jobs) >= 2 for o in rep.offenders)
    # the previous week's jobs do not leak into this week's offenders
    week_jobs = {f"atlas/{c.job_id}" for c in map(
        ExecutionContext.model_validate_json, warehouse[1].open())}
    assert all(set(o.jobs) <= week_jobs for o in rep.offenders)


def test_html_markdown_and_charts(warehouse, tmp_path):
    url, _, _ = warehouse
    rep = report.build_report(url, "2026-W46", week_data.CLUSTER)
    paths = report.write_report(rep, tmp_path / "out")
    page = paths["html"].read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert "http://" not in page and "https://" not in page  # self-contained
    assert "gpu-0666/0000:ab:00" in page and "Repeat offenders" in page
    for name in ("failed_by_category", "gpu_hours_lost", "jobs_per_day"):
        assert paths[name].read_bytes().startswith(b"\x89PNG")
        assert f"]({name}.png)" in paths["md"].read_text()


def test_report_cli(warehouse, tmp_path, capsys):
    from attribution_dagster.cli.app import main

    url, _, _ = warehouse
    out = tmp_path / "cli"
    assert main(["report", "--week", "2026-W46", "--db", url, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Weekly failure report: fleet, 2026-W46" in text and "gpu-0666" in text
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert main(["report", "--week", "week46", "--db", url]) == 2


def test_report_asset_and_schedule(warehouse, tmp_path, instance):
    """The weekly_report asset puts the charts in its metadata; the schedule asks Mondays."""
    from dagster import MultiPartitionKey, build_schedule_context, materialize

    from attribution_dagster.core.config import load_config
    from attribution_dagster.definitions import build_definitions, build_resources

    url, jsonl, _ = warehouse
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(
        f"clusters:\n  atlas:\n    scheduler: {{kind: static, path: {jsonl}}}\n"
        f"sink:\n  url: {url}\nfleet:\n  report_start: '2026-11-02'\n"
        f"  reports_dir: {tmp_path}/reports\n"
        "  report_base_url: https://reports.example.org/attribution/\n"
    )
    config = load_config(cfg)
    defs = build_definitions(config)
    from attribution_dagster.assets.reports import build_report_assets

    [report_asset] = build_report_assets(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = materialize(
            [report_asset],
            instance=instance,
            partition_key=MultiPartitionKey({"scope": "fleet", "week": "2026-11-09"}),
            resources=build_resources(config),
        )
    assert r.success
    [event] = r.get_asset_materialization_events()
    meta = event.materialization.metadata
    assert meta["report"].value.count("data:image/png;base64,") == 3
    assert meta["jobs"].value == 200
    assert sum(meta[f"{c} failures"].value for c in report.CLASSES) == meta["failed"].value
    assert 0 < meta["GPU-hours lost to the fleet"].value < meta["GPU-hours lost"].value
    assert "GPU-hours lost to the fleet (infrastructure)" in meta["report"].value
    assert Path(meta["html"].value).is_file()
    assert Path(meta["html"].value).parent == tmp_path / "reports" / "fleet" / "2026-W46"
    # the served HTML report: reports_dir's layout under the published base URL
    assert meta["report_url"].value == (
        "https://reports.example.org/attribution/fleet/2026-W46/report.html")
    # the week's figures are numbers (the plots tab draws them over weeks)
    t = report.build_report(url, "2026-W46").this
    for c in report.CLASSES:
        if c in t.gpu_hours_by_class and not t.gpu_hours_unknown_by_class.get(c):
            assert meta[f"GPU-hours lost: {c}"].value == pytest.approx(t.gpu_hours_by_class[c])
    assert isinstance(meta["GPU-hours lost: infrastructure"].value, float)
    assert meta["abstention rate"].value == pytest.approx(
        (t.by_status.get("ambiguous", 0) + t.by_status.get("unattributed", 0)) / t.failed,
        abs=1e-4)
    # the failed jobs and their verdicts, and the offenders with what to do, as tables
    jobs = meta["failed jobs and verdicts"].value
    assert [c.name for c in jobs.schema.columns] == report.FAILED_JOB_HEADER
    assert len(jobs.records) == min(t.failed, 100)
    assert {r.data["class"] for r in jobs.records[:5]} == {report.INFRA}  # worst first
    off = meta["repeat offenders (drain candidates)"].value
    gpu = next(r.data for r in off.records
               if r.data["suspect"] == f"{week_data.CLUSTER}/gpu-0666/0000:ab:00")
    assert gpu["jobs hurt"] == "5" and gpu["recommendation"].startswith("drain candidate")
    assert "never drains" in meta["recommendations"].value

    schedule = defs.resolve_schedule_def("weekly_report_schedule")
    assert schedule.cron_schedule == "0 6 * * 1"
    assert schedule.default_status.value == "RUNNING"
    when = datetime(2026, 11, 16, 6, 0, tzinfo=timezone.utc)
    with warnings.catch_warnings():
        # no run_request_for_partition, no dagster/partition/<dimension> tag keys
        warnings.simplefilter("error", DeprecationWarning)
        with build_schedule_context(instance=instance, scheduled_execution_time=when,
                                    repository_def=defs.get_repository_def()) as ctx:
            requests = schedule.evaluate_tick(ctx).run_requests
    keys = sorted(str(rq.partition_key) for rq in requests)
    assert keys == ["atlas|2026-11-09", "fleet|2026-11-09"]
    assert all(rq.tags["dagster/partition"] == str(rq.partition_key) for rq in requests)
    assert not [k for rq in requests for k in rq.tags if k.startswith("dagster/partition/")]
    before = datetime(2026, 11, 2, 6, 0, tzinfo=timezone.utc)  # report_start: no week yet
    with build_schedule_context(instance=instance, scheduled_execution_time=before) as ctx:
        data = schedule.evaluate_tick(ctx)
    assert not data.run_requests and "no complete week yet" in data.skip_message


def test_an_empty_week_still_renders(tmp_path, recwarn):
    """No jobs: zeros, three charts saying so, no warning from the plotting library."""
    rep = report.build_report(f"sqlite:///{tmp_path}/empty.db", "2026-W46")
    assert rep.this.jobs == 0 and rep.offenders == []
    paths = report.write_report(rep, tmp_path / "out")
    assert paths["html"].read_text().count('src="data:image/png;base64,') == 3
    assert "None this week." in paths["md"].read_text()
    assert not [w for w in recwarn if "legend" in str(w.message)]


def test_failure_class():
    assert report.failure_class("gpu.lost") == report.INFRA
    assert report.failure_class("storage") == report.INFRA
    assert report.failure_class("network.fabric", "TIMEOUT") == report.INFRA
    assert report.failure_class("app.oom") == report.APPLICATION
    assert report.failure_class("scheduler.time_limit") == report.SCHEDULER
    # not attributed, but the scheduler ended it by its policy
    for state in ("TIMEOUT", "PREEMPTED", "CANCELLED by 1000"):
        assert report.failure_class(None, state) == report.SCHEDULER
    assert report.failure_class(None, "FAILED") == report.UNEXPLAINED
    assert report.failure_class(None, None) == report.UNEXPLAINED


def test_split_accounting(warehouse):
    """Every failed job is in one class; only infrastructure hours are the fleet's loss."""
    url, jsonl, _ = warehouse
    rep = report.build_report(url, "2026-W46", week_data.CLUSTER)
    t = rep.this
    assert list(t.by_class) == list(report.CLASSES)
    assert sum(t.by_class.values()) == t.failed
    by_cat = t.by_category
    infra = sum(v for k, v in by_cat.items() if k.startswith(report.INFRA_PREFIXES))
    assert t.by_class[report.INFRA] == infra
    assert t.by_class[report.APPLICATION] == sum(
        v for k, v in by_cat.items() if k.startswith("app."))
    assert t.by_class[report.SCHEDULER] >= sum(
        v for k, v in by_cat.items() if k.startswith("scheduler."))
    assert t.by_class[report.SCHEDULER] > 0 and t.by_class[report.APPLICATION] > 0
    want = sum(v for k, v in t.gpu_hours_lost.items() if k.startswith(report.INFRA_PREFIXES))
    assert t.fleet_gpu_hours == pytest.approx(want, abs=0.5)
    assert t.fleet_gpu_hours < t.gpu_hours_lost_total  # a time limit is not the fleet's loss
    assert sum(t.gpu_hours_by_class.values()) == pytest.approx(t.gpu_hours_lost_total, abs=0.5)
    rows = {r[0]: r for r in report.summary_rows(rep)}
    fleet_row = rows["GPU-hours lost to the fleet (infrastructure)"]
    assert fleet_row[1] == f"{t.fleet_gpu_hours:,.0f}"
    assert "GPU-hours lost" not in rows  # no total that blames the fleet for everything
    md = report.render_markdown(rep, {})
    assert "scheduler policy failures" in md and "Only the infrastructure share" in md
    cats = {r[0]: r[1] for r in report.category_rows(rep)}
    assert cats.get("scheduler.time_limit", report.SCHEDULER) == report.SCHEDULER


def test_unknown_gpu_counts_are_words_not_zero(tmp_path):
    """Failed jobs without a GPU count: "unknown (N jobs without a GPU count)", never 0."""
    import json

    src = week_data.generate(tmp_path / "w", jobs=30, seed=5)
    out = tmp_path / "nogpu.jsonl"
    with src.open() as f, out.open("w") as g:
        for line in f:
            d = json.loads(line)
            d["gpus_per_node"] = None
            g.write(json.dumps(d) + "\n")
    url = f"sqlite:///{tmp_path}/r.db"
    fill(url, out)
    rep = report.build_report(url, "2026-W46")
    t = rep.this
    n_infra = t.by_class[report.INFRA]
    assert n_infra > 0 and t.gpu_hours_by_class == {}
    assert t.class_hours_text(report.INFRA) == f"unknown ({n_infra} jobs without a GPU count)"
    assert t.gpu_hours_text() == f"unknown ({t.failed} jobs without a GPU count)"
    rows = {r[0]: r for r in report.summary_rows(rep)}
    assert rows["GPU-hours lost to the fleet (infrastructure)"][1].startswith("unknown (")
    assert rows["GPU-hours lost to the fleet (infrastructure)"][3] == ""


def _two_weeks() -> report.WeeklyReport:
    monday = datetime(2026, 11, 9, tzinfo=timezone.utc)
    this = report.WeekStats(
        jobs=20, failed=9, by_status={"attributed": 7, "ambiguous": 2, "not_failed": 11},
        by_category={"gpu.lost": 4, "app.error": 2, "storage": 1},
        gpu_hours_lost={"gpu.lost": 96.0, "ambiguous": 10.0, "app.error": 4.5, "storage": 2.0},
        gpu_hours_lost_total=112.5,
        daily={"2026-11-09": {"attributed": 3, "not_failed": 1}, "2026-11-10": {"ambiguous": 2}},
    )
    previous = report.WeekStats(
        jobs=10, failed=5, by_status={"attributed": 4, "unattributed": 1},
        by_category={"gpu.lost": 1, "network.fabric": 3},  # network.fabric: last week only
    )
    return report.WeeklyReport(scope="atlas", week="2026-W46", start=monday,
                               end=monday + timedelta(days=7), this=this, previous=previous)


def test_charts_follow_the_table_and_keep_last_weeks_categories():
    rep = _two_weeks()
    rows = report.category_rows(rep)
    data = report.chart_data(rep)
    bars = data["failed_by_category"]
    assert bars["labels"] == [r[0] for r in rows]  # the table's order, top to bottom
    assert bars["labels"] == ["gpu.lost", "app.error", "storage", "ambiguous",
                              "network.fabric", "unattributed"]
    by = dict(zip(bars["labels"], zip(bars["this"], bars["previous"], strict=True), strict=True))
    assert by["network.fabric"] == (0, 3) and by["unattributed"] == (0, 1)
    change = {r[0]: r[-1] for r in rows}
    assert change["network.fabric"] == "-3 (-100%)" and change["unattributed"] == "-1 (-100%)"
    assert data["gpu_hours_lost"]["labels"] == ["gpu.lost", "app.error", "storage", "ambiguous"]


def test_chart_axes_legends_and_order():
    import matplotlib.pyplot as plt

    rep = _two_weeks()
    figs = report.chart_figures(rep)
    try:
        ax = figs["failed_by_category"].axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        ticks = list(ax.get_yticks())
        # first table row drawn on top: y axis inverted, first label at the smallest y
        assert ax.yaxis_inverted() and labels[ticks.index(min(ticks))] == "gpu.lost"
        assert [t.get_text() for t in ax.texts] == ["-100%", "-100%"]
        for name, axis in (("failed_by_category", "x"), ("jobs_per_day", "y")):
            a = figs[name].axes[0]
            lo, hi = a.get_xlim() if axis == "x" else a.get_ylim()
            vals = [v for v in (a.get_xticks() if axis == "x" else a.get_yticks())
                    if lo <= v <= hi]
            assert vals and all(float(v).is_integer() for v in vals), (name, vals)
            # the legend sits right of the plot, not over a bar
            fig = figs[name]
            fig.canvas.draw()
            box = a.get_legend().get_window_extent()
            assert box.x0 >= a.get_window_extent().x1, name
    finally:
        for f in figs.values():
            plt.close(f)


def test_report_base_url_is_a_web_url(tmp_path):
    """A host path is not a link a browser elsewhere can open: refused, with the reason."""
    from attribution_dagster.assets.report_metadata import report_url
    from attribution_dagster.core.config import ConfigError, load_config

    cfg = tmp_path / "attribution.yaml"
    cfg.write_text("clusters: {}\nfleet:\n  report_base_url: /srv/reports\n")
    with pytest.raises(ConfigError, match="http:// or https:// URL"):
        load_config(cfg)
    cfg.write_text("clusters: {}\nfleet:\n  report_base_url: http://h:8001/r/\n")
    base = load_config(cfg).fleet.report_base_url
    rep = _two_weeks()
    assert report_url(base, rep) == "http://h:8001/r/atlas/2026-W46/report.html"
    assert report_url(None, rep) is None
