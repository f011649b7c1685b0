"""What one Loki fetch carries between its queries: the query units, the hits waiting for
continuation lines, the accumulating batch and the two control-flow exceptions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from attribution_dagster.connectors.loki.query import NS
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import RawRecord, SourceCoverage
from attribution_dagster.core.hosts import NodeIndex

MIN_WINDOW_NS = NS  # a window is never halved below one second
MAX_SHRINKS = 64  # smaller-query rewrites per fetch before giving up


class Fatal(Exception):
    """Stop: `stop` ends the whole fetch (auth, Loki down), else only this query."""

    def __init__(
        self, message: str, *, transient: bool = False, stop: bool = True, auth: bool = False
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.stop = stop
        self.auth = auth


class Shrink(Exception):
    """Loki refused the query as too big; `kind` says how to make it smaller."""

    def __init__(self, kind: str, message: str, value: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # limit | range | series | volume | size
        self.value = value


Labels = tuple[tuple[str, str], ...]
Key = tuple[Labels, int, str]  # (stream labels, ns timestamp, line)
Entry = tuple[dict[str, str], Labels, int, str]


@dataclass
class Unit:
    """One query shape over one time range; `cursor` is where the next page starts."""

    nodes: tuple[str, ...]
    anchors: tuple[str, ...]
    start: int
    end: int  # exclusive, like Loki's
    cursor: int = -1
    selector: str = ""  # a `cluster_selectors` stream selector: read instead of the nodes'

    def __post_init__(self) -> None:
        if self.cursor < 0:
            self.cursor = self.start


@dataclass
class Hit:
    record_index: int
    labels: dict[str, str]
    ts: int
    line: str
    want: int  # continuation lines wanted


@dataclass
class Fetch:
    """What one fetch_logs call accumulates."""

    ctx: ExecutionContext
    index: NodeIndex
    cov: SourceCoverage
    limit: int
    max_window: int
    records: list[RawRecord] = field(default_factory=list)
    tails: list[RawRecord] = field(default_factory=list)  # LogBatch.tails
    tail_selectors: list[str] = field(default_factory=list)  # each tail's stream selector
    progress: list[RawRecord] = field(default_factory=list)  # LogBatch.progress
    seen: set[Key] = field(default_factory=set)  # entries kept (records)
    edge: set[Key] = field(default_factory=set)  # entries at the last page's last timestamp
    edge_ts: int = -1
    streams_nodes: set[str] = field(default_factory=set)
    hits: list[Hit] = field(default_factory=list)
    shrinks: int = 0
    ok_queries: int = 0  # candidate-line and continuation queries answered
    stopped: Fatal | None = None
    unknown_hosts: set[str] = field(default_factory=set)
    literals: tuple[str, ...] = ()
    switch_side: tuple[str, ...] = ()  # literals of switch-side parsers (kept naming no node)
    cluster_streams: set[Labels] = field(default_factory=set)  # cluster-level streams read
    context: dict[str, int] = field(default_factory=dict)  # literal -> lines wanted after it
    http: httpx.Client | None = None
    matcher: re.Pattern[str] | None = None  # client-side filter when nothing is pushed down



def lines_after(entries: list[tuple[int, str]], hit: Hit) -> list[str] | None:
    """The lines following the hit's entry in a continuation read (None: not covered)."""
    for k, (ts, line) in enumerate(entries):
        if ts == hit.ts and line == hit.line:
            return [p for _, ln in entries[k + 1 :] for p in ln.split("\n")]
        if ts > hit.ts:  # the hit itself is not in the read
            return None
    return None


def error_text(resp: httpx.Response) -> str:
    """Loki's error message in one line: a JSON `error`/`message` or the plain-text body."""
    text = ""
    try:
        body = resp.json()
        if isinstance(body, dict):
            text = str(body.get("error") or body.get("message") or "")
    except ValueError:
        pass
    if not text:
        text = resp.text
    text = " ".join(text.split())
    return text[:300] or resp.reason_phrase or "no message"
