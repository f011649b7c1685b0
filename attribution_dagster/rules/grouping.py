"""Which kept lines of one file state the same facts (core.evidence.LineGrouper, issue 16).

The files reader calls it in its scanner workers, file by file, and folds the lines whose
parts have equal keys (connectors/files/grouping.py): thousands of NCCL `comm 0x... rank N
nRanks M` init lines become one record per (rank, address) and communicator, parsed once
more in the parent. A part is what one parser says of a line: its facts' keys (`Fact.key`:
kind, node, parser, source, time quality, fields, attrs) plus the line's launcher labels.

A line stays whole, never folded, where folding could change what the normalizer does with
it: several lines' text (continuation lines, Events), a line whose facts name another node
or carry an srun task list or a rank / task label (`origins.py` relabels by them, and such
lines anchor echoes), and a host-less line within `_ECHO_LINES` of such a line with the same
parser and time (an echo the normalizer may move). So the normalizer's verdict is the same
with or without grouping; only counts and first / last locators are carried instead of lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import LinePart, ScanLine
from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.rules.facts import Fact
from attribution_dagster.rules.origins import _ECHO_LINES


class _Catalog(Protocol):
    """What the grouper asks of the parser catalog (rules/parsers.py)."""

    def facts(self, rec: Any, ctx: ExecutionContext | None = None) -> list[Fact]: ...

    def origin(self, text: str) -> dict[str, Any]: ...


class _Line:
    """What `ParserCatalog.facts` reads of a record, for a scanner's line tuple."""

    __slots__ = ("node", "time", "time_quality", "text")
    source = "files"
    locator: Any = None
    time_latest = None
    count = 1
    time_last = None
    locator_last = None
    only = None

    def __init__(self, node: str, time: datetime | None, quality: str, text: str) -> None:
        self.node, self.time, self.time_quality, self.text = node, time, quality, text


class FactGrouper:
    """The catalog's LineGrouper for one job (its nodes resolve the host groups)."""

    def __init__(self, catalog: _Catalog, ctx: ExecutionContext) -> None:
        self.catalog, self.ctx = catalog, ctx

    def parts(
        self, node: str, stream: str, lines: Sequence[ScanLine]
    ) -> list[list[LinePart] | None]:
        out: list[list[LinePart] | None] = []
        if node == CLUSTER_NODE:  # lines about several nodes, relabelled per host: kept
            return [None] * len(lines)
        facts_of, origin_of, ctx = self.catalog.facts, self.catalog.origin, self.ctx
        # (parser, time) -> line numbers of lines kept whole that could anchor an echo
        anchors: dict[tuple[str, datetime], list[int]] = {}
        timed: list[tuple[int, int, list[Fact]]] = []
        for i, (lineno, t, quality, text) in enumerate(lines):
            facts = facts_of(_Line(node, t, quality, text), ctx) if "\n" not in text else None
            if not facts:
                out.append(None)
                continue
            origin = origin_of(text)
            whole = "rank" in origin or "task" in origin
            for f in facts:
                if f.node != node or "tasks" in f.attrs:
                    whole = True
            if whole:
                for f in facts:
                    if f.time is not None:
                        anchors.setdefault((f.parser, f.time), []).append(lineno)
                out.append(None)
                continue
            labels = tuple(sorted(origin.items())) if origin else ()
            if len(facts) == 1:  # the usual line: one parser, one fact
                f = facts[0]
                out.append([(None, (f.parser, labels, (f.key(),)))])
            else:
                by_parser: dict[str, list[Any]] = {}
                for f in facts:
                    by_parser.setdefault(f.parser, []).append(f.key())
                split = len(by_parser) > 1
                out.append(
                    [((p,) if split else None, (p, labels, tuple(k))) for p, k in by_parser.items()]
                )
            timed.append((i, lineno, facts))
        if anchors:
            for i, lineno, facts in timed:
                keys = [(f.parser, f.time) for f in facts if f.time is not None]
                if any(abs(at - lineno) <= _ECHO_LINES for k in keys for at in anchors.get(k, ())):
                    out[i] = None
        return out
