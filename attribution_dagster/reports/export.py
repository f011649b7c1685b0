"""Write one job as a case directory (docs/case-format.md): its context plus the evidence
that was read for it, so a hard case can be attached to a ticket or added to the tests, and
analysing the exported case gives the same result as the original analysis.

What is kept: every line that was read as evidence (prefilter hits and the continuation
lines they asked for), each file's last timed line (the engine's silence test) and each
file's last training-progress line, and every metric sample.

Where it goes: a line read from a case file keeps its file name and line number. Line
`logs/node-b/kern.log:32` is written as line 32 of `logs/node-b/kern.log`; the lines in
between that were not kept are written empty, so a locator reads the same after
re-analysis. An omitted line costs one byte (a line kept at 1,000,000 makes a file of about
1 MB); a `.gz` file is written gzip-compressed under its own name, where the empty lines
cost almost nothing. A file read from a node log tree outside the case (`files` source with a
`root`) goes to `logs/<node>/<its file name>`, lines still at their numbers. A metric sample of
a `.prom` file goes to its own line of the same file; samples from Prometheus go to
`metrics/exported.prom`.

Topology (issue 23): the files of the topology the job was read against (a case's
`topology/`, a files source's snapshot) are copied whole to `topology/`, so switch-side lines
map to the same job nodes and the same fault domain is found; a topology read live (`scontrol
show topology`, node labels from the API) has no file and is not written.

Times: an untimed kept line took its time from the nearest earlier timed line of its file
(and its latest possible time from the next one). When that line was not kept, the export
writes in its place a line holding only that time (`<ISO time> -- (attribution export:
time of a line not kept)`), so the untimed line gets the same interval again. Lines from a
back-end that stamps time outside the text (Loki, pod logs) have no file line: they are
written one after the other to `logs/<node>/<stream>`, with that time as an ISO prefix.

Not reproduced (NOT_REPRODUCED): the repeats of a line the scanner folded (a line
repeated more than FOLD_AFTER times in one file, an XID storm: the first FOLD_AFTER and the
last are written, so the chain's `x N` is smaller after re-analysis), and likewise the
lines of a file keeping more than GROUP_MIN_LINES lines (connectors/files/grouping.py) that
state a fact already kept (NCCL_DEBUG=INFO init lines: the first and last of each fact are
written); the coverage's
counts of what was read and not kept
(bytes, lines, files and metric samples read; hits and samples out of the window;
cluster-level lines naming no job node; damaged lines: invalid UTF-8, overlong, binary),
and so the note that counts damaged lines. Everything else of the result is the same:
status, category, candidates, suspects, confidence, the chain with its locators and times,
the coverage's status and nodes (tested on every sample and held-out case). Analyse the
export with the same --lead/--lag/--skew as the export (`attribution export` prints them).
"""

from __future__ import annotations

import bisect
import gzip
import json
import pickle
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample, RawEvidence, RawRecord
from attribution_dagster.core.formats.timestamps import TimestampParser
from attribution_dagster.core.locators import FileLine, Locator

NOT_REPRODUCED = frozenset({
    "bytes", "lines", "files", "samples", "out_of_window", "context_lines",
    "invalid_utf8_lines", "overlong_lines", "binary_lines",
})
"""SourceCoverage fields an export does not reproduce (what was read and not kept)."""
DAMAGE_NOTE = re.compile(r"^[\w:.-]+: \d+ unreadable line\(s\) skipped ")
"""The result note that counts damaged lines (not kept, so not in an export)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
TIME_LINE_TEXT = "-- (attribution export: time of a line not kept)"
_CASE_TOPS = ("logs", "metrics")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_CHUNK = 1 << 20  # empty lines are written in chunks of this many bytes at most


def file_line(locator: Locator) -> tuple[str, int] | None:
    """(file path, line number) a record or sample was read from, or None when it did not
    come from a file line (a LogQL/PromQL query and a time, a Kubernetes object, a note)."""
    if isinstance(locator, FileLine) and locator.line is not None and locator.line >= 1:
        return locator.path, locator.line
    return None


def _case_path(path: str, node: str, kind: str) -> PurePosixPath:
    """Where a file read at `path` goes in the exported case: the same relative path when it
    was a case file (`logs/...`, `metrics/...`), else `<kind>/<node>/<file name>` (logs) or
    `metrics/<file name>` (metrics)."""
    p = PurePosixPath(path)
    if not p.is_absolute() and p.parts and p.parts[0] in _CASE_TOPS and ".." not in p.parts:
        return p
    name = _UNSAFE.sub("_", p.name).strip("._") or "log"
    return PurePosixPath(kind, _UNSAFE.sub("_", node), name) if kind == "logs" else (
        PurePosixPath(kind, name if name.endswith((".prom", ".prom.gz")) else f"{name}.prom"))


def _stream_file(stream: str, source: str) -> str:
    name = _UNSAFE.sub("_", Path(stream).name or source).strip("._") or "log"
    return name if "." in name else f"{name}.log"


def _label_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat()


@dataclass
class WrittenFile:
    """One file of the exported case, as written."""

    path: str  # relative to the case directory
    kept: int = 0  # lines of evidence (read lines, tails, progress; or metric samples)
    time_lines: int = 0  # lines holding only the time of a line not kept
    empty: int = 0  # lines not kept, written empty so that line numbers stay
    last_line: int = 0
    bytes: int = 0
    gzip: bool = False


@dataclass
class ExportSummary:
    """What `write_case` wrote (printed by `attribution export`)."""

    out: Path
    files: list[WrittenFile] = field(default_factory=list)
    samples: int = 0
    empty_nodes: list[str] = field(default_factory=list)  # read, nothing kept: an empty file

    @property
    def lines(self) -> int:
        return sum(
            f.kept for f in self.files if not f.path.startswith(("metrics/", "dumps/", "topology/"))
        )


class _File:
    """Lines of one file, by line number, with what the timing passes need."""

    def __init__(self) -> None:
        self.lines: dict[int, str] = {}
        self.starts: dict[int, RawRecord] = {}  # record start line -> the record

    def put(self, line: int, rec: RawRecord) -> None:
        for i, text in enumerate(rec.text.split("\n")):
            self.lines.setdefault(line + i, text)
        self.starts.setdefault(line, rec)

    def put_repeats(self, line: int, rec: RawRecord) -> None:
        """A record that also stands for later repeats of its line (the scanner folds a line
        repeated more than FOLD_AFTER times in a file): the last repeat at its own line, as
        written. The repeats between are not written (NOT_REPRODUCED: the count)."""
        last = file_line(rec.locator_last) if rec.locator_last is not None else None
        if rec.count < 2 or last is None or rec.text_last is None or last[1] <= line:
            return
        self.lines.setdefault(last[1], rec.text_last)


def _log_records(raw: RawEvidence) -> Iterable[RawRecord]:
    yield from raw.records
    yield from raw.progress
    yield from raw.tails


def _place_times(f: _File, parser: TimestampParser) -> int:
    """Write time lines where an untimed kept line would otherwise take another time than it
    had: before it (its time: the earlier timed line) and after it (its latest possible time:
    the next timed line). Returns how many were added."""
    timed: dict[int, datetime] = {}
    for n, text in f.lines.items():
        t = parser.parse_line(text.encode("utf-8", "surrogatepass"))
        if t is not None:
            timed[n] = t
    order = sorted(timed)
    added = 0

    def free_below(n: int) -> int | None:
        p = n - 1
        while p >= 1 and p in f.lines:
            p -= 1
        return p if p >= 1 else None

    def free_above(n: int) -> int:
        q = n + 1
        while q in f.lines:
            q += 1
        return q

    def add(at: int, t: datetime) -> None:
        nonlocal added
        f.lines[at] = f"{_iso(t)} {TIME_LINE_TEXT}"
        timed[at] = t
        bisect.insort(order, at)
        added += 1

    for n in sorted(f.starts):  # earlier timed line: the record's own time
        rec = f.starts[n]
        if rec.time_quality != "inherited" or rec.time is None or n in timed:
            continue
        i = bisect.bisect_left(order, n)
        if i and timed[order[i - 1]] == rec.time:
            continue
        at = free_below(n)
        if at is not None:
            add(at, rec.time)
    for n in sorted(f.starts, reverse=True):  # next timed line: the record's latest time
        rec = f.starts[n]
        if rec.time_quality == "exact" or rec.time_latest is None or n in timed:
            continue
        i = bisect.bisect_right(order, n)
        if i < len(order) and timed[order[i]] == rec.time_latest:
            continue
        add(free_above(n), rec.time_latest)
    return added


def _write_numbered(path: Path, lines: dict[int, str], compress: bool) -> tuple[int, int]:
    """Each line at its number, empty lines between; returns (bytes, empty lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if compress else open
    empty = 0
    size = 0
    with opener(path, "wb") as fh:  # type: ignore[operator]
        at = 1
        for n in sorted(lines):
            gap = n - at
            empty += gap
            while gap > 0:
                k = min(gap, _CHUNK)
                fh.write(b"\n" * k)
                gap -= k
            data = lines[n].encode("utf-8", "surrogateescape") + b"\n"
            fh.write(data)
            size += n - at + len(data)
            at = n + 1
    return (path.stat().st_size if compress else size), empty


def _sample_line(s: MetricSample) -> str:
    """The sample as a Prometheus text line: labels in the order read, the value exact
    (`79`, `0.25`, `1234567.25`; never `%g`'s rounding), the time in milliseconds."""
    labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in s.labels.items())
    v = float(s.value)
    value = str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)
    ms = (s.time - _EPOCH) // timedelta(milliseconds=1)
    return f"{s.name}{{{labels}}} {value} {ms}"


def write_case(out: Path, ctx: ExecutionContext, raw: RawEvidence) -> ExportSummary:
    """Write `out/context.json`, `out/logs/...` and `out/metrics/...` (module docstring).
    Refuses to write into a directory that already holds a context.json."""
    # Long on purpose: one pass that writes a case back (logs, metrics, dumps, topology) with
    # the line numbers the locators need
    out = Path(out)
    if (out / "context.json").exists():
        raise FileExistsError(f"{out} already holds a case (context.json); choose another DIR")
    out.mkdir(parents=True, exist_ok=True)
    context = ctx.model_dump(mode="json", exclude_none=True, exclude={"case_dir"})
    context = {k: v for k, v in context.items() if v not in ([], {})}
    (out / "context.json").write_text(json.dumps(context, indent=2) + "\n", encoding="utf-8")
    summary = ExportSummary(out=out)

    parser = TimestampParser(ctx.start, ctx.log_timezone)
    numbered: dict[PurePosixPath, _File] = defaultdict(_File)
    streamed: dict[PurePosixPath, list[str]] = defaultdict(list)
    nodes_written: set[str] = set()
    pending: list[tuple[PurePosixPath, int, RawRecord]] = []
    for rec in _log_records(raw):
        where = file_line(rec.locator)
        if where is not None:
            path = _case_path(where[0], rec.node, "logs")
            numbered[path].put(where[1], rec)
            pending.append((path, where[1], rec))
        else:
            text = rec.text
            first = text.split("\n", 1)[0].encode("utf-8", "replace")
            if rec.time is not None and rec.time_quality == "exact" and (
                parser.parse_line(first) is None
            ):
                text = f"{_iso(rec.time)} {text}"
            path = PurePosixPath("logs", _UNSAFE.sub("_", rec.node),
                                 _stream_file(rec.stream, rec.source))
            if text not in streamed[path]:  # a tail or progress line also read as a record
                streamed[path].append(text)
        nodes_written.add(rec.node)
    for path, line, rec in pending:  # after every record: repeats take the free lines
        numbered[path].put_repeats(line, rec)
    for path, f in sorted(numbered.items()):
        added = _place_times(f, parser)
        compress = path.name.endswith(".gz")
        size, empty = _write_numbered(out / path, f.lines, compress)
        summary.files.append(WrittenFile(
            path=str(path), kept=len(f.lines) - added, time_lines=added, empty=empty,
            last_line=max(f.lines), bytes=size, gzip=compress))
    for path, lines in sorted(streamed.items()):
        if path in numbered:
            path = path.with_name(f"exported-{path.name}")
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        (out / path).write_bytes(data)
        summary.files.append(WrittenFile(path=str(path), kept=len(lines),
                                         last_line=len(lines), bytes=len(data)))
    # a node whose files were read but kept nothing: an empty file, so it still counts read
    for cov in raw.coverage:
        if cov.source != "files:logs":
            continue
        for node in cov.nodes_read:
            if node not in nodes_written:
                p = out / "logs" / _UNSAFE.sub("_", node) / "no-lines-kept.log"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(b"")
                summary.empty_nodes.append(node)
                summary.files.append(WrittenFile(path=str(p.relative_to(out))))

    metric_files: dict[PurePosixPath, dict[int, str]] = defaultdict(dict)
    queried: list[str] = []
    for s in sorted(raw.samples, key=lambda s: (s.name, s.node, s.time)):
        where = file_line(s.locator)
        if where is not None:
            metric_files[_case_path(where[0], s.node, "metrics")][where[1]] = _sample_line(s)
        else:
            queried.append(_sample_line(s))
    if queried:
        target = PurePosixPath("metrics", "exported.prom")
        start = max(metric_files.get(target, {0: ""}), default=0) + 1
        metric_files[target].update({start + i: line for i, line in enumerate(queried)})
    for path, mlines in sorted(metric_files.items()):
        compress = path.name.endswith(".gz")
        size, empty = _write_numbered(out / path, mlines, compress)
        summary.files.append(WrittenFile(path=str(path), kept=len(mlines), empty=empty,
                                         last_line=max(mlines), bytes=size, gzip=compress))
    summary.samples = len(raw.samples)
    for dump in raw.dumps:  # flight-recorder dumps, back in PyTorch's layout (issue 18)
        rel = PurePosixPath(dump.path)
        if rel.parts[:1] != ("dumps",) or ".." in rel.parts or rel.is_absolute():
            rel = PurePosixPath("dumps", _UNSAFE.sub("_", rel.name))
        data = pickle.dumps(dump.to_plain(), protocol=pickle.HIGHEST_PROTOCOL)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
        summary.files.append(WrittenFile(path=str(rel), kept=len(dump.entries), bytes=len(data)))
    summary.files.extend(_write_topology(out, ctx, raw))
    return summary


def _write_topology(out: Path, ctx: ExecutionContext, raw: RawEvidence) -> list[WrittenFile]:
    """The topology files the job was read against (issue 23), copied to `out/topology/` as
    they were (`ibnetdiscover.txt`, `topology.conf`, `lldp/<node>.json` ...): a source named
    relative to the case (`topology/ibnetdiscover.txt`) or by an absolute path. A topology
    from a live source (`scontrol show topology`, the Kubernetes API) has no file and is not
    written: analyse such an export with the cluster's topology source configured."""
    topo = raw.topology
    if topo is None:
        return []
    written: list[WrittenFile] = []
    for source in topo.sources:
        rel = PurePosixPath(source)
        candidates = [Path(source)] if rel.is_absolute() else []
        if ctx.case_dir and not rel.is_absolute() and ".." not in rel.parts:
            candidates.append(Path(ctx.case_dir) / source)
        src = next((p for p in candidates if p.is_file()), None)
        if src is None:
            continue
        sub = ("lldp",) if src.parent.name == "lldp" else ()
        dest = PurePosixPath("topology", *sub, src.name)
        data = src.read_bytes()
        (out / dest).parent.mkdir(parents=True, exist_ok=True)
        (out / dest).write_bytes(data)
        lines = data.decode("utf-8", "replace").splitlines()
        blank = sum(1 for ln in lines if not ln)
        written.append(
            WrittenFile(
                path=str(dest),
                kept=len(lines) - blank,
                empty=blank,
                last_line=len(lines),
                bytes=len(data),
            )
        )
    return written


def describe(summary: ExportSummary) -> list[str]:
    """One line per file written, then the totals: exactly what `write_case` wrote."""
    rows = ["context.json"]
    for f in summary.files:
        if f.path.startswith("dumps/"):  # a flight-recorder dump: a pickle, not lines
            rows.append(f"{f.path}: flight-recorder dump, {f.kept} entries kept, "
                        f"{f.bytes:,} bytes")
            continue
        what = "samples" if f.path.startswith("metrics/") else "lines"
        parts = [f"{f.kept} {what if f.kept != 1 else what[:-1]} kept"]
        if f.time_lines:
            parts.append(f"{f.time_lines} time line{'s' if f.time_lines != 1 else ''}")
        if f.empty:
            parts.append(f"{f.empty} empty (not kept)")
        size = f"{f.bytes:,} bytes" + (" gzip" if f.gzip else "")
        rows.append(f"{f.path}: {', '.join(parts)}; lines 1-{f.last_line}, {size}"
                    if f.last_line else f"{f.path}: empty (the node's files were read, "
                    "no line kept)")
    return rows
