"""Local-files connector and streaming scanner (connectors/files/case.py, reader.py;
core/formats/scan.py)."""

from __future__ import annotations

import gzip
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution_dagster.connectors.files.case import LocalFilesClient
from attribution_dagster.connectors.files.reader import match_nodes
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor
from attribution_dagster.core.formats import damage, scan
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec, build_matcher
from attribution_dagster.core.settings import Window

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
END = datetime(2026, 11, 2, 10, 45, tzinfo=UTC)
WINDOW = Window(start=START - timedelta(minutes=2), end=END + timedelta(minutes=1))
ANCHORS = [
    Anchor(literal="NVRM: Xid"),
    Anchor(literal="NCCL WARN"),
    Anchor(literal="Watchdog caught"),
    Anchor(literal="ChildFailedError", context_after=3),
    Anchor(literal="Error:"),
]
HS_MODES = [True, False] if scan.HAVE_HYPERSCAN else [False]


def ctx(nodes: list[str], tz: str = "UTC") -> ExecutionContext:
    return ExecutionContext(
        job_id="1",
        scheduler="slurm",
        state="FAILED",
        start=START,
        end=END,
        nodes=nodes,
        log_timezone=tz,
    )


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def spec(**kw: object) -> ScanSpec:
    base = dict(
        literals=tuple(a.literal for a in ANCHORS),
        context_after=tuple(a.context_after for a in ANCHORS),
        window_start=WINDOW.start,
        window_end=WINDOW.end,
        reference=START,
    )
    base.update(kw)
    return ScanSpec(**base)  # type: ignore[arg-type]


KERN = (
    b"Nov  2 10:03:10 node-a kernel: boring\n"
    b"Nov  2 10:03:11 node-a kernel: NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.\n"
    b"[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, raw dmesg stamp\n"
)
APP = (
    b"node-a:1:2 [3] NCCL WARN before any timestamp\n"
    b"2026-11-02 10:04:00,000 INFO step=1\n"
    b"node-a:1:2 [3] NCCL INFO chatter\n"
    b"[rank3]:[E1102 10:04:30.1 1 ProcessGroupNCCL.cpp:632] Watchdog caught collective timeout\n"
    b"torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    b"====\n"
    b"train.py FAILED\n"
    b"----\n"
    b"not in the context\n"
)


OTHER_KERN = KERN.replace(b"node-a", b"node-other")


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "context.json").write_text("{}")
    write(tmp_path / "logs/node-a/kern.log", KERN)
    write(tmp_path / "logs/node-a/sub/app.log", APP)
    # a node outside the job: read as a cluster-level source (spec section 1); its lines name
    # no job node, so they are context only
    write(tmp_path / "logs/node-other/kern.log", OTHER_KERN)
    return tmp_path


@pytest.mark.parametrize("use_hs", HS_MODES)
def test_records_locators_and_inheritance(case: Path, use_hs: bool) -> None:
    recs, cov = LocalFilesClient(use_hyperscan=use_hs).fetch_logs(
        case, ctx(["node-a", "node-b"]), ANCHORS, WINDOW
    ).pair()
    got = [(str(r.locator), r.time, r.time_quality, r.stream) for r in recs]
    t311 = datetime(2026, 11, 2, 10, 3, 11, tzinfo=UTC)
    t430 = datetime(2026, 11, 2, 10, 4, 30, 100000, tzinfo=UTC)  # the PyTorch glog prefix
    assert got == [
        ("logs/node-a/kern.log:2", t311, "exact", "kern.log"),
        ("logs/node-a/kern.log:3", t311, "inherited", "kern.log"),
        ("logs/node-a/sub/app.log:1", None, "unknown", "app.log"),
        ("logs/node-a/sub/app.log:4", t430, "exact", "app.log"),
        ("logs/node-a/sub/app.log:5", t430, "inherited", "app.log"),
    ]
    assert all(r.node == "node-a" and r.source == "files" for r in recs)
    assert recs[-1].text.splitlines() == [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "====",
        "train.py FAILED",
        "----",
    ]
    assert cov.nodes_read == ["node-a"] and cov.nodes_missing == ["node-b"]
    assert cov.status == "partial"
    # logs/node-other is read as a cluster-level source: its two hits name no job node
    assert cov.files == 3 and cov.records == 5 and cov.context_lines == 2
    assert cov.lines == 2 * KERN.count(b"\n") + APP.count(b"\n")
    assert cov.bytes == len(KERN) + len(OTHER_KERN) + len(APP)
    assert cov.errors == []


def test_other_nodes_lines_never_become_job_evidence(case: Path) -> None:
    recs, cov = LocalFilesClient().fetch_logs(case, ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert {r.node for r in recs} == {"node-a"}
    assert not any("node-other" in str(r.locator) for r in recs) and cov.context_lines == 2
    assert cov.status == "ok" and cov.errors == [] and cov.nodes_missing == []


def test_short_hostname_matches_fqdn_dir(tmp_path: Path) -> None:
    write(tmp_path / "logs/node-a.cluster.local/kern.log", KERN)
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert cov.nodes_read == ["node-a"] and len(recs) == 2
    assert match_nodes(["x.y", "node-a"], ["node-a", "x", "z"]) == {"node-a": "node-a", "x": "x.y"}


def test_no_logs_at_all_is_empty(tmp_path: Path) -> None:
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert recs == [] and cov.status == "empty" and cov.nodes_missing == ["node-a"]


def test_window_filtering_counts_out_of_window(tmp_path: Path) -> None:
    data = (
        b"Nov  2 09:00:00 node-a kernel: NVRM: Xid 1 before the window\n"
        b"untimed NCCL WARN inherits the early time\n"
        b"2026-11-02T09:58:30Z NVRM: Xid 2 inside the lead\n"
        b"2026-11-02T10:45:59+00:00 NVRM: Xid 3 inside the lag\n"
        b"2026-11-02T11:00:00Z NVRM: Xid 4 after the window\n"
    )
    write(tmp_path / "logs/node-a/syslog", data)
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a"]), ANCHORS, WINDOW).pair()
    # the untimed line was written between 09:00:00 and 09:58:30: an interval that reaches
    # into the window, so it is kept (issue 9: untimed lines are intervals)
    assert [str(r.locator).rsplit(":", 1)[1] for r in recs] == ["2", "3", "4"]
    assert recs[0].time_quality == "inherited" and recs[0].time_latest is not None
    assert cov.out_of_window == 2


def test_log_timezone_applies_to_offsetless_lines(tmp_path: Path) -> None:
    write(tmp_path / "logs/node-a/app.log", b"2026-11-02 11:03:00,000 ERROR Error: boom\n")
    recs, _ = LocalFilesClient().fetch_logs(
        tmp_path, ctx(["node-a"], tz="Europe/Berlin"), ANCHORS, WINDOW
    ).pair()
    assert recs[0].time == datetime(2026, 11, 2, 10, 3, tzinfo=UTC)


@pytest.mark.parametrize("use_hs", HS_MODES)
@pytest.mark.parametrize("block", [16, 37, 64, 1 << 20])
def test_inheritance_and_context_across_block_boundaries(use_hs: bool, block: int) -> None:
    lines = [b"2026-11-02T10:00:01Z first timed"]
    lines += [b"untimed filler %d" % i for i in range(30)]
    lines += [b"NCCL WARN far from its timestamp"]
    lines += [b"ChildFailedError:", b"c1", b"c2", b"c3", b"c4"]
    lines += [b"2026-11-02T10:00:05Z Error: timed hit"]
    lines += [b"x" * 50 for _ in range(3)] + [b"NCCL WARN late"]
    data = b"\n".join(lines) + b"\n"
    res = FileScanner(spec(block_size=block, use_hyperscan=use_hs)).scan_bytes(data)
    t1 = datetime(2026, 11, 2, 10, 0, 1, tzinfo=UTC)
    t5 = datetime(2026, 11, 2, 10, 0, 5, tzinfo=UTC)
    assert [(n, t, q) for n, t, q, _ in res.records] == [
        (32, t1, "inherited"),
        (33, t1, "inherited"),
        (38, t5, "exact"),
        (42, t5, "inherited"),
    ]
    assert res.records[1][3] == "ChildFailedError:\nc1\nc2\nc3"
    assert res.lines == len(lines) and res.bytes == len(data)


@pytest.mark.parametrize("block", [8, 64])
def test_context_after_runs_out_at_eof(block: int) -> None:
    res = FileScanner(spec(block_size=block)).scan_bytes(b"a\nChildFailedError: x\nonly one")
    assert res.records[0][3] == "ChildFailedError: x\nonly one"
    assert res.lines == 3


def test_gz_read_and_corrupt_gz_reported(tmp_path: Path) -> None:
    write(tmp_path / "logs/node-a/kern.log.gz", KERN)
    (tmp_path / "logs/node-b").mkdir(parents=True)
    (tmp_path / "logs/node-b/kern.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage-not-deflate")
    good = gzip.compress(APP)
    write(tmp_path / "logs/node-b/app.log.1.gz", b"")
    (tmp_path / "logs/node-b/app.log.1.gz").write_bytes(good[: len(good) // 2])  # truncated
    write(tmp_path / "logs/node-b/app.log", APP)
    batch = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a", "node-b"]), ANCHORS, WINDOW)
    recs, cov = batch.pair()
    assert {str(r.locator) for r in recs if r.node == "node-a"} == {
        "logs/node-a/kern.log.gz:2",
        "logs/node-a/kern.log.gz:3",
    }
    assert any(str(r.locator) == "logs/node-b/app.log:4" for r in recs)  # other files still read
    assert len(cov.errors) == 2
    assert any(e.startswith("logs/node-b/kern.log.gz: corrupt gzip") for e in cov.errors)
    assert any(e.startswith("logs/node-b/app.log.1.gz: corrupt gzip") for e in cov.errors)
    assert cov.status == "partial"


def test_bad_bytes_are_counted_not_fatal() -> None:
    data = (
        b"2026-11-02T10:00:00Z Error: caf\xe9 latin-1\n"
        b"2026-11-02T10:00:01Z Error: " + b"y" * 500 + b"\n"
        b"Error: \x00\x01\x02\x03 binary\n"
        b"\x01\x02\x03\x04\x05\x06\x07\x08Error:\x0e\x0f\n"
        b"2026-11-02T10:00:02Z Error: tab\tand \x1b[31mcolour\x1b[0m ok\n"
    )
    res = FileScanner(spec(max_line_bytes=256)).scan_bytes(data)
    texts = [r[3] for r in res.records]
    assert len(texts) == 3
    assert texts[0] == "2026-11-02T10:00:00Z Error: caf\ufffd latin-1"
    assert len(texts[1].encode()) == 256
    assert res.invalid_utf8_lines == 1 and res.overlong_lines == 1 and res.binary_lines == 2


def test_overlong_cut_inside_utf8_char_is_not_invalid() -> None:
    data = b"Error: " + "é".encode() * 200 + b"\n"
    res = FileScanner(spec(max_line_bytes=256)).scan_bytes(data)
    assert res.overlong_lines == 1 and res.invalid_utf8_lines == 0
    assert "\ufffd" not in res.records[0][3]


def test_crlf_lines_are_trimmed() -> None:
    res = FileScanner(spec()).scan_bytes(b"2026-11-02T10:00:00Z Error: x\r\n")
    assert res.records[0][3] == "2026-11-02T10:00:00Z Error: x"


def test_regex_fallback_when_hyperscan_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "HAVE_HYPERSCAN", False)
    assert isinstance(build_matcher([b"abc"]), scan.RegexMatcher)


def _noisy_file(seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    pieces = [
        b"NVRM: Xid",
        b"NCCL WARN",
        b"ChildFailedError",
        b"Error:",
        b"Watchdog caught",
        b"\xff",
    ]
    out = []
    for i in range(400):
        stamp = rng.choice(
            [b"", b"", b"Nov  2 10:%02d:00 h k: " % (i % 60), b"2026-11-02T10:00:%02dZ " % (i % 60)]
        )
        body = b" ".join(rng.choice(pieces + [b"w%d" % i] * 6) for _ in range(rng.randint(0, 5)))
        out.append(stamp + body)
    return b"\n".join(out)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block", [64, 1000, 1 << 20])
def test_hyperscan_and_regex_give_identical_records(seed: int, block: int) -> None:
    data = _noisy_file(seed)
    a = FileScanner(spec(block_size=block, use_hyperscan=scan.HAVE_HYPERSCAN)).scan_bytes(data)
    b = FileScanner(spec(block_size=block, use_hyperscan=False)).scan_bytes(data)
    c = FileScanner(spec(block_size=1 << 20, use_hyperscan=False)).scan_bytes(data)
    assert a.records == b.records == c.records
    assert len(a.records) > 50
    assert a.lines == b.lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=600)
    | st.lists(
        st.sampled_from(
            [
                b"NCCL WARN",
                b"Error:",
                b"\n",
                b"\x00",
                b"\xff\xfe",
                b"Nov  2 10:00:00 ",
                b"2026-11-02T10:00:00Z ",
                b"ChildFailedError",
                b"\r",
                b"abc",
            ]
        ),
        max_size=60,
    ).map(b"".join),
    block=st.sampled_from([8, 33, 4096]),
)
def test_scanner_never_raises_and_points_at_anchor_lines(data: bytes, block: int) -> None:
    for use_hs in HS_MODES:
        res = FileScanner(
            spec(block_size=block, use_hyperscan=use_hs, max_line_bytes=256)
        ).scan_bytes(data)
        file_lines = data.split(b"\n")
        assert res.lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        for lineno, _t, quality, _text in res.records:
            line = file_lines[lineno - 1]
            assert any(a.literal.encode() in line for a in ANCHORS)
            assert quality in ("exact", "inherited", "unknown")


def test_parallel_pool_matches_in_process(case: Path) -> None:
    c = ctx(["node-a", "node-other"])
    serial = LocalFilesClient(workers=1).fetch_logs(case, c, ANCHORS, WINDOW)
    parallel = LocalFilesClient(workers=2, parallel_min_bytes=0).fetch_logs(
        case, c, ANCHORS, WINDOW
    )
    assert serial.records == parallel.records and len(serial.records) == 7
    assert serial.tails == parallel.tails and serial.progress == parallel.progress
    assert serial.coverage == parallel.coverage


def test_parallel_pool_leaves_the_collector_as_it_found_it(case: Path) -> None:
    """The parent freezes its objects and holds cycle collection off while the pool runs
    (connectors/files/reader.py); afterwards both are as before, and a worker collects."""
    import gc

    from attribution_dagster.connectors.files import reader

    c = ctx(["node-a", "node-other"])
    assert gc.isenabled() and gc.get_freeze_count() == 0
    got = LocalFilesClient(workers=2, parallel_min_bytes=0).fetch_logs(case, c, ANCHORS, WINDOW)
    assert len(got.records) == 7
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:  # a worker is forked with the collector off: its initializer turns it back on
        reader._init_worker(reader.Reader()._spec(c, ANCHORS, WINDOW), None)
        assert gc.isenabled()
    finally:
        gc.enable()
        reader._worker = None


def test_small_case_is_fast(tmp_path: Path) -> None:
    for i in range(10):
        write(tmp_path / f"logs/node-{i}/kern.log", KERN * 200)
        write(tmp_path / f"logs/node-{i}/app.log", APP * 200)
    client = LocalFilesClient()
    c = ctx([f"node-{i}" for i in range(10)])
    client.fetch_logs(tmp_path, c, ANCHORS, WINDOW)  # warm imports and caches
    t0 = time.perf_counter()
    recs, cov = client.fetch_logs(tmp_path, c, ANCHORS, WINDOW).pair()
    elapsed = time.perf_counter() - t0
    # repeats of a line (same text but its timestamps) are one record with a count
    assert cov.files == 20 and sum(r.count for r in recs) == 10 * 200 * 5
    assert elapsed < 1.0  # ~40 ms measured on 2 shared cores; generous against noise


# -- metrics ---------------------------------------------------------------------------

PROM = (
    "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
    "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
    'DCGM_FI_DEV_XID_ERRORS{Hostname="node-a",gpu="3"} 79 1793613791000\n'
    'DCGM_FI_DEV_XID_ERRORS{Hostname="node-z",gpu="3"} 79 1793613791000\n'
    'node_infiniband_link_downed_total{instance="node-b:9100",device="mlx5_0",port="1"} 1 '
    "1793613792000\n"
    'DCGM_FI_DEV_GPU_TEMP{node="node-a",gpu="0"} 45\n'
    'DCGM_FI_DEV_GPU_TEMP{node="node-a",gpu="0"} 45 1000\n'
    "this is not a sample\n"
)


def test_metrics_parsed_filtered_and_reported(tmp_path: Path) -> None:
    write(tmp_path / "metrics/dcgm.prom", PROM.encode())
    write(tmp_path / "metrics/more.prom.gz", PROM.encode())
    write(tmp_path / "metrics/readme.txt", b"ignored")
    samples, cov = LocalFilesClient().fetch_metrics(
        tmp_path, ctx(["node-a", "node-b", "node-c"]), (), WINDOW
    )
    assert cov is not None
    got = [(s.node, s.name, s.value, str(s.locator)) for s in samples]
    assert got[:2] == [
        ("node-a", "DCGM_FI_DEV_XID_ERRORS", 79.0, "metrics/dcgm.prom:3"),
        ("node-b", "node_infiniband_link_downed_total", 1.0, "metrics/dcgm.prom:5"),
    ]
    assert len(samples) == 4
    assert samples[0].time == datetime(2026, 11, 2, 10, 3, 11, tzinfo=UTC)
    assert samples[0].labels == {"Hostname": "node-a", "gpu": "3"}
    assert cov.files == 2 and cov.samples == 10 and cov.records == 4
    assert cov.out_of_window == 2
    assert cov.nodes_read == ["node-a", "node-b"] and cov.nodes_missing == ["node-c"]
    assert any("1 malformed line(s)" in e and "line 8" in e for e in cov.errors)
    assert any("without a timestamp" in e for e in cov.errors)
    assert cov.status == "partial"


def test_metrics_node_is_the_first_label_naming_a_job_node(tmp_path: Path) -> None:
    """In Kubernetes dcgm-exporter's Hostname is the exporter pod and instance an IP: the
    `node` label names the node. An FQDN:port instance still matches the short node name."""
    write(
        tmp_path / "metrics/dcgm.prom",
        b'DCGM_FI_DEV_XID_ERRORS{Hostname="dcgm-exporter-b9152",instance="10.64.3.7:9400",'
        b'node="node-c",gpu="5"} 79 1793613791000\n'
        b'node_infiniband_state_id{instance="node-b.ib.cluster:9100",device="mlx5_2",port="1"}'
        b" 1 1793613792000\n",
    )
    samples, cov = LocalFilesClient().fetch_metrics(
        tmp_path, ctx(["node-a", "node-b", "node-c"]), (), WINDOW
    )
    assert [s.node for s in samples] == ["node-c", "node-b"]
    assert cov is not None and cov.nodes_missing == ["node-a"]


def test_no_metrics_dir_gives_none(tmp_path: Path) -> None:
    assert LocalFilesClient().fetch_metrics(tmp_path, ctx(["node-a"]), (), WINDOW) == ([], None)


def test_corrupt_metrics_gz_reported(tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/x.prom.gz").write_bytes(b"not gzip at all")
    samples, cov = LocalFilesClient().fetch_metrics(tmp_path, ctx(["node-a"]), (), WINDOW)
    assert samples == [] and cov is not None and cov.status == "failed"
    assert cov.errors[0].startswith("metrics/x.prom.gz: corrupt gzip")


def test_no_anchors_no_records(case: Path) -> None:
    recs, cov = LocalFilesClient().fetch_logs(case, ctx(["node-a"]), [], WINDOW).pair()
    # node-a's two files and the cluster-level logs/node-other/kern.log
    assert recs == [] and cov.files == 3
    assert cov.lines == 2 * KERN.count(b"\n") + APP.count(b"\n")


def test_special_characters_in_literals_are_literal() -> None:
    anchors = ("[Hardware Error]", "AER: Corr", "a.b*c")
    s = spec(literals=anchors, context_after=(0, 0, 0))
    data = b"x [Hardware Error] y\nHardware Error\nAER: Corrected\naXb*c\na.b*c\n"
    for use_hs in HS_MODES:
        res = FileScanner(ScanSpec(**{**s.__dict__, "use_hyperscan": use_hs})).scan_bytes(data)
        assert [r[0] for r in res.records] == [1, 3, 5]


@settings(max_examples=200, deadline=None)
@given(
    literals=st.lists(st.text("abcN \n.[", min_size=3, max_size=6), min_size=1, max_size=8),
    text=st.text("abcN .[\nx", max_size=300),
)
def test_matchers_find_exactly_the_lines_holding_a_literal(literals: list[str], text: str) -> None:
    lits = [lit.encode() for lit in literals if "\n" not in lit]
    data = bytearray(text.encode())
    lines = data.split(b"\n")
    expected, pos = [], 0
    for line in lines:
        if any(lit in line for lit in lits):
            expected.append((pos, pos + len(line)))
        pos += len(line) + 1
    for use_hs in HS_MODES:
        got = build_matcher(lits, use_hs).hit_lines(data, memoryview(data), len(data))
        assert got == expected


def test_dangling_link_and_fifo_are_reported(tmp_path: Path) -> None:
    import os

    write(tmp_path / "logs/node-a/kern.log", KERN)
    os.symlink(tmp_path / "nowhere", tmp_path / "logs/node-a/syslog")
    os.mkfifo(tmp_path / "logs/node-a/pipe")
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert len(recs) == 2 and cov.status == "partial"
    assert any(e.startswith("logs/node-a/syslog: unreadable") for e in cov.errors)
    assert "logs/node-a/pipe: not a regular file, skipped" in cov.errors


def test_damaged_lines_counted_even_without_anchor_hits() -> None:
    data = (
        b"2026-11-02T10:00:00Z plain caf\xe9\n"  # invalid UTF-8
        b"valid utf-8 \xc3\xa9\n"
        b"nul \x00\x00 run\n"
        + b"z" * 300
        + b"\n"  # overlong (> 256)
        + b"short\n"
        + b"Error: caf\xe9 and \x00 and long"
        + b"q" * 300
        + b"\n"  # all three, and a hit
    )
    for block in (16, 64, 1 << 20):
        res = FileScanner(spec(max_line_bytes=256, block_size=block)).scan_bytes(data)
        assert (res.invalid_utf8_lines, res.binary_lines, res.overlong_lines) == (2, 2, 2), block
        assert res.records == []  # the hit line held a NUL: skipped as binary


def test_damage_counting_is_capped_per_block() -> None:
    data = b"caf\xe9\n" * 5000
    res = FileScanner(spec(block_size=1 << 20)).scan_bytes(data)
    assert res.invalid_utf8_lines == damage.DAMAGE_CAP


def _reference_scan(data: bytes, s: ScanSpec) -> list[tuple[int, datetime | None, str]]:
    """Naive per-line reference: what the block scanner must reproduce."""
    from attribution_dagster.core.formats.timestamps import TimestampParser

    parser = TimestampParser(s.reference, s.log_timezone)
    lits = [lit.encode() for lit in s.literals]
    out, last = [], None
    for number, line in enumerate(data.split(b"\n"), 1):
        t = parser.parse_line(line)
        quality = "exact" if t is not None else ("inherited" if last is not None else "unknown")
        last = t if t is not None else last
        if not any(lit in line for lit in lits):
            continue
        t = t if t is not None else last
        if t is not None and not (s.window_start <= t <= s.window_end):
            continue
        raw = line.removesuffix(b"\r")[: s.max_line_bytes]
        control = len(raw.translate(None, damage.NOT_CONTROL))
        if b"\x00" in raw or (raw and control * 10 > len(raw) * 3):
            continue
        out.append((number, t, quality))
    return out


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            [
                b"NCCL WARN x",
                b"Error: y",
                b"\n",
                b"\n",
                b"\n",
                b"\x00",
                b"\xe9",
                b"plain words",
                b"Nov  2 10:00:0",
                b"Dec 31 23:59:59 ",
                b"2026-11-02T10:44:00Z ",
                b"1",
                b"5 ",
            ]
        ),
        max_size=80,
    ),
    block=st.sampled_from([8, 24, 100, 4096]),
)
def test_block_scanner_equals_naive_line_loop(parts: list[bytes], block: int) -> None:
    data = b"".join(parts)
    s = spec(block_size=block, context_after=(0,) * len(ANCHORS))
    for use_hs in HS_MODES:
        res = FileScanner(ScanSpec(**{**s.__dict__, "use_hyperscan": use_hs})).scan_bytes(data)
        assert [(n, t, q) for n, t, q, _ in res.records] == _reference_scan(data, s)


def test_memory_stays_bounded_by_the_block_not_the_file() -> None:
    import tracemalloc

    line = b"Nov  2 10:00:00 node-a kernel: chatter chatter chatter chatter chatter\n"
    data = line * 300_000 + b"Nov  2 10:00:01 node-a kernel: NVRM: Xid 79\n"  # ~21 MB
    scanner = FileScanner(spec(block_size=1 << 20))
    tracemalloc.start()
    res = scanner.scan_bytes(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(res.records) == 1 and res.lines == 300_001
    assert peak < 4 * (1 << 20)  # one reused 2-block buffer plus change, not 21 MB


def test_switch_side_lines_naming_no_job_node_are_kept_for_the_topology(tmp_path: Path) -> None:
    """Issue 23: a cluster-level line the parser catalog marks switch-side (OpenSM naming a
    switch port) is kept although it names no job node; the engine maps it through the
    topology. Other cluster-level lines naming no job node stay context only."""
    from attribution_dagster.pipeline import catalog

    anchors = catalog().anchors()
    assert any(a.switch_side and a.literal == "osm_pi_rcv_process: Switch" for a in anchors)
    write(tmp_path / "logs/node-a/kern.log", KERN)
    write(
        tmp_path / "logs/opensm/opensm.log",
        b"Nov  2 10:03:11 922890 [4E8006C0] 0x02 -> osm_pi_rcv_process: Switch 0x200000 "
        b"MF0;ib-leaf-07:MQM9700/U1 port 5 changed state from ACTIVE to DOWN\n"
        b"Nov  2 10:03:12 922990 [4E8006C0] 0x02 -> NVRM: Xid (PCI:0000:01:00): 79, elsewhere\n",
    )
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(["node-a"]), anchors, WINDOW).pair()
    kept = [r for r in recs if "opensm" in str(r.locator)]
    assert [str(r.locator) for r in kept] == ["logs/opensm/opensm.log:1"]
    assert kept[0].node == "*cluster*" and cov.context_lines == 1


def test_pool_tasks_pack_small_files_and_leave_big_ones_alone() -> None:
    """reader.chunks: every file in exactly one task, in the given order; a task holds at
    most CHUNK_BYTES (unless it is one big file) and CHUNK_FILES files."""
    from attribution_dagster.connectors.files import reader

    mb = 1024 * 1024
    sizes = [20 * mb, 9 * mb, 3 * mb, 3 * mb, 3 * mb] + [10_000] * 150 + [0, 0]
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    tasks = reader.chunks(order, sizes)
    assert [i for t in tasks for i in t] == order
    assert tasks[0] == [0] and tasks[1] == [1]  # big files: a task each
    assert tasks[2] == [2, 3]  # 6 MB; a third 3 MB file would pass 8 MB
    for t in tasks:
        assert len(t) <= reader.CHUNK_FILES
        assert len(t) == 1 or sum(sizes[i] for i in t) <= reader.CHUNK_BYTES
    # the last 3 MB file opens a task the small files fill: 153 files in 3 tasks of <= 64
    assert tasks[3][0] == 4 and len(tasks) == 6


def test_parallel_pool_with_many_small_files_matches_in_process(tmp_path: Path) -> None:
    """Many small files, several per pool task: the same records, in the same order."""
    for i in range(150):
        write(tmp_path / f"logs/node-{i % 30}/f{i}.log", (KERN + APP) * (1 + i % 3))
    c = ctx([f"node-{i}" for i in range(30)])
    serial = LocalFilesClient(workers=1).fetch_logs(tmp_path, c, ANCHORS, WINDOW)
    parallel = LocalFilesClient(workers=2, parallel_min_bytes=0).fetch_logs(
        tmp_path, c, ANCHORS, WINDOW
    )
    assert serial.records and serial.records == parallel.records
    assert serial.coverage == parallel.coverage and serial.tails == parallel.tails
