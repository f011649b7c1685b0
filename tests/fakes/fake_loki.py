"""A fake Loki that really evaluates what the client sends, for tests and the bench.

It answers `GET /loki/api/v1/query_range` and `GET /loki/api/v1/series` with the response
shapes of the Loki HTTP API reference (grafana.com/docs/loki/latest/reference/loki-http-api,
"Query logs within a range of time"): `{"status": "success", "data": {"resultType":
"streams", "result": [{"stream": {<labels>}, "values": [["<ns>", "<line>"], ...]}],
"stats": {"summary": {...}, ...}}}`; series answers `{"status": "success", "data":
[{<labels>}, ...]}`.

Evaluated for real, so pagination and push-down are tested rather than assumed:
- stream selectors `{a="x", b=~"re", c!="y", d!~"re"}` (regexes anchored at both ends, as
  Loki does) and line filters `|= "s"`, `!= "s"`, `|~ "re"`, `!~ "re"` with Go string
  unescaping; regexes run with Python `re` (the RE2 subset the client emits);
- `start` inclusive, `end` exclusive (ns), `limit` across all streams, `direction`
  forward/backward: entries ordered by (timestamp, stream, insertion order), the first
  `limit` taken, then grouped by stream;
- the server limits `max_entries` (400 with Loki's message), `max_query_length_ns` and
  `max_series` (400s with Loki's messages) when set.

Metric queries of one shape are evaluated too (the liveness queries of the connector):
`sum by (<labels>) (count_over_time(<log query>[<range>]))` with `step`, answered as a
`matrix` (Loki HTTP API reference, "Query logs within a range of time": metric queries
return `{"resultType": "matrix", "result": [{"metric": {<labels>}, "values": [[<unix
seconds>, "<value>"], ...]}]}`, the Prometheus-compatible shape). Evaluation times are
`start`, `start + step`, ... up to `end` inclusive; the sample at `t` counts the entries in
`(t - range, t]`; steps without entries have no point, as in Loki. `max_series` limits the
output series of a metric query.

Entries live in streams (`ListStream`, or any object with the same three methods, such as
the bench's synthetic streams that generate 200k lines per node on demand).
"""

from __future__ import annotations

import bisect
import heapq
import json
import re
from collections.abc import Iterator
from typing import Any, Protocol

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_FILTER = re.compile(r'\s*(\|=|!=|\|~|!~)\s*"((?:[^"\\]|\\.)*)"')
_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}


def go_unquote(body: str) -> str:
    """The value of a Go double-quoted string literal's body (the part between the quotes)."""
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESC:
            out.append(_ESC[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            raise ValueError(f"invalid escape \\{nxt} in a LogQL string")
    return "".join(out)


def parse_logql(query: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(matchers, line filters) of a log query; ValueError like Loki's parse error."""
    query = query.strip()
    if not query.startswith("{"):
        raise ValueError("parse error : syntax error: unexpected IDENTIFIER")
    pos = 1
    matchers = []
    while True:
        m = _MATCHER.match(query, pos)
        if m is None:
            break
        matchers.append((m.group(1), m.group(2), go_unquote(m.group(3))))
        pos = m.end()
    rest = query[pos:].lstrip()
    if not rest.startswith("}"):
        raise ValueError(f"parse error at col {pos}: unexpected {rest[:10]!r}")
    pos = query.index("}", pos) + 1
    filters = []
    while pos < len(query):
        m = _FILTER.match(query, pos)
        if m is None:
            if query[pos:].strip():
                raise ValueError(f"parse error at col {pos}: unexpected {query[pos : pos + 10]!r}")
            break
        filters.append((m.group(1), go_unquote(m.group(2))))
        pos = m.end()
    if not matchers:
        raise ValueError("parse error : queries require at least one regexp or equality matcher")
    return matchers, filters


def selects(matchers: list[tuple[str, str, str]], labels: dict[str, str]) -> bool:
    for name, op, value in matchers:
        have = labels.get(name, "")
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "=~" and re.fullmatch(value, have, re.S) is None:
            return False
        if op == "!~" and re.fullmatch(value, have, re.S) is not None:
            return False
    return True


class Stream(Protocol):
    labels: dict[str, str]

    def bounds(self, start: int, end: int) -> tuple[int, int]: ...
    def ts(self, i: int) -> int: ...
    def lines(self, lo: int, hi: int) -> list[str]: ...


class ListStream:
    """A stream held in memory; entries kept sorted by timestamp (stable)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = dict(labels)
        self._ts: list[int] = []
        self._lines: list[str] = []

    def add(self, ts: int, line: str) -> None:
        i = bisect.bisect_right(self._ts, ts)
        self._ts.insert(i, ts)
        self._lines.insert(i, line)

    def bounds(self, start: int, end: int) -> tuple[int, int]:
        return bisect.bisect_left(self._ts, start), bisect.bisect_left(self._ts, end)

    def ts(self, i: int) -> int:
        return self._ts[i]

    def lines(self, lo: int, hi: int) -> list[str]:
        return self._lines[lo:hi]

    def __len__(self) -> int:
        return len(self._ts)


class _LineTest:
    """The line filters of one query. `search` is a regex every passing line must match
    (the first positive filter), used to skip non-matching lines in C over joined blocks."""

    def __init__(self, filters: list[tuple[str, str]]) -> None:
        self.compiled = [(op, re.compile(v) if op in ("|~", "!~") else v) for op, v in filters]
        first = next(((op, v) for op, v in filters if op in ("|=", "|~")), None)
        self.search: re.Pattern[str] | None = None
        if first is not None:
            self.search = re.compile(first[1] if first[0] == "|~" else re.escape(first[1]))

    def __call__(self, line: str) -> bool:
        for op, v in self.compiled:
            if op == "|=" and v not in line:  # type: ignore[operator]
                return False
            if op == "!=" and v in line:  # type: ignore[operator]
                return False
            if op == "|~" and v.search(line) is None:  # type: ignore[union-attr]
                return False
            if op == "!~" and v.search(line) is not None:  # type: ignore[union-attr]
                return False
        return True


def _matching(
    stream: Stream, lo: int, hi: int, test: _LineTest | None
) -> Iterator[tuple[int, int, str]]:
    """(ts, index, line) of the stream's entries in [lo, hi) that pass the filters, lazily.
    Without filters blocks grow from 64 lines (a page needs few lines per stream); with a
    positive filter, 50k-line blocks are joined and searched in C, and only lines holding a
    match are tested one by one (the search resumes at the next line start, so a match
    spanning two lines cannot hide one inside the second)."""
    block = 64 if test is None else 50_000
    b = lo
    while b < hi:
        lines = stream.lines(b, min(hi, b + block))
        if not lines:
            break
        if test is None:
            for k, line in enumerate(lines):
                yield stream.ts(b + k), b + k, line
        elif test.search is None:
            for k, line in enumerate(lines):
                if test(line):
                    yield stream.ts(b + k), b + k, line
        else:
            text = "\n".join(lines)
            starts = [0]
            for line in lines[:-1]:
                starts.append(starts[-1] + len(line) + 1)
            pos = 0
            while True:
                m = test.search.search(text, pos)
                if m is None:
                    break
                k = bisect.bisect_right(starts, m.start()) - 1
                if test(lines[k]):
                    yield stream.ts(b + k), b + k, lines[k]
                if k + 1 >= len(lines):
                    break
                pos = starts[k + 1]
        b += len(lines)
        block = min(block * 2, 50_000)


class FakeLoki:
    """Streams plus the two endpoints; `install(fake_http)` routes them."""

    def __init__(
        self,
        *,
        max_entries: int = 5000,
        max_query_length_ns: int | None = None,
        max_series: int | None = None,
    ) -> None:
        self.streams: list[Stream] = []
        self._by_labels: dict[tuple[tuple[str, str], ...], ListStream] = {}
        self.max_entries = max_entries
        self.max_query_length_ns = max_query_length_ns
        self.max_series = max_series
        self.queries: list[dict[str, str]] = []  # every query_range request's parameters
        self.bytes_sent = 0

    def add(self, labels: dict[str, str], ts: int, line: str) -> None:
        key = tuple(sorted(labels.items()))
        stream = self._by_labels.get(key)
        if stream is None:
            stream = self._by_labels[key] = ListStream(labels)
            self.streams.append(stream)
        stream.add(ts, line)

    def install(self, fake_http: Any) -> None:
        fake_http.route("GET", "/loki/api/v1/query_range", self.query_range)
        fake_http.route("GET", "/loki/api/v1/series", self.series)

    def evaluate_metric(self, params: dict[str, str], metric: re.Match[str]) -> tuple[int, Any]:
        return _evaluate_metric_impl(self, params, metric)

    # -- endpoints --------------------------------------------------------------------
    def query_range(self, req: Any) -> tuple:
        params = {k: v[0] for k, v in req.query.items()}
        self.queries.append(params)
        try:
            status, body = self.evaluate(params)
        except ValueError as exc:
            return 400, str(exc), {"Content-Type": "text/plain; charset=utf-8"}
        if status != 200:
            return status, body, {"Content-Type": "text/plain; charset=utf-8"}
        data = json.dumps(body).encode()
        self.bytes_sent += len(data)
        return 200, data, {"Content-Type": "application/json"}

    def series(self, req: Any) -> tuple:
        start, end = int(req.arg("start", "0")), int(req.arg("end", str(2**62)))
        out = []
        for sel in req.query.get("match[]", []):
            try:
                matchers, _ = parse_logql(sel)
            except ValueError as exc:
                return 400, str(exc)
            for s in self.streams:
                lo, hi = s.bounds(start, end)
                if hi > lo and selects(matchers, s.labels) and s.labels not in out:
                    out.append(s.labels)
        return 200, {"status": "success", "data": out}

    def evaluate(self, params: dict[str, str]) -> tuple[int, Any]:
        metric = _METRIC.match(params["query"])
        if metric is not None:
            return self.evaluate_metric(params, metric)
        limit = int(params.get("limit", "100"))
        if self.max_entries and limit > self.max_entries:
            return 400, (
                "max entries limit per query exceeded, limit > max_entries_limit_per_query "
                f"({limit} > {self.max_entries})"
            )
        start, end = int(params["start"]), int(params["end"])
        if self.max_query_length_ns and end - start > self.max_query_length_ns:
            return 400, (
                "the query time range exceeds the limit (query length: "
                f"{_go_duration(end - start)}, limit: {_go_duration(self.max_query_length_ns)})"
            )
        matchers, filters = parse_logql(params["query"])
        test = _LineTest(filters) if filters else None
        chosen = [s for s in self.streams if selects(matchers, s.labels)]
        if self.max_series is not None and len(chosen) > self.max_series:
            return 400, (
                f"maximum number of series ({self.max_series}) reached for a single query; "
                "consider reducing query cardinality by adding more specific stream selectors"
            )
        forward = params.get("direction", "backward").lower() == "forward"
        iters = []
        for order, s in enumerate(chosen):
            lo, hi = s.bounds(start, end)
            iters.append(_keyed(s, order, _matching(s, lo, hi, test), forward))
        picked = []
        for item in heapq.merge(*iters):
            picked.append(item)
            if len(picked) >= limit:
                break
        result: dict[int, dict[str, Any]] = {}
        for key, order, _, line, s in picked:
            ts = key if forward else -key
            entry = result.setdefault(order, {"stream": dict(s.labels), "values": []})
            entry["values"].append([str(ts), line])
        nbytes = sum(len(v[1]) for r in result.values() for v in r["values"])
        return 200, {
            "status": "success",
            "data": {
                "resultType": "streams",
                "result": list(result.values()),
                "stats": {
                    "summary": {
                        "bytesProcessedPerSecond": 0,
                        "linesProcessedPerSecond": 0,
                        "totalBytesProcessed": nbytes,
                        "totalLinesProcessed": len(picked),
                        "execTime": 0.001,
                        "queueTime": 0,
                        "subqueries": 0,
                        "totalEntriesReturned": len(picked),
                        "splits": 0,
                        "shards": 0,
                    },
                    "querier": {"store": {"totalChunksRef": 0, "totalChunksDownloaded": 0}},
                    "ingester": {"totalReached": 1, "totalChunksMatched": 0, "totalLinesSent": 0},
                },
            },
        }


_METRIC = re.compile(
    r"^\s*sum\s+by\s*\(([^)]*)\)\s*\(\s*count_over_time\s*\((.*)\[([0-9a-z.]+)\]\s*\)\s*\)\s*$",
    re.S,
)
_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DUR_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9}


def _duration_ns(text: str) -> int:
    parts = _DUR.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"parse error : not a valid duration string: {text!r}")
    return int(sum(float(n) * _DUR_NS[u] for n, u in parts))


def _step_ns(text: str) -> int:
    try:
        return int(float(text) * 10**9)  # float seconds
    except ValueError:
        return _duration_ns(text)


def _count(stream: Stream, lo: int, hi: int, test: _LineTest | None) -> int:
    """Entries of the stream with lo <= ts < hi passing the filters."""
    a, b = stream.bounds(lo, hi)
    if test is None:
        return max(0, b - a)
    return sum(1 for _ in _matching(stream, a, b, test))


def _keyed(
    s: Stream, order: int, items: Iterator[tuple[int, int, str]], forward: bool
) -> Iterator[tuple[int, int, int, str, Stream]]:
    """Merge keys: (ts, stream order, index) forward; negated for backward."""
    if forward:
        for ts, i, line in items:
            yield ts, order, i, line, s
    else:
        for ts, i, line in reversed(list(items)):
            yield -ts, order, -i, line, s


def _evaluate_metric_impl(
    loki: FakeLoki, params: dict[str, str], metric: re.Match[str]
) -> tuple[int, Any]:
    by = [x.strip() for x in metric.group(1).split(",") if x.strip()]
    matchers, filters = parse_logql(metric.group(2))
    rng = _duration_ns(metric.group(3))
    step = _step_ns(params.get("step", "15"))
    if step <= 0:
        raise ValueError("zero or negative query resolution step widths are not accepted")
    start, end = int(params["start"]), int(params["end"])
    if end < start:
        raise ValueError("end timestamp must not be before start time")
    if (end - start) // step + 1 > 11000:
        raise ValueError(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the "
            "query resolution (?step=XX)"
        )
    if loki.max_query_length_ns and end - start > loki.max_query_length_ns:
        return 400, (
            "the query time range exceeds the limit (query length: "
            f"{_go_duration(end - start)}, limit: {_go_duration(loki.max_query_length_ns)})"
        )
    test = _LineTest(filters) if filters else None
    series: dict[tuple[tuple[str, str], ...], dict[int, int]] = {}
    for s in loki.streams:
        if not selects(matchers, s.labels):
            continue
        key = tuple((k, s.labels[k]) for k in by if k in s.labels)
        points = series.setdefault(key, {})
        t = start
        while t <= end:
            # (t - range, t]: bounds are [lo, hi) on integer ns
            n = _count(s, t - rng + 1, t + 1, test)
            if n:
                points[t] = points.get(t, 0) + n
            t += step
    result = [
        {
            "metric": dict(key),
            "values": [[t / 1e9, str(n)] for t, n in sorted(points.items())],
        }
        for key, points in series.items()
        if points
    ]
    if loki.max_series is not None and len(result) > loki.max_series:
        return 400, (
            f"maximum number of series ({loki.max_series}) reached for a single query; "
            "consider reducing query cardinality by adding more specific stream selectors"
        )
    return 200, {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": result,
            "stats": {"summary": {"totalEntriesReturned": 0, "execTime": 0.001}},
        },
    }


def _go_duration(ns: int) -> str:
    s = ns // 1_000_000_000
    return f"{s // 3600}h{s % 3600 // 60}m{s % 60}s"
