"""`attribution export` reproduces the evidence (issue 15 item 5): every kept line at its
original file and line number, the output lists exactly what was written, and analysing
the export gives the same result as the original analysis, on every sample."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from attribution_dagster.cli.app import main
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample, RawEvidence, RawRecord, SourceCoverage
from attribution_dagster.core.formats.flight_recorder import read_dump
from attribution_dagster.core.locators import FileLine, KubeObject, Locator, Note, QueryAt
from attribution_dagster.reports.export import (
    DAMAGE_NOTE,
    NOT_REPRODUCED,
    TIME_LINE_TEXT,
    file_line,
    write_case,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CASES = sorted(p.parent.name for p in SAMPLES.glob("*/context.json"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """attribution.yaml: cluster `lab`, the static scheduler over samples/."""
    d = tmp_path_factory.mktemp("lab")
    cfg = d / "attribution.yaml"
    cfg.write_text(f"clusters:\n  lab:\n    scheduler: {{kind: static, path: {SAMPLES}}}\n")
    return cfg


def read_lines(path: Path) -> list[str]:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return data.decode("utf-8", "surrogateescape").split("\n")[:-1]


def comparable(result: dict) -> dict:
    """The result without its analysis time, the coverage counts of lines read and not
    kept, and the note counting damaged lines (export.NOT_REPRODUCED, DAMAGE_NOTE)."""
    r = dict(result)
    r.pop("analyzed_at")
    r["coverage"] = [{k: v for k, v in c.items() if k not in NOT_REPRODUCED}
                     for c in r["coverage"]]
    r["notes"] = [n for n in r["notes"] if not DAMAGE_NOTE.match(n)]
    # a file locator names its case directory: the export is another directory
    for ev in [link["evidence"] for link in r["symptom_chain"]] + r["evidence"]:
        if ev.get("ref") and ev["ref"].get("type") == "file":
            ev["ref"] = {**ev["ref"], "root": None}
    return r


def locators(result: dict) -> list[Locator]:
    refs = [link["evidence"]["ref"] for link in result["symptom_chain"]]
    refs += [e["ref"] for e in result["evidence"]]
    return [TypeAdapter(Locator).validate_python(r) for r in refs if r is not None]


@pytest.mark.parametrize("case", CASES)
def test_export_then_analyze_gives_the_same_result(case, lab, tmp_path, capsys):
    job = json.loads((SAMPLES / case / "context.json").read_text())["job_id"]
    assert main(["--config", str(lab), "analyze", f"lab/{job}", "--json"]) == 0
    original = json.loads(capsys.readouterr().out)
    out = tmp_path / "exported"
    assert main(["--config", str(lab), "export", f"lab/{job}", str(out)]) == 0
    printed = capsys.readouterr().out
    assert main(["analyze", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)

    assert comparable(again) == comparable(original)
    assert locators(again) == locators(original)  # logs/node-b/kern.log:32 stays :32

    # every line written (logs and metrics) is the original line at the same number, an
    # empty line, or a line holding the time of a line not kept
    kept = 0
    for f in out.rglob("*"):
        if not f.is_file() or f.name == "context.json":
            continue
        rel = f.relative_to(out)
        if rel.parts[0] == "dumps":
            # a flight-recorder dump is written back as a pickle of plain dicts: what it holds
            # (read with the restricted reader) is what the original holds, not its bytes
            assert read_dump(f, rel.as_posix()) == read_dump(SAMPLES / case / rel, rel.as_posix())
            continue
        source = read_lines(SAMPLES / case / rel)
        for n, text in enumerate(read_lines(f), 1):
            if text and not text.endswith(TIME_LINE_TEXT):
                assert text == source[n - 1], f"{rel}:{n}"
                kept += 1
    assert kept > 0
    # each chain locator opens the same text in the export as in the sample
    for loc in locators(original):
        where = file_line(loc)
        if where is not None:
            path, n = where
            assert read_lines(out / path)[n - 1] == read_lines(SAMPLES / case / path)[n - 1]

    # the output lists exactly the files written, with their sizes and line counts
    listed = {}
    for line in printed.splitlines()[1:]:
        m = re.match(r"  (\S+?)(?:: (.*))?$", line)
        assert m, line
        listed[m.group(1)] = m.group(2) or ""
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert set(listed) == on_disk
    for rel, what in listed.items():
        if rel == "context.json":
            continue
        if rel.startswith("dumps/"):
            m = re.fullmatch(r"flight-recorder dump, (\d+) entries kept, ([\d,]+) bytes", what)
            assert m, what
            assert len(read_dump(out / rel, rel).entries) == int(m.group(1))
            assert (out / rel).stat().st_size == int(m.group(2).replace(",", ""))
            continue
        m = re.search(r"lines 1-(\d+), ([\d,]+) bytes", what)
        assert m, what
        assert len(read_lines(out / rel)) == int(m.group(1))
        assert (out / rel).stat().st_size == int(m.group(2).replace(",", ""))
        written = read_lines(out / rel)
        n_kept = int(re.match(r"(\d+) (?:lines?|samples?) kept", what).group(1))
        n_time = sum(t.endswith(TIME_LINE_TEXT) for t in written)
        assert n_kept == sum(1 for t in written if t and not t.endswith(TIME_LINE_TEXT))
        assert (f"{n_time} time line" in what) == (n_time > 0)
        empty = re.search(r"(\d+) empty", what)
        assert (int(empty.group(1)) if empty else 0) == sum(1 for t in written if not t)
    total = int(re.search(r"(\d+) log lines kept", printed.splitlines()[0]).group(1))
    assert total == sum(
        int(re.match(r"(\d+) lines? kept", w).group(1)) for r, w in listed.items()
        if r.startswith("logs/") and re.match(r"\d+ lines? kept", w))


def test_the_gzip_sample_exports_gzip_under_the_same_names(lab, tmp_path, capsys):
    job = json.loads((SAMPLES / "gzip-logs" / "context.json").read_text())["job_id"]
    out = tmp_path / "gz"
    assert main(["--config", str(lab), "export", f"lab/{job}", str(out)]) == 0
    names = sorted(str(p.relative_to(out)) for p in (out / "logs").rglob("*") if p.is_file())
    assert names and all(n.endswith(".gz") for n in names)
    assert set(names) <= {str(p.relative_to(SAMPLES / "gzip-logs"))
                          for p in (SAMPLES / "gzip-logs" / "logs").rglob("*.gz")}
    for n in names:
        gzip.decompress((out / n).read_bytes())  # real gzip
    assert " gzip" in capsys.readouterr().out


CTX = ExecutionContext(
    job_id="7", scheduler="slurm", cluster="c", state="FAILED", exit_code=1,
    start=datetime(2026, 11, 2, 10, tzinfo=timezone.utc),
    end=datetime(2026, 11, 2, 11, tzinfo=timezone.utc), nodes=["node-a"],
)
T = datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc)


def at(path: str, line: int) -> FileLine:
    return FileLine(root="case", path=path, line=line)


def rec(locator: Locator, text: str, **kw) -> RawRecord:
    return RawRecord(source=kw.pop("source", "files"), node="node-a", locator=locator,
                     time=kw.pop("time", T), text=text, **kw)


@pytest.mark.parametrize("name", ["kern.log", "kern.log.gz"])
def test_a_line_far_down_a_file_keeps_its_number_at_one_byte_per_omitted_line(tmp_path, name):
    line = 1_000_000
    text = "2026-11-02T10:30:00Z node-a kernel: NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen"
    raw = RawEvidence(job_id="7", records=[rec(at(f"logs/node-a/{name}", line), text)])
    summary = write_case(tmp_path / "case", CTX, raw)
    f = tmp_path / "case" / "logs" / "node-a" / name
    lines = read_lines(f)
    assert len(lines) == line and lines[line - 1] == text and not any(lines[: line - 1])
    [written] = summary.files
    assert (written.kept, written.empty, written.last_line) == (1, line - 1, line)
    assert written.bytes == f.stat().st_size
    if name.endswith(".gz"):
        assert f.stat().st_size < 10_000  # the empty lines compress to almost nothing
    else:
        assert f.stat().st_size == line - 1 + len(text) + 1


def test_untimed_lines_keep_their_interval_through_time_lines(tmp_path):
    """An untimed kept line whose earlier and later timed lines were not kept: the export
    writes their times in the free lines around it, not the text of other lines."""
    t0, t1 = T, T + timedelta(seconds=40)
    raw = RawEvidence(job_id="7", records=[
        rec(at("logs/node-a/app.log", 3), "2026-11-02T10:29:00Z step 1"),
        rec(at("logs/node-a/app.log", 10), "RuntimeError: CUDA error: an illegal memory access",
            time=t0, time_quality="inherited", time_latest=t1),
        rec(at("logs/node-a/app.log", 11), "Traceback (most recent call last):", time=t0,
            time_quality="inherited", time_latest=t1),
    ])
    write_case(tmp_path / "case", CTX, raw)
    lines = read_lines(tmp_path / "case" / "logs" / "node-a" / "app.log")
    assert lines[2] == "2026-11-02T10:29:00Z step 1"
    assert lines[8] == f"2026-11-02T10:30:00+00:00 {TIME_LINE_TEXT}"  # line 9
    assert lines[9].startswith("RuntimeError") and lines[10].startswith("Traceback")
    assert lines[11] == f"2026-11-02T10:30:40+00:00 {TIME_LINE_TEXT}"  # line 12
    assert len(lines) == 12


def test_backend_lines_and_queried_samples_are_written_in_order(tmp_path):
    """Loki lines have no file line: one after the other, their time as a prefix; samples
    of a .prom file go to their line, Prometheus answers to metrics/exported.prom."""
    loki = rec(QueryAt(language="logql", query='{host="node-a"}', at_ns=1793615400000000000),
               "Xid 79 on the bus",
               source="loki", stream="kern")
    raw = RawEvidence(job_id="7", records=[loki], samples=[
        MetricSample(source="files", node="node-a", locator=at("metrics/dcgm.prom", 4), time=T,
                     name="DCGM_FI_DEV_XID_ERRORS", labels={"Hostname": "node-a"}, value=79.0),
        MetricSample(source="prometheus", node="node-a",
                     locator=QueryAt(language="promql", query='up{instance="node-a"}',
                                     at_ns=1793615400000000000), time=T,
                     name="up", labels={"instance": "node-a"}, value=1234567.25),
    ], coverage=[SourceCoverage(source="loki")])
    summary = write_case(tmp_path / "case", CTX, raw)
    case = tmp_path / "case"
    assert read_lines(case / "logs" / "node-a" / "kern.log") == [
        "2026-11-02T10:30:00+00:00 Xid 79 on the bus"]
    ms = int(T.timestamp()) * 1000
    assert read_lines(case / "metrics" / "dcgm.prom") == [
        "", "", "", f'DCGM_FI_DEV_XID_ERRORS{{Hostname="node-a"}} 79 {ms}']
    assert read_lines(case / "metrics" / "exported.prom") == [
        f'up{{instance="node-a"}} 1234567.25 {ms}']  # full precision, not 1.23457e+06
    assert summary.samples == 2 and summary.lines == 1


@pytest.mark.parametrize(("locator", "expected"), [
    (FileLine(root="c", path="logs/node-b/kern.log", line=32), ("logs/node-b/kern.log", 32)),
    (FileLine(path="metrics/dcgm.prom.gz", line=7), ("metrics/dcgm.prom.gz", 7)),
    (FileLine(root="/shared", path="/shared/logs/node-b/kern.log", line=5),
     ("/shared/logs/node-b/kern.log", 5)),
    (QueryAt(language="logql", query='{host="node-b",job="x"}', at_ns=1793615400000000000), None),
    (QueryAt(language="promql", query='up{instance="a:9100"}', at_ns=1793615400000000000), None),
    (KubeObject(kind="pod_log", namespace="ns", name="p", container="c",
                field="2026-11-02T10:00:00Z"), None),
    (FileLine(path="context.json", field="state"), None),
    (FileLine(path="logs/node-b/kern.log", line=0), None),
    (Note(text="logs/node-b/kern.log:32"), None),
])
def test_file_line_reads_a_locator(locator, expected):
    assert file_line(locator) == expected


def test_export_refuses_an_existing_case(lab, tmp_path, capsys):
    job = json.loads((SAMPLES / "disk-full" / "context.json").read_text())["job_id"]
    out = tmp_path / "x"
    assert main(["--config", str(lab), "export", f"lab/{job}", str(out), "--lead", "300"]) == 0
    printed = capsys.readouterr().out
    assert f"attribution analyze {out} --lead 300" in printed
    assert main(["--config", str(lab), "export", f"lab/{job}", str(out)]) == 2
    assert "already holds a case" in capsys.readouterr().err


HELDOUT = Path(__file__).resolve().parents[1] / "heldout"


@pytest.mark.parametrize("case", sorted(p.parent for p in HELDOUT.rglob("context.json")),
                         ids=lambda p: p.name)
def test_export_of_a_heldout_case_analyses_the_same(case, tmp_path, capsys):
    """The held-out cases too (one static scheduler per case: some share a job id)."""
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(f"clusters:\n  lab:\n    scheduler: {{kind: static, path: {case}}}\n")
    job = json.loads((case / "context.json").read_text())["job_id"]
    assert main(["--config", str(cfg), "analyze", f"lab/{job}", "--json"]) == 0
    original = json.loads(capsys.readouterr().out)
    out = tmp_path / "exported"
    assert main(["--config", str(cfg), "export", f"lab/{job}", str(out)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(out), "--json"]) == 0
    assert comparable(json.loads(capsys.readouterr().out)) == comparable(original)


def test_a_file_outside_the_case_goes_under_its_node_and_an_empty_node_stays_read(tmp_path):
    """A `files` source with a root: `/shared/logs/node-a/kern.log:5` becomes line 5 of
    logs/node-a/kern.log; a node whose files were read but kept nothing gets an empty file,
    so the export still reads it (coverage nodes_read)."""
    ctx = CTX.model_copy(update={"nodes": ["node-a", "node-b"]})
    text = "2026-11-02T10:30:00Z node-a kernel: mlx5_core 0000:3b:00.0: Link down"
    raw = RawEvidence(job_id="7", records=[rec(at("/shared/logs/node-a/kern.log", 5), text)],
                      coverage=[SourceCoverage(source="files:logs", nodes_read=["node-a",
                                                                                "node-b"])])
    summary = write_case(tmp_path / "case", ctx, raw)
    assert read_lines(tmp_path / "case" / "logs" / "node-a" / "kern.log") == [""] * 4 + [text]
    empty = tmp_path / "case" / "logs" / "node-b" / "no-lines-kept.log"
    assert empty.is_file() and empty.stat().st_size == 0
    assert summary.empty_nodes == ["node-b"]
    from attribution_dagster.reports.export import describe

    assert describe(summary)[-1] == (
        "logs/node-b/no-lines-kept.log: empty (the node's files were read, no line kept)")


def test_a_time_line_holds_no_anchor_so_it_is_never_evidence():
    from attribution_dagster.pipeline import catalog

    line = f"2026-11-02T10:30:00+00:00 {TIME_LINE_TEXT}".lower()
    anchors = catalog().anchors(last_only=True)
    assert anchors
    assert [a.literal for a in anchors if a.literal.lower() in line] == []


def test_the_topology_files_travel_with_the_export(tmp_path):
    """Issue 23: the case's topology/ files are written back as they were, so the export's
    analysis places the fault in the same switch port (and switch-side lines still map)."""
    from attribution_dagster.core.settings import AnalysisSettings
    from attribution_dagster.pipeline import analyze_case, collect_evidence, load_context
    from attribution_dagster.reports.export import write_case

    src = SAMPLES / "topo-link-switch-side-only"
    ctx = load_context(src).model_copy(update={"case_dir": str(src)})
    raw = collect_evidence(None, ctx, AnalysisSettings())
    summary = write_case(tmp_path / "out", ctx, raw)
    assert "topology/ibnetdiscover.txt" in {f.path for f in summary.files}
    assert (tmp_path / "out/topology/ibnetdiscover.txt").read_bytes() == (
        src / "topology/ibnetdiscover.txt"
    ).read_bytes()
    again = analyze_case(tmp_path / "out")
    assert again.suspect_nodes == ["gpu-002"]
    original = analyze_case(src).fault_domain
    assert original is not None and again.fault_domain == original
