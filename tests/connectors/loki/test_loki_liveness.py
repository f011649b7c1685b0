"""Who fell first, from Loki: silence and training progress without pulling every line, and
the analysis line cap reaching configured sources.

Loki cannot run here. The fake (tests/fake_loki.py) serves real HTTP and evaluates what the
client sends: log queries as in tests/test_loki.py, and the connector's metric queries
`sum by (...) (count_over_time(<log query>[<range>]))` with `step`, answered in the `matrix`
shape of Loki's HTTP API reference (grafana.com/docs/loki/latest/reference/loki-http-api,
"Query logs within a range of time": `{"resultType": "matrix", "result": [{"metric":
{<labels>}, "values": [[<unix seconds>, "<count>"], ...]}]}`; a step without lines has no
point). A 500 body is Loki's plain-text error as the query frontend sends it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fake_loki import FakeLoki
from test_loki import serve_case

from attribution_dagster import pipeline
from attribution_dagster.connectors.clusters import EvidenceSources
from attribution_dagster.connectors.files.tree import FilesSource, FilesSourceConfig
from attribution_dagster.connectors.loki.client import LokiClient, LokiConfig
from attribution_dagster.connectors.loki.query import to_ns
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.settings import AnalysisSettings, Window
from attribution_dagster.pipeline import catalog

pytestmark = pytest.mark.loki

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
S = 1_000_000_000
NODES = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]


def client(url: str, **kw: object) -> LokiClient:
    cfg = LokiConfig.model_validate({"kind": "loki", "url": url, **kw})
    return LokiClient(cfg, sleep=lambda s: None, environ={})


def megatron(t: datetime, it: int) -> str:
    return (
        f" [{t:%Y-%m-%d %H:%M:%S}] iteration {it:>8}/  500000 | consumed samples: {it * 1024:>12} "
        "| elapsed time per iteration (ms): 1843.2 | learning rate: 2.999E-04 | global batch "
        "size:  1024 | lm loss: 2.894400E+00 |"
    )


def write_silent_case(root: Path) -> Path:
    """4 nodes training (a Megatron iteration line every 30 s, a kernel line a minute);
    gpu-c goes silent at 10:10 (every log of it stops: the node died). The others stall in
    the collective, and their NCCL watchdogs fire ten minutes later, at 10:20; Slurm ends the
    job NODE_FAIL at 10:21. Nothing but the silence names gpu-c."""
    case = root / "silent-gpu-c"
    died = START + timedelta(minutes=10)
    timeout = START + timedelta(minutes=20)
    end = START + timedelta(minutes=21)
    for k, node in enumerate(NODES):
        logs = case / "logs" / node
        logs.mkdir(parents=True)
        stop = died if node == "gpu-c" else end
        app, kern = [], []
        t, it = START, 0
        while t < min(stop, died):  # training stalls for everyone when gpu-c dies
            app.append(megatron(t, it))
            t += timedelta(seconds=30)
            it += 10
        if node != "gpu-c":
            app.append(
                f"[rank{8 * k}]:[E1102 {timeout:%H:%M:%S}.000000000 ProcessGroupNCCL.cpp:616] "
                f"[Rank {8 * k}] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=4123, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                "Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
            )
        t = START
        while t < stop:
            kern.append(
                f"{t:%b %e %H:%M:%S} {node} kernel: [ {int((t - START).total_seconds()) + 1000}"
                ".000000] systemd-journald[412]: Data hash table of /run/log/journal has a fill "
                "level at 75.0"
            )
            t += timedelta(minutes=1)
        (logs / "app.log").write_text("\n".join(app) + "\n")
        (logs / "kern.log").write_text("\n".join(kern) + "\n")
    ctx = {
        "job_id": "9101",
        "scheduler": "slurm",
        "cluster": "test",
        "state": "NODE_FAIL",
        "start": START.isoformat(),
        "end": end.isoformat(),
        "nodes": NODES,
        "gpu_model": "H100",
    }
    (case / "context.json").write_text(json.dumps(ctx))
    return case


def verdict(r):  # type: ignore[no-untyped-def]
    return (r.status, r.category, r.suspect_nodes)


def test_silent_node_from_loki_equals_files(fake_http, tmp_path):
    """gpu-c stops ten minutes before the others' NCCL timeouts. Read from files and served
    from the fake Loki, the verdict is the same: node.down on gpu-c, from its silence; Loki
    learns where each stream stops from one count_over_time query, not from every line."""
    case = write_silent_case(tmp_path)
    want = pipeline.analyze_case(case)
    assert verdict(want) == ("attributed", "node.down", ["gpu-c"])
    loki = FakeLoki()
    c = serve_case(case, loki)
    loki.install(fake_http)
    src = client(fake_http.url)
    got = pipeline.analyze_context(c, sources=EvidenceSources(logs=(src,)))
    assert verdict(got) == verdict(want)
    root = [lk for lk in got.symptom_chain if lk.role == "root_cause"]
    assert root and root[0].kind == "node_silent" and root[0].node == "gpu-c"
    # gpu-c stopped two buckets before the others: its last line was read exactly (one
    # backward read of its last bucket), and the evidence is that line
    last_line = START + timedelta(minutes=9, seconds=30)  # gpu-c's last iteration line
    assert root[0].time == last_line and root[0].time_latest is None
    assert root[0].evidence.locator == (
        f'{{filename="/var/log/app.log", host="gpu-c", job="varlogs"}} @ns:{to_ns(last_line)}'
    )
    assert "iteration" in root[0].evidence.excerpt
    # without the liveness queries Loki only sees anchor lines: gpu-c is not found
    blind = client(fake_http.url, liveness=False)
    before = pipeline.analyze_context(c, sources=EvidenceSources(logs=(blind,)))
    assert verdict(before) != verdict(want)
    # what it cost: one candidate query, two count_over_time queries (all lines by stream;
    # progress lines by node), one backward read of gpu-c's last line and one of the last
    # progress lines (training stalled everywhere at 10:09:30: one bucket for all nodes)
    metric = [q for q in loki.queries if q["query"].startswith("sum by")]
    assert len(metric) == 2 and all(q["step"] == "15s" for q in metric)  # 23-min window
    backward = [q for q in loki.queries if q.get("direction") == "backward"]
    assert [q["limit"] for q in backward] == ["1", "4"]


def test_tail_and_progress_records_have_the_files_shape(fake_http, tmp_path):
    """The records land where the files connector puts its own (LogBatch tails /
    progress), so the engine needs no Loki-specific code; the last progress line of the
    node that stopped early is found although the others logged progress after it."""
    case = write_silent_case(tmp_path)
    loki = FakeLoki()
    c = serve_case(case, loki)
    loki.install(fake_http)
    batch = client(fake_http.url).fetch_logs(
        c, catalog().anchors(last_only=True), Window(start=c.start, end=c.end)
    )
    recs, cov = batch.pair()
    tails = {(t.node, t.stream): t for t in batch.tails}
    assert set(tails) == {(n, f) for n in NODES for f in ("app.log", "kern.log")}
    assert all(t.last_of_file for t in tails.values())
    # the others: intervals, the 15 s bucket of their last lines, reopenable as a query
    a_app = tails[("gpu-a", "app.log")]
    assert a_app.time_quality == "inherited" and a_app.time_latest - a_app.time == timedelta(
        seconds=15
    )
    assert a_app.time <= START + timedelta(minutes=20) <= a_app.time_latest  # the timeout
    assert str(a_app.locator) == (
        'count_over_time({filename="/var/log/app.log", host="gpu-a", job="varlogs"} [15s]) '
        f"@ns:{to_ns(a_app.time_latest)}"
    )
    # gpu-c stopped early: its latest stream's last line read exactly; its kern.log stays
    c_app, c_kern = tails[("gpu-c", "app.log")], tails[("gpu-c", "kern.log")]
    assert c_app.time_quality == "exact" and c_app.time == START + timedelta(minutes=9, seconds=30)
    assert c_kern.time_quality == "inherited"
    progress = {r.node: r for r in batch.progress}
    assert set(progress) == set(NODES)
    assert progress["gpu-c"].time == START + timedelta(minutes=9, seconds=30)
    assert "iteration" in progress["gpu-c"].text and progress["gpu-c"].time_quality == "exact"
    # normalized like the files path: log_last_line + progress observations
    raw = pipeline.RawEvidence(
        job_id="9101", records=recs, tails=batch.tails, progress=batch.progress, coverage=[cov]
    )
    obs = pipeline.normalize(raw, c)
    kinds = {o.kind for o in obs}
    assert {"log_last_line", "progress"} <= kinds
    # bounded: no progress line is pulled except the last bucket's
    assert len(batch.progress) == len(NODES)


def test_metric_query_500_makes_coverage_partial_and_analysis_goes_on(fake_http, tmp_path):
    """Loki answers 500 to the metric queries (a query frontend that cannot run them): the
    candidate lines still come, the coverage is partial and says why, the result is made."""
    case = write_silent_case(tmp_path)
    loki = FakeLoki()
    c = serve_case(case, loki)

    def handler(req):  # type: ignore[no-untyped-def]
        if req.arg("query", "").startswith("sum by"):
            return 500, "rpc error: code = Internal desc = failed to execute query", {}
        return loki.query_range(req)

    fake_http.route("GET", "/loki/api/v1/query_range", handler)
    fake_http.route("GET", "/loki/api/v1/series", loki.series)
    src = client(fake_http.url, retries=1)
    raw = pipeline.collect_evidence(None, c, sources=EvidenceSources(logs=(src,)))
    cov = raw.coverage[0]
    assert cov.status == "partial" and cov.retryable
    assert any(e.startswith("tails query (liveness): loki at") and "500" in e for e in cov.errors)
    assert raw.records and not raw.tails and not raw.progress
    result = pipeline.analyze_context(c, sources=EvidenceSources(logs=(src,)))
    assert result.status in ("attributed", "unattributed", "ambiguous")
    assert result.coverage[0].status == "partial"


def test_step_is_window_over_250_at_least_15_s():
    c = client("http://loki:3100")
    assert c._step_ns(3600 * S) == 15 * S
    assert c._step_ns(24 * 3600 * S) == 346 * S  # 86400 / 250 = 345.6, whole seconds up
    assert client("http://loki:3100", liveness_step_seconds=60)._step_ns(3600 * S) == 60 * S


def test_series_limit_splits_the_metric_query(fake_http):
    """Loki's max_query_series refuses a metric query with too many output series: the nodes
    are split and every node's tail still comes back."""
    loki = FakeLoki(max_series=3)
    for i, n in enumerate(NODES):
        loki.add({"host": n, "filename": "/var/log/app.log"}, to_ns(START) + (i + 1) * 60 * S, "x")
    loki.install(fake_http)
    ctx = ExecutionContext(
        job_id="1", scheduler="slurm", state="FAILED", start=START,
        end=START + timedelta(minutes=10), nodes=NODES,
    )  # fmt: skip
    batch = client(fake_http.url, check_series=False).fetch_logs(
        ctx, [], Window(start=ctx.start, end=ctx.end)
    )
    cov = batch.coverage
    assert sorted(t.node for t in batch.tails) == NODES
    tails = sorted(batch.tails, key=lambda t: t.node)
    assert [(t.time_latest or t.time) - START for t in tails] == [
        timedelta(minutes=m) for m in (1, 2, 3, 4)
    ]
    # gpu-a and gpu-b stopped two buckets or more before the others' median: read exactly
    assert [t.time_quality for t in tails] == ["exact", "exact", "inherited", "inherited"]
    assert not cov.errors


def test_progress_reads_split_when_a_bucket_holds_more_than_a_page(fake_http):
    """Nodes whose last progress share a bucket are read together unless their lines there
    exceed `max_entries_per_query`: then in groups that fit, each node's last line found."""
    loki = FakeLoki()
    for i, n in enumerate(NODES):
        for k in range(3):  # 3 progress lines per node in the last bucket
            t = START + timedelta(minutes=5, seconds=k)
            loki.add({"host": n, "job": "app"}, to_ns(t) + i, megatron(t, 100 + k))
    loki.install(fake_http)
    ctx = ExecutionContext(
        job_id="1", scheduler="slurm", state="FAILED", start=START,
        end=START + timedelta(minutes=10), nodes=NODES,
    )  # fmt: skip
    batch = client(fake_http.url, max_entries_per_query=6).fetch_logs(
        ctx, catalog().anchors(last_only=True), Window(start=ctx.start, end=ctx.end)
    )
    backward = [q for q in loki.queries if q.get("direction") == "backward"]
    assert len(backward) == 2 and all(int(q["limit"]) <= 6 for q in backward)
    last = {}
    for r in batch.progress:
        if r.node not in last or r.time > last[r.node].time:
            last[r.node] = r
    assert sorted(last) == NODES
    assert all("iteration      102/" in r.text for r in last.values())


# -- the analysis line cap reaches configured sources --------------------------------------------
def _giant_line_loki(fake_http) -> tuple[ExecutionContext, LokiClient]:  # type: ignore[no-untyped-def]
    loki = FakeLoki()
    line = "NVRM: Xid (PCI:0000:91:00): 79, pid=1, GPU has fallen off the bus. " + "x" * 200_000
    loki.add({"host": "gpu-a", "filename": "/var/log/kern.log"}, to_ns(START) + 60 * S, line)
    loki.install(fake_http)
    ctx = ExecutionContext(
        job_id="1", scheduler="slurm", state="FAILED", start=START,
        end=START + timedelta(minutes=10), nodes=["gpu-a"],
    )  # fmt: skip
    return ctx, client(fake_http.url)


def test_giant_loki_line_is_cut_to_the_analysis_setting(fake_http):
    """A 200 KB line from Loki (its own cap 65536) is cut to the analysis max_line_bytes
    (4096): the smaller cap wins, and coverage counts the cut line."""
    ctx, src = _giant_line_loki(fake_http)
    settings = AnalysisSettings(max_line_bytes=4096)
    raw = pipeline.collect_evidence(None, ctx, settings, sources=EvidenceSources(logs=(src,)))
    (rec,) = raw.records
    assert len(rec.text.encode()) == 4096 and rec.text.startswith("NVRM: Xid")
    assert raw.coverage[0].overlong_lines == 1
    assert src.config.max_line_bytes == 65536  # the configured client itself is untouched


def test_source_cap_below_the_analysis_setting_still_applies(fake_http):
    ctx, _ = _giant_line_loki(fake_http)
    src = client(fake_http.url, max_line_bytes=1024)
    raw = pipeline.collect_evidence(None, ctx, sources=EvidenceSources(logs=(src,)))
    assert len(raw.records[0].text.encode()) == 1024 and raw.coverage[0].overlong_lines == 1


def test_a_source_ignoring_the_cap_has_its_records_cut_by_the_pipeline():
    class Plain:
        name = "plain"

        def fetch_logs(self, ctx, anchors, window, limits=None):  # type: ignore[no-untyped-def]
            from attribution_dagster.core.evidence import LogBatch, SourceCoverage

            rec = RawRecord(
                source="plain", node="gpu-a", locator="x:1", time=START,
                text="NCCL WARN " + "é" * 5000 + "\nsecond line",
            )  # fmt: skip
            return LogBatch(records=[rec], coverage=SourceCoverage(source="plain"))

    ctx = ExecutionContext(
        job_id="1", scheduler="slurm", state="FAILED", start=START,
        end=START + timedelta(minutes=10), nodes=["gpu-a"],
    )  # fmt: skip
    raw = pipeline.collect_evidence(
        None, ctx, AnalysisSettings(max_line_bytes=300), sources=EvidenceSources(logs=(Plain(),))
    )
    first, second = raw.records[0].text.split("\n")
    assert len(first.encode()) <= 300 and second == "second line"
    assert raw.coverage[0].overlong_lines == 1


def test_files_source_takes_the_smaller_cap(tmp_path):
    src = FilesSource(FilesSourceConfig(kind="files", root=str(tmp_path), paths=["{node}/x"]))
    assert src.with_max_line_bytes(1 << 20) is src
    low = src.with_max_line_bytes(512)
    assert low.max_line_bytes == 512 and src.max_line_bytes == 65536


# -- the engine's silence test over interval tails ------------------------------------------------
def _tail(node: str, lo: datetime, hi: datetime | None, stream: str = "app.log"):  # type: ignore[no-untyped-def]
    from attribution_dagster.core.observation import Observation

    return Observation(
        kind="log_last_line", node=node, time=lo,
        time_quality="inherited" if hi else "exact", time_latest=hi,
        excerpt="x", source="loki", locator=f"count_over_time({{host={node!r}}} [15s]) @ns:1",
        parser="file_tail", attrs={"stream": stream},
    )  # fmt: skip


def test_silence_over_intervals_needs_the_latest_possible_time():
    """A tail known only to a 15 s bucket is silent only if even its bucket END is
    `silence_seconds` before the others' bucket STARTS; the stream key is the stream name
    (the locator is a query), so like is compared with like across nodes."""
    from attribution_dagster.rules.engine.liveness import last_seen, silent

    t = START + timedelta(minutes=20)
    end = START + timedelta(minutes=30)
    others = [_tail(n, t, t + timedelta(seconds=15)) for n in ("gpu-a", "gpu-b", "gpu-d")]
    gone = t - timedelta(minutes=3)
    clear = _tail("gpu-c", gone, gone + timedelta(seconds=15))
    seen = last_seen([*others, clear], NODES)
    assert set(seen["gpu-c"]) == {"app.log"}  # keyed by stream, not by the query text
    assert silent("gpu-c", seen, end, 120) is clear
    # its earliest time is 130 s before the others, its latest only 115 s: not provable
    close = _tail("gpu-c", t - timedelta(seconds=130), t - timedelta(seconds=115))
    assert silent("gpu-c", last_seen([*others, close], NODES), end, 120) is None
    # an exact tail at the same earliest time would be silent
    exact = _tail("gpu-c", t - timedelta(seconds=130), None)
    assert silent("gpu-c", last_seen([*others, exact], NODES), end, 120) is exact


def test_a_log_quiet_on_every_node_neither_proves_nor_disproves_silence():
    """kern.log said its last word at the job's start on every node: it must not hide that
    gpu-c's training log stopped ten minutes early; a kern.log that goes on after the others
    stopped does show gpu-c alive."""
    from attribution_dagster.rules.engine.liveness import last_seen, silent

    t = START + timedelta(minutes=20)
    end = START + timedelta(minutes=30)
    quiet = START + timedelta(seconds=5)
    others = [_tail(n, t, None) for n in ("gpu-a", "gpu-b", "gpu-d")]
    others += [_tail(n, quiet, None, "kern.log") for n in ("gpu-a", "gpu-b", "gpu-d")]
    app = _tail("gpu-c", t - timedelta(minutes=10), None)
    seen = last_seen([*others, app, _tail("gpu-c", quiet, None, "kern.log")], NODES)
    assert silent("gpu-c", seen, end, 120) is app
    alive = _tail("gpu-c", t - timedelta(minutes=9), None, "kern.log")
    assert silent("gpu-c", last_seen([*others, app, alive], NODES), end, 120) is None
    # and nobody is silent when every log stopped together
    assert silent("gpu-a", seen, end, 120) is None
