"""Grafana Loki as a log source: the job's candidate lines with one LogQL query.
What is sent (docs/loki.md has the whole story):

    GET /loki/api/v1/query_range?direction=forward&start=<ns>&end=<ns>&limit=<n>&query=
        {host=~"(?i)(?:(?:node-a|node-b)(?:\\\\.[^:]*)?)(?::[0-9]+)?", job="syslog"}
          |~ "NVRM: Xid|NCCL WARN|SXid \\\\(PCI:|..."

- ONE query for all of the job's nodes (the node label matched by a regex of every node's
  short name, any domain, any port, any case, and its `node_addresses` aliases) and the
  parser catalog's anchors pushed down as one `|~` line filter. Anchors are literals: they
  are RE2-escaped, then LogQL-string-escaped (`\\` and `"`).
- A query whose URL-encoded text would exceed `max_query_bytes` is split (anchors first,
  then nodes) so proxies with an 8 KiB request-line limit still pass it; a 414 / 431 answer
  splits the same way.
- Long windows are cut into `max_window_seconds` chunks. Pages: when a page holds `limit`
  entries the next page starts at the last timestamp INCLUSIVE and entries already seen
  (stream labels, ns timestamp, line) are dropped, so entries sharing one nanosecond across
  a page edge are neither lost nor doubled.
- 429 / 5xx / timeouts / refused connections are retried with exponential backoff,
  honouring Retry-After (seconds or an HTTP date), capped. Loki's own 400 limit messages
  turn into smaller queries: `max entries limit per query exceeded` lowers `limit` to the
  server's maximum, `the query time range exceeds the limit` cuts the window to the
  server's maximum, `maximum number of series` splits the nodes, `would read too many
  bytes` / `too large to execute on a single querier` / `max number of chunks` halve the
  window. 401/403 and other 4xx fail at once, not retryable.
- `context_after` anchors (torchrun's ChildFailedError block) cannot be pushed down: for
  such a hit a second narrow query reads the same stream, unfiltered, from the hit's
  timestamp for `context_seconds`, and the lines after the hit are appended; one read
  serves the later hits of the stream it covers (at most `max_context_queries` reads;
  beyond that a record keeps its first line only, and the coverage says so).
- Where each node's logs and its training progress stop (the engine's silence and progress
  tests; the files connector learns both by reading whole files): two `count_over_time`
  metric queries over the window, bucketed by `step` (window / 250, at least 15 s),
  `sum by (<node label>, <stream labels>)` over every line and `sum by (<node label>)` over
  the progress anchors' lines; then per bucket holding nodes' last progress lines, one
  backward query with `limit` = the count found there. They fill the batch's
  `tails` (an interval: the last bucket with lines) and `progress`, the fields
  the files connector fills, so the engine reads both sources the same way.
- Every entry becomes a RawRecord with Loki's timestamp (quality `exact`: Loki always has
  one, the ingestion time when the shipper did not parse the line's own), the node
  resolved from the stream's `node_label` by NodeIndex, `stream` from the `filename` /
  `unit` / `container` / `job` label, and a locator a person can paste into Grafana Explore:
  `{filename="/var/log/kern.log", host="node-b"} @ns:1793613791000000000` (the stream's
  exact selector and the entry's nanosecond timestamp).

- `cluster_selectors` (switches, UFM, OpenSM, Fabric Manager, the controller): one more
  query per selector, the same anchors, paged and split the same way; a line is kept by
  the files connector's rule (it names a job node, or is switch-side) as a `CLUSTER_NODE`
  record; a failed cluster read makes the coverage partial and stops nothing else.

The module holds the client's fetch, paging, query splitting and continuation lines;
loki/query.py the LogQL text, loki/config.py the block's keys, loki/state.py one fetch's
state, loki/liveness.py the silence and progress reads, loki/cluster.py the cluster-level
streams.
"""

from __future__ import annotations

import copy
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import quote_plus

import httpx

from attribution_dagster.connectors import http
from attribution_dagster.connectors.base import OwnLineCap, SourceLimits
from attribution_dagster.connectors.loki.cluster import ClusterStreams
from attribution_dagster.connectors.loki.config import LokiKeys
from attribution_dagster.connectors.loki.context import ContinuationReads
from attribution_dagster.connectors.loki.liveness import Liveness
from attribution_dagster.connectors.loki.query import (
    NS,
    QUERY_RANGE,
    SERIES,
    build_query,
    classify_400,
    from_ns,
    locator,
    selector_for,
    to_ns,
)
from attribution_dagster.connectors.loki.state import (
    MAX_SHRINKS,
    MIN_WINDOW_NS,
    Entry,
    Fatal,
    Fetch,
    Hit,
    Shrink,
    Unit,
    error_text,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, LogBatch, RawRecord, SourceCoverage
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.settings import Window


class LokiConfig(LokiKeys):
    """`{kind: loki, url: "http://loki:3100", node_label: host}` is a complete block."""

    kind: Literal["loki"] = "loki"

    def client(self, cluster: str) -> LokiClient:
        return LokiClient(self, cluster=cluster)


class LokiClient(OwnLineCap, Liveness, ContinuationReads, ClusterStreams):
    """A LogSource reading one Loki. `transport` and `sleep` are for tests."""

    def __init__(
        self,
        config: LokiConfig,
        *,
        cluster: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.name = config.source_name
        self._transport = transport
        self._sleep = sleep
        self._environ = environ

    # -- public -------------------------------------------------------------------------
    @property
    def own_max_line_bytes(self) -> int:
        return self.config.max_line_bytes

    def _with_cap(self, limit: int) -> LokiClient:
        other = copy.copy(self)
        other.config = self.config.model_copy(update={"max_line_bytes": limit})
        return other

    def fetch_logs(
        self,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        limits: SourceLimits | None = None,
    ) -> LogBatch:
        source = self.capped(limits)
        if source is not self:  # the analysis cap is below this source's own
            return source.fetch_logs(ctx, anchors, window)
        cfg = self.config
        cov = SourceCoverage(source=self.name)
        st = Fetch(
            ctx=ctx,
            index=NodeIndex.of(ctx),
            cov=cov,
            limit=cfg.max_entries_per_query,
            max_window=max(MIN_WINDOW_NS, int(cfg.max_window_seconds * NS)),
        )
        nodes = tuple(dict.fromkeys(ctx.nodes))
        usable = [a for a in anchors if a.literal and "\n" not in a.literal]
        st.literals = tuple(dict.fromkeys(a.literal for a in usable if not a.last_only))
        # last_only anchors (training progress) are not pulled line by line: _liveness reads
        # only each node's last ones
        progress = tuple(dict.fromkeys(a.literal for a in usable if a.last_only))
        st.context = {a.literal: a.context_after for a in anchors if a.context_after > 0}
        st.switch_side = tuple(a.literal for a in usable if a.switch_side)
        if not cfg.pushdown and st.literals:
            st.matcher = re.compile("|".join(map(re.escape, st.literals)))
        start, end = to_ns(window.start), to_ns(window.end) + 1  # Loki's end is exclusive
        series_nodes: set[str] | None = None
        try:
            with self._http() as http:
                st.http = http
                series_nodes = self._series(st, nodes, start, end) if cfg.check_series else None
                if st.literals and st.stopped is None:
                    self._run_all(st, nodes, st.literals, start, end)
                if st.literals and cfg.cluster_selectors and st.stopped is None:
                    self._run_cluster(st, st.literals, start, end)  # loki/cluster.py
                if st.stopped is None or not st.stopped.stop:
                    self._fill_context(st, end)
                if cfg.liveness and (st.stopped is None or not st.stopped.stop):
                    self._liveness(st, nodes, progress, start, end)
        except Fatal as exc:  # raised before any query (bad TLS files, empty secret)
            st.stopped = exc
            cov.errors.append(str(exc))
        self._finish(st, nodes, series_nodes)
        return LogBatch(records=st.records, tails=st.tails, progress=st.progress, coverage=cov)

    # -- HTTP ---------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        cfg = self.config
        try:
            return http.build_client(
                base_url=cfg.url,
                timeout=cfg.timeout_seconds,
                verify=cfg.verify,
                ca_file=cfg.ca_file,
                client_cert=cfg.client_cert,
                client_key=cfg.client_key,
                headers={"X-Scope-OrgID": cfg.tenant} if cfg.tenant else None,
                bearer_token_env=cfg.bearer_token_env,
                basic_user=cfg.basic_user,
                basic_password_env=cfg.basic_password_env,
                environ=self._environ,
                transport=self._transport,
            )
        except http.HttpSetupError as exc:
            raise Fatal(f"{self.name}: {exc}") from None

    def _auth_hint(self) -> str:
        cfg = self.config
        if cfg.bearer_token_env:
            return f"check the token in ${cfg.bearer_token_env}"
        if cfg.basic_password_env:
            return f"check user {cfg.basic_user!r} and the password in ${cfg.basic_password_env}"
        return "Loki wants credentials: set bearer_token_env or basic_user + basic_password_env"

    def _call(self, st: Fetch, path: str, params: list[tuple[str, str | int]]) -> Any:
        """One request with retries (connectors/http.py); the `data` of a success answer."""
        cfg = self.config
        where = f"loki at {cfg.url}"
        assert st.http is not None
        client = st.http

        def get() -> httpx.Response:
            st.cov.queries += 1
            resp = client.get(path, params=params)
            st.cov.bytes += resp.num_bytes_downloaded or len(resp.content)
            return resp

        try:
            resp, attempts = http.send(get, cfg.retry, sleep=self._sleep)
        except httpx.TimeoutException as exc:
            problem = f"{where} did not answer within {cfg.timeout_seconds:g}s"
            raise Fatal(problem + _tries(http.attempts_of(exc)), transient=True) from None
        except httpx.TransportError as exc:
            problem = f"{where} is unreachable ({http.one_line(exc)})"
            transient = http.is_transient(exc)
            raise Fatal(problem + _tries(http.attempts_of(exc)), transient=transient) from None
        except httpx.HTTPError as exc:  # undecodable body, redirect loop, bad URL
            raise Fatal(f"{where}: {http.one_line(exc)}") from None
        status = resp.status_code
        if status == 200:
            return self._data(resp, where)
        message = error_text(resp)
        if http.is_transient(status):
            raise Fatal(f"{where} answered {status}: {message}{_tries(attempts)}", transient=True)
        if status in (401, 403):
            tenant = f" (tenant {cfg.tenant})" if cfg.tenant and status == 403 else ""
            raise Fatal(f"{where} answered {status}{tenant}: {self._auth_hint()}", auth=True)
        if status == 400 and (shrink := classify_400(message)) is not None:
            raise Shrink(shrink[0], f"{where} answered 400: {message}", shrink[1])
        if status in (413, 414, 431):
            raise Shrink("size", f"{where} answered {status}: request too large")
        raise Fatal(f"{where} answered {status}: {message}")

    @staticmethod
    def _data(resp: httpx.Response, where: str) -> Any:
        try:
            body = resp.json()
        except ValueError:
            raise Fatal(f"{where} answered 200 with a body that is not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            what = body.get("error") if isinstance(body, dict) else None
            raise Fatal(f"{where} answered 200 without a success status ({what or 'no data'})")
        return body["data"]

    # -- series: which nodes have logs at all -------------------------------------------
    def _series(self, st: Fetch, nodes: tuple[str, ...], start: int, end: int) -> set[str] | None:
        params: list[tuple[str, str | int]] = [
            ("match[]", self._selector(st, nodes)),
            ("start", start),
            ("end", end),
        ]
        try:
            data = self._call(st, SERIES, params)
        except Shrink as exc:
            st.cov.errors.append(
                f"series lookup refused ({exc}); nodes without hits count as missing"
            )
            return None
        except Fatal as exc:
            if exc.transient or exc.auth:
                st.stopped = exc
                st.cov.errors.append(str(exc))
                return None
            st.cov.errors.append(
                f"series lookup failed ({exc}); nodes without hits count as missing"
            )
            return None
        found: set[str] = set()
        for labels in data if isinstance(data, list) else []:
            if isinstance(labels, dict):
                node = st.index.resolve(str(labels.get(self.config.node_label, "")))
                if node is not None:
                    found.add(node)
        return found

    # -- the candidate-line queries -----------------------------------------------------
    def _selector(self, st: Fetch, nodes: Sequence[str]) -> str:
        return selector_for(self.config, nodes, st.ctx.node_addresses)

    def query_text(self, st: Fetch, nodes: Sequence[str], anchors: Sequence[str]) -> str:
        return build_query(self.config, nodes, anchors, st.ctx.node_addresses)

    def _fits(self, st: Fetch, nodes: Sequence[str], anchors: Sequence[str]) -> bool:
        return len(quote_plus(self.query_text(st, nodes, anchors))) <= self.config.max_query_bytes

    def _plan(
        self, st: Fetch, nodes: tuple[str, ...], anchors: tuple[str, ...]
    ) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(nodes, anchors) groups whose queries fit `max_query_bytes`: halve the longer part."""
        if self._fits(st, nodes, anchors) or (len(nodes) == 1 and len(anchors) <= 1):
            return [(nodes, anchors)]
        node_len = len(quote_plus(self._selector(st, nodes)))
        if len(anchors) > 1 and (len(nodes) == 1 or node_len <= self.config.max_query_bytes // 2):
            h = len(anchors) // 2
            return self._plan(st, nodes, anchors[:h]) + self._plan(st, nodes, anchors[h:])
        h = len(nodes) // 2
        return self._plan(st, nodes[:h], anchors) + self._plan(st, nodes[h:], anchors)

    def _chunks(self, st: Fetch, unit: Unit) -> list[Unit]:
        out = []
        t = unit.cursor
        while t < unit.end:
            e = min(unit.end, t + st.max_window)
            out.append(replace(unit, start=t, end=e, cursor=t))
            t = e
        return out

    def _run_all(
        self, st: Fetch, nodes: tuple[str, ...], literals: tuple[str, ...], start: int, end: int
    ) -> None:
        queue: deque[Unit] = deque()
        if not self.config.pushdown:
            literals = ()
        for n, a in self._plan(st, nodes, literals):
            queue.extend(self._chunks(st, Unit(n, a, start, end)))
        self._drain(st, queue)

    def _drain(self, st: Fetch, queue: deque[Unit], soft: bool = False) -> None:
        """Run the queued units, each refused one replaced by smaller ones. A failure that
        ends the fetch (Loki down, auth) stops it; `soft` (the cluster-level reads) only
        stops these units: the coverage says so and the other reads go on."""
        while queue:
            unit = queue.popleft()
            try:
                self._run_unit(st, unit)
            except Shrink as exc:
                try:
                    queue.extendleft(reversed(self._shrink(st, unit, exc)))
                except Fatal as fatal:
                    st.cov.errors.append(str(fatal))
            except Fatal as exc:
                st.cov.errors.append(self._what(unit) + str(exc))
                if exc.stop and soft:
                    st.cov.retryable = st.cov.retryable or exc.transient
                    return
                if exc.stop:
                    st.stopped = exc
                    return

    def _shrink(self, st: Fetch, unit: Unit, exc: Shrink) -> list[Unit]:
        """Smaller queries covering what `unit` had left; Fatal when none is possible."""
        st.shrinks += 1
        if st.shrinks > MAX_SHRINKS:
            raise Fatal(f"{exc} (gave up after {MAX_SHRINKS} smaller queries)", stop=False)
        rest = replace(unit, start=unit.cursor, cursor=unit.cursor)
        span = rest.end - rest.start
        if exc.kind == "limit":
            new = exc.value if exc.value else st.limit // 2
            if new < 1 or new >= st.limit:
                raise Fatal(str(exc), stop=False)
            st.limit = new
            return [rest]
        if exc.kind == "range":
            new = exc.value - NS if exc.value and exc.value > 2 * NS else span // 2
            new = min(new, span // 2) if new >= span else new
            if new < MIN_WINDOW_NS:
                raise Fatal(str(exc), stop=False)
            st.max_window = min(st.max_window, new)
            return self._chunks(st, rest)
        if exc.kind == "series" and len(rest.nodes) > 1:
            h = len(rest.nodes) // 2
            return [replace(rest, nodes=rest.nodes[:h]), replace(rest, nodes=rest.nodes[h:])]
        if exc.kind == "size":
            if len(rest.anchors) > 1:
                h = len(rest.anchors) // 2
                return [
                    replace(rest, anchors=rest.anchors[:h]),
                    replace(rest, anchors=rest.anchors[h:]),
                ]
            if len(rest.nodes) > 1:
                h = len(rest.nodes) // 2
                return [replace(rest, nodes=rest.nodes[:h]), replace(rest, nodes=rest.nodes[h:])]
            raise Fatal(str(exc), stop=False)
        # volume, or series with one node left: halve the time range
        if span < 2 * MIN_WINDOW_NS:
            raise Fatal(str(exc), stop=False)
        mid = rest.start + span // 2
        return [replace(rest, end=mid), replace(rest, start=mid, cursor=mid)]

    def _run_unit(self, st: Fetch, unit: Unit) -> None:
        """Page through one unit: forward, resuming at the last timestamp inclusive."""
        query = self._unit_query(st, unit)
        while unit.cursor < unit.end:
            limit = st.limit
            data = self._call(
                st,
                QUERY_RANGE,
                [
                    ("query", query),
                    ("direction", "forward"),
                    ("start", unit.cursor),
                    ("end", unit.end),
                    ("limit", limit),
                ],
            )
            entries = self._entries(data, st)
            st.ok_queries += 1
            for entry in entries:
                self._keep(st, entry, cluster=bool(unit.selector))
            if len(entries) < limit:
                return
            last = max(e[2] for e in entries)
            edge = {(e[1], e[2], e[3]) for e in entries if e[2] == last}
            st.edge = st.edge | edge if last == st.edge_ts else edge
            st.edge_ts = last
            if last <= unit.cursor:  # a whole page at one nanosecond: cannot page past it
                self._same_ns(st, query, last, limit, cluster=bool(unit.selector))
                unit.cursor = last + 1
            else:
                unit.cursor = last

    def _same_ns(self, st: Fetch, query: str, ts: int, limit: int, cluster: bool) -> None:
        """A full page of entries all at `ts`: ask for that nanosecond alone with twice the
        limit; if even that is full (or refused), say that some entries there are unread."""
        try:
            data = self._call(
                st,
                QUERY_RANGE,
                [
                    ("query", query),
                    ("direction", "forward"),
                    ("start", ts),
                    ("end", ts + 1),
                    ("limit", 2 * limit),
                ],
            )
            entries = self._entries(data, st)
        except Shrink:
            entries = None
        if entries is not None:
            st.ok_queries += 1
            for entry in entries:
                self._keep(st, entry, cluster=cluster)
        if entries is None or len(entries) >= 2 * limit:
            st.cov.errors.append(
                f"more than {limit} entries at one nanosecond ({ts}); some of them were not "
                "read (raise max_entries_per_query and Loki's max_entries_limit_per_query)"
            )

    def _line_record(self, node: str, labels: dict[str, str], ts: int, text: str) -> RawRecord:
        """A log line Loki returned, at its exact time, reopened by `{labels} @ns:<ts>`."""
        return RawRecord(
            source="loki",
            node=node,
            locator=locator(labels, ts),
            time=from_ns(ts),
            time_quality="exact",
            text=text,
            stream=self._stream(labels),
        )

    def _entries(self, data: Any, st: Fetch) -> list[Entry]:
        if not isinstance(data, dict) or data.get("resultType") != "streams":
            what = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise Fatal(f"loki at {self.config.url} answered a {what!r} result, not streams")
        out: list[Entry] = []
        try:
            for stream in data.get("result") or []:
                labels = {str(k): str(v) for k, v in (stream.get("stream") or {}).items()}
                key = tuple(sorted(labels.items()))
                for value in stream.get("values") or []:
                    out.append((labels, key, int(value[0]), str(value[1])))
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            raise Fatal(
                f"loki at {self.config.url} answered streams in an unknown shape"
            ) from None
        return out

    # -- entries -> records -------------------------------------------------------------
    def _keep(self, st: Fetch, entry: Entry, cluster: bool = False) -> None:
        """One entry of a page. Entries at the previous page's last timestamp come again on
        the next page (it starts there, inclusive): those already seen are dropped, as are
        entries already kept (a line matching anchors of two split queries). Only kept
        entries and the page edge are remembered, so memory follows the records.
        `cluster`: the entry comes from a `cluster_selectors` stream (loki/cluster.py)."""
        labels, lkey, ts, line = entry
        key = (lkey, ts, line)
        if key in st.seen or (ts == st.edge_ts and key in st.edge):
            return
        st.cov.lines += 1
        if st.matcher is not None and st.matcher.search(line) is None:
            return
        st.seen.add(key)
        raw_host = labels.get(self.config.node_label)
        node = st.index.resolve(raw_host)
        if node is None and cluster:
            node = CLUSTER_NODE  # a switch, UFM, the controller: no job node wrote it
            st.cluster_streams.add(lkey)
        elif node is None:
            st.unknown_hosts.add(str(raw_host))
            return
        else:
            st.streams_nodes.add(node)
        parts = line.split("\n")
        for i, part in enumerate(parts):
            if len(parts) > 1 and not any(lit in part for lit in st.literals):
                continue  # a multi-line entry: only its lines holding an anchor are records
            want = max((n for lit, n in st.context.items() if lit in part), default=0)
            text = self._clean(part, st)
            tail = [self._clean(p, st) for p in parts[i + 1 : i + 1 + want]]
            if tail:
                text = "\n".join([text, *tail])
            if node == CLUSTER_NODE and not self._cluster_keeps(st, text):
                continue
            st.records.append(self._line_record(node, labels, ts, text))
            if want > len(tail):
                st.hits.append(Hit(len(st.records) - 1, labels, ts, line, want - len(tail)))

    def _clean(self, text: str, st: Fetch) -> str:
        text = text.removesuffix("\r")
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) > self.config.max_line_bytes:
            st.cov.overlong_lines += 1
            return raw[: self.config.max_line_bytes].decode("utf-8", "ignore")
        return text

    def _stream(self, labels: Mapping[str, str]) -> str:
        for name in self.config.stream_labels:
            value = labels.get(name)
            if value:
                return value.rstrip("/").rsplit("/", 1)[-1]
        return ""

    # -- coverage -------------------------------------------------------------------------
    def _finish(self, st: Fetch, nodes: tuple[str, ...], series_nodes: set[str] | None) -> None:
        cov = st.cov
        have = series_nodes if series_nodes is not None else set()
        have = have | st.streams_nodes
        cov.nodes_read = [n for n in nodes if n in have]
        cov.nodes_missing = [n for n in nodes if n not in have]
        if st.unknown_hosts:
            shown = ", ".join(sorted(st.unknown_hosts)[:5])
            cov.errors.append(
                f"entries of streams whose {self.config.node_label} is no job node skipped: {shown}"
            )
        cov.records = len(st.records)
        if st.stopped is not None:
            cov.retryable = st.stopped.transient
        if st.stopped is not None and st.ok_queries == 0:
            cov.status = "failed"
        elif st.stopped is not None or any(
            not e.startswith("entries of streams") for e in cov.errors
        ):
            cov.status = "partial"
        elif not cov.nodes_read and not st.cluster_streams:
            cov.status = "empty"
        elif cov.nodes_missing:
            cov.status = "partial"
        else:
            cov.status = "ok"


def _tries(attempts: int) -> str:
    return f" (after {attempts} attempts)" if attempts > 1 else ""
