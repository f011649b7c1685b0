"""LogQL text for the Loki connector: string and regex escaping, stream selectors, the
candidate-line query, locators, nanosecond times, Go durations and Loki's "query too big"
400 messages (what a smaller query avoids). No HTTP here."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Protocol

from attribution_dagster.core.hosts import node_regex, re2_escape
from attribution_dagster.core.locators import QueryAt

QUERY_RANGE = "/loki/api/v1/query_range"
SERIES = "/loki/api/v1/series"
NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def logql_string(value: str) -> str:
    """A double-quoted LogQL string (Go string-literal rules: `\\`, `"`, control chars)."""
    out = ['"']
    for ch in value:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def line_filter(literals: Sequence[str]) -> str:
    """`|~ "a|b\\\\(c"`: one regex alternation of the escaped literals."""
    return "|~ " + logql_string("|".join(re2_escape(lit) for lit in literals))


def stream_selector(labels: Mapping[str, str]) -> str:
    """The exact selector of one stream: `{filename="/var/log/kern.log", host="node-b"}`."""
    body = ", ".join(f"{k}={logql_string(str(v))}" for k, v in sorted(labels.items()))
    return "{" + body + "}"


def locator(labels: Mapping[str, str], ts_ns: int) -> QueryAt:
    """`{<the stream's labels>} @ns:<timestamp>`: paste the selector into Grafana Explore
    and set the time range around the timestamp to see the line and its neighbours. The
    part before the last `:` is constant per stream (parsers group a stream's records by it)."""
    return QueryAt(language="logql", query=stream_selector(labels), at_ns=ts_ns)


def to_ns(t: datetime) -> int:
    delta = t - _EPOCH
    return (delta.days * 86400 + delta.seconds) * NS + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w|y)")
_UNITNS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": NS,
    "m": 60 * NS,
    "h": 3600 * NS,
    "d": 86400 * NS,
    "w": 7 * 86400 * NS,
    "y": 365 * 86400 * NS,
}


def parse_duration_ns(text: str) -> int | None:
    """A Go / Prometheus duration (`721h0m0s`, `30d1h`, `1m30s`) in ns; None if not one."""
    text = text.strip()
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return int(sum(float(n) * _UNITNS[u] for n, u in parts))



class Selecting(Protocol):
    """What a selector needs of the configuration (LokiConfig)."""

    node_label: str

    def matchers(self) -> list[str]: ...


def selector_for(
    config: Selecting,
    nodes: Sequence[str],
    addresses: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """`{host=~"(?i)(?:node-a|node-b)...", job="syslog"}` for these nodes."""
    regex = node_regex(nodes, addresses)
    matchers = [f"{config.node_label}=~{logql_string(regex)}", *config.matchers()]
    return "{" + ", ".join(matchers) + "}"


def build_query(
    config: Selecting,
    nodes: Sequence[str],
    anchors: Sequence[str],
    addresses: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The candidate-line query: the nodes' selector and the anchors' `|~` filter."""
    selector = selector_for(config, nodes, addresses)
    return f"{selector} {line_filter(anchors)}" if anchors else selector


_SHRINK_MESSAGES: list[tuple[str, re.Pattern[str]]] = [
    # "max entries limit per query exceeded, limit > max_entries_limit_per_query (6000 > 5000)"
    ("limit", re.compile(r"max entries limit per query exceeded.*?\(\s*\d+\s*>\s*(\d+)\s*\)")),
    ("limit", re.compile(r"max entries limit per query exceeded()")),
    # "the query time range exceeds the limit (query length: 48h0m0s, limit: 24h0m0s)"
    ("range", re.compile(r"the query time range exceeds the limit.*?limit:\s*([0-9a-zµ.]+)\)")),
    ("range", re.compile(r"the query time range exceeds the limit()")),
    # "maximum number of series (500) reached for a single query" (older: "maximum of series")
    ("series", re.compile(r"maximum (?:number )?of series \(\d+\) reached()")),
    ("series", re.compile(r"max_query_series()")),
    ("volume", re.compile(r"the query would read too many bytes()")),
    ("volume", re.compile(r"too large to execute on a single querier()")),
    ("volume", re.compile(r"the query hit the max number of chunks limit()")),
    ("size", re.compile(r"expression too large()")),
]


def classify_400(message: str) -> tuple[str, int | None] | None:
    """(kind, value) of a Loki 400 that a smaller query avoids; None for any other 400."""
    for kind, rx in _SHRINK_MESSAGES:
        m = rx.search(message)
        if m is None:
            continue
        raw = m.group(1)
        if kind == "limit" and raw:
            return kind, int(raw)
        if kind == "range" and raw:
            return kind, parse_duration_ns(raw)
        return kind, None
    return None

