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
"""

from __future__ import annotations

import copy
import email.utils
import os
import re
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from urllib.parse import quote_plus

import httpx
from pydantic import Field, field_validator, model_validator

from attribution_dagster.connectors.base import BackendConfig, SourceLimits
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, LogBatch, RawRecord, SourceCoverage
from attribution_dagster.core.hosts import NodeIndex, host_key
from attribution_dagster.core.locators import QueryAt
from attribution_dagster.core.settings import Window

QUERY_RANGE = "/loki/api/v1/query_range"
SERIES = "/loki/api/v1/series"
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RE2_META = frozenset("\\.+*?()|[]{}^$")
_NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_WINDOW_NS = _NS  # a window is never halved below one second
MAX_SHRINKS = 64  # smaller-query rewrites per fetch before giving up
MIN_STEP_SECONDS = 15.0  # liveness buckets: finer does not help (shippers batch, skew 5 s)
LIVENESS_POINTS = 250  # liveness buckets per window


# -- LogQL text --------------------------------------------------------------------------
def re2_escape(literal: str) -> str:
    """A literal as an RE2 pattern matching exactly it (only RE2's metacharacters escaped)."""
    return "".join("\\" + ch if ch in _RE2_META else ch for ch in literal)


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


_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def node_regex(nodes: Sequence[str], addresses: Mapping[str, Sequence[str]] | None = None) -> str:
    """The label regex matching the nodes (and their `node_addresses` aliases) in every
    spelling a label may carry: any case (`(?i)`), any domain after a short name, any port
    (`instance="gpu-017:9100"`), IPv6 in brackets. Loki anchors label regexes at both ends."""
    keys: set[str] = set()
    for node in nodes:
        keys.add(host_key(node))
        for alias in (addresses or {}).get(node, ()):
            keys.add(host_key(str(alias)))
    keys.discard("")
    names = sorted(k for k in keys if ":" not in k and not _IPV4.match(k))
    ipv4 = sorted(k for k in keys if _IPV4.match(k))
    ipv6 = sorted(k for k in keys if ":" in k)
    parts = []
    if names:
        parts.append("(?:" + "|".join(map(re2_escape, names)) + r")(?:\.[^:]*)?")
    if ipv4:
        parts.append("(?:" + "|".join(map(re2_escape, ipv4)) + ")")
    if ipv6:
        parts.append(r"\[?(?:" + "|".join(map(re2_escape, ipv6)) + r")\]?")
    return "(?i)(?:" + "|".join(parts) + ")(?::[0-9]+)?"


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
    return (delta.days * 86400 + delta.seconds) * _NS + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w|y)")
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": _NS,
    "m": 60 * _NS,
    "h": 3600 * _NS,
    "d": 86400 * _NS,
    "w": 7 * 86400 * _NS,
    "y": 365 * 86400 * _NS,
}


def parse_duration_ns(text: str) -> int | None:
    """A Go / Prometheus duration (`721h0m0s`, `30d1h`, `1m30s`) in ns; None if not one."""
    text = text.strip()
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return int(sum(float(n) * _UNIT_NS[u] for n, u in parts))


# -- configuration -----------------------------------------------------------------------
class LokiConfig(BackendConfig):
    """`{kind: loki, url: "http://loki:3100", node_label: host}` is a complete block."""

    kind: Literal["loki"] = "loki"
    url: str = Field(description="Loki (or query-frontend / gateway) base URL")
    node_label: str = Field(
        default="host",
        description="stream label naming the node: host, hostname, node, nodename, instance",
    )
    selectors: dict[str, str] | str = Field(
        default_factory=dict,
        description="extra stream matchers: a mapping of exact values ({job: syslog}) or a "
        'LogQL matcher string (\'job=~"syslog|kernel", env!="dev"\')',
    )
    tenant: str | None = Field(default=None, description="X-Scope-OrgID header (multi-tenant Loki)")
    bearer_token_env: str | None = Field(
        default=None, description="NAME of the env var holding a bearer token"
    )
    basic_user: str | None = Field(default=None, description="HTTP basic-auth user")
    basic_password_env: str | None = Field(
        default=None, description="NAME of the env var holding the basic-auth password"
    )
    verify: bool = Field(default=True, description="verify the server's TLS certificate")
    ca_file: str | None = Field(default=None, description="CA bundle for the server's certificate")
    client_cert: str | None = Field(default=None, description="client certificate (PEM) for mTLS")
    client_key: str | None = Field(default=None, description="its key, if not in client_cert")
    max_entries_per_query: int = Field(
        default=5000, ge=1, description="`limit` per request (Loki's default maximum is 5000)"
    )
    max_window_seconds: float = Field(
        default=6 * 3600, gt=0, description="longer windows are queried in chunks this long"
    )
    max_query_bytes: int = Field(
        default=6144,
        ge=512,
        description="URL-encoded query length above which anchors / nodes are split",
    )
    retries: int = Field(default=3, ge=0, le=10, description="retries after 429 / 5xx / timeout")
    backoff_seconds: float = Field(default=0.5, ge=0, description="first retry delay, doubled")
    max_backoff_seconds: float = Field(default=30.0, ge=0, description="cap, also on Retry-After")
    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")
    context_seconds: float = Field(
        default=30.0, gt=0, description="how far after a hit continuation lines are looked for"
    )
    max_context_queries: int = Field(
        default=32, ge=0, description="continuation-line queries per fetch"
    )
    pushdown: bool = Field(
        default=True,
        description="send the anchors as a `|~` line filter; false reads every line of the "
        "nodes' streams and filters here (far more traffic; for a Loki refusing the regex)",
    )
    check_series: bool = Field(
        default=True,
        description="ask /series which nodes have any stream, so nodes_missing means 'no logs'",
    )
    stream_labels: list[str] = Field(
        default_factory=lambda: ["filename", "unit", "systemd_unit", "container", "job"],
        description="first present label names a record's stream (basename of a path)",
    )
    liveness: bool = Field(
        default=True,
        description="also ask where each node's streams and its training progress stop: "
        "two `count_over_time` metric queries over the window plus a narrow read of the last "
        "progress lines (the engine's silence and progress tests)",
    )
    liveness_step_seconds: float | None = Field(
        default=None,
        gt=0,
        description="bucket of the liveness metric queries; None: window / 250, at least "
        f"{MIN_STEP_SECONDS:g} s",
    )
    max_progress_queries: int = Field(
        default=16, ge=0, description="reads of the last progress lines per fetch"
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"url must be http(s)://host[:port][/prefix], got {v!r}")
        if "@" in v.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(
                "url must not hold credentials: use basic_user + basic_password_env "
                "or bearer_token_env"
            )
        return v

    @field_validator("node_label")
    @classmethod
    def _label(cls, v: str) -> str:
        if not _LABEL_NAME.match(v):
            raise ValueError(f"node_label {v!r} is not a Loki label name")
        return v

    @field_validator("selectors")
    @classmethod
    def _selectors(cls, v: dict[str, str] | str) -> dict[str, str] | str:
        if isinstance(v, str):
            v = v.strip()
            if v.startswith("{") and v.endswith("}"):
                v = v[1:-1].strip()
            if "{" in v or "}" in v:
                raise ValueError("selectors: give label matchers only, e.g. 'job=\"syslog\"'")
            return v
        for name in v:
            if not _LABEL_NAME.match(name):
                raise ValueError(f"selectors: {name!r} is not a Loki label name")
        return v

    @model_validator(mode="after")
    def _auth(self) -> LokiConfig:
        if self.bearer_token_env and (self.basic_user or self.basic_password_env):
            raise ValueError("use either bearer_token_env or basic_user + basic_password_env")
        if bool(self.basic_user) != bool(self.basic_password_env):
            raise ValueError("basic_user and basic_password_env go together")
        if self.client_key and not self.client_cert:
            raise ValueError("client_key needs client_cert")
        return self

    def matchers(self) -> list[str]:
        """The extra matchers as LogQL text, without braces."""
        if isinstance(self.selectors, str):
            return [self.selectors] if self.selectors else []
        return [f"{k}={logql_string(v)}" for k, v in self.selectors.items()]

    def client(self, cluster: str) -> LokiClient:
        return LokiClient(self, cluster=cluster)


def selector_for(
    config: LokiConfig,
    nodes: Sequence[str],
    addresses: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """`{host=~"(?i)(?:node-a|node-b)...", job="syslog"}` for these nodes."""
    regex = node_regex(nodes, addresses)
    matchers = [f"{config.node_label}=~{logql_string(regex)}", *config.matchers()]
    return "{" + ", ".join(matchers) + "}"


def build_query(
    config: LokiConfig,
    nodes: Sequence[str],
    anchors: Sequence[str],
    addresses: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The candidate-line query: the nodes' selector and the anchors' `|~` filter."""
    selector = selector_for(config, nodes, addresses)
    return f"{selector} {line_filter(anchors)}" if anchors else selector


# -- control flow inside one fetch -------------------------------------------------------
class _Fatal(Exception):
    """Stop: `stop` ends the whole fetch (auth, Loki down), else only this query."""

    def __init__(
        self, message: str, *, transient: bool = False, stop: bool = True, auth: bool = False
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.stop = stop
        self.auth = auth


class _Shrink(Exception):
    """Loki refused the query as too big; `kind` says how to make it smaller."""

    def __init__(self, kind: str, message: str, value: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # limit | range | series | volume | size
        self.value = value


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


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or odd."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


_Labels = tuple[tuple[str, str], ...]
_Key = tuple[_Labels, int, str]  # (stream labels, ns timestamp, line)
_Entry = tuple[dict[str, str], _Labels, int, str]


@dataclass
class _Unit:
    """One query shape over one time range; `cursor` is where the next page starts."""

    nodes: tuple[str, ...]
    anchors: tuple[str, ...]
    start: int
    end: int  # exclusive, like Loki's
    cursor: int = -1

    def __post_init__(self) -> None:
        if self.cursor < 0:
            self.cursor = self.start


@dataclass
class _Hit:
    record_index: int
    labels: dict[str, str]
    ts: int
    line: str
    want: int  # continuation lines wanted


@dataclass
class _Fetch:
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
    seen: set[_Key] = field(default_factory=set)  # entries kept (records)
    edge: set[_Key] = field(default_factory=set)  # entries at the last page's last timestamp
    edge_ts: int = -1
    streams_nodes: set[str] = field(default_factory=set)
    hits: list[_Hit] = field(default_factory=list)
    shrinks: int = 0
    ok_queries: int = 0  # candidate-line and continuation queries answered
    stopped: _Fatal | None = None
    unknown_hosts: set[str] = field(default_factory=set)
    literals: tuple[str, ...] = ()
    context: dict[str, int] = field(default_factory=dict)  # literal -> lines wanted after it
    http: httpx.Client | None = None
    matcher: re.Pattern[str] | None = None  # client-side filter when nothing is pushed down


# -- the client --------------------------------------------------------------------------
class LokiClient:
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
    def with_max_line_bytes(self, limit: int) -> LokiClient:
        """This client cutting lines at `limit` when that is below its own `max_line_bytes`
        (the analysis setting can lower a source's cap, not raise it)."""
        if limit >= self.config.max_line_bytes:
            return self
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
        if limits is not None and limits.max_line_bytes is not None:
            capped = self.with_max_line_bytes(limits.max_line_bytes)
            if capped is not self:
                return capped.fetch_logs(ctx, anchors, window)
        cfg = self.config
        cov = SourceCoverage(source=self.name)
        st = _Fetch(
            ctx=ctx,
            index=NodeIndex.of(ctx),
            cov=cov,
            limit=cfg.max_entries_per_query,
            max_window=max(MIN_WINDOW_NS, int(cfg.max_window_seconds * _NS)),
        )
        nodes = tuple(dict.fromkeys(ctx.nodes))
        usable = [a for a in anchors if a.literal and "\n" not in a.literal]
        st.literals = tuple(dict.fromkeys(a.literal for a in usable if not a.last_only))
        # last_only anchors (training progress) are not pulled line by line: _liveness reads
        # only each node's last ones
        progress = tuple(dict.fromkeys(a.literal for a in usable if a.last_only))
        st.context = {a.literal: a.context_after for a in anchors if a.context_after > 0}
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
                if st.stopped is None or not st.stopped.stop:
                    self._fill_context(st, end)
                if cfg.liveness and (st.stopped is None or not st.stopped.stop):
                    self._liveness(st, nodes, progress, start, end)
        except _Fatal as exc:  # raised before any query (bad TLS files, empty secret)
            st.stopped = exc
            cov.errors.append(str(exc))
        self._finish(st, nodes, series_nodes)
        return LogBatch(records=st.records, tails=st.tails, progress=st.progress, coverage=cov)

    # -- HTTP ---------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        cfg = self.config
        env = os.environ if self._environ is None else self._environ
        headers = {"Accept": "application/json"}
        if cfg.tenant:
            headers["X-Scope-OrgID"] = cfg.tenant
        auth: httpx.Auth | None = None
        if cfg.bearer_token_env:
            token = env.get(cfg.bearer_token_env, "").strip()
            if not token:
                raise _Fatal(f"{self.name}: environment variable {cfg.bearer_token_env} is empty")
            headers["Authorization"] = f"Bearer {token}"
        elif cfg.basic_user and cfg.basic_password_env:
            password = env.get(cfg.basic_password_env, "")
            if not password:
                raise _Fatal(f"{self.name}: environment variable {cfg.basic_password_env} is empty")
            auth = httpx.BasicAuth(cfg.basic_user, password)
        verify: bool | ssl.SSLContext = cfg.verify
        if cfg.verify and (cfg.ca_file or cfg.client_cert):
            try:
                context = ssl.create_default_context(cafile=cfg.ca_file)
                if cfg.client_cert:
                    context.load_cert_chain(cfg.client_cert, cfg.client_key)
            except (OSError, ssl.SSLError) as exc:
                raise _Fatal(f"{self.name}: cannot load TLS files: {exc}") from None
            verify = context
        return httpx.Client(
            base_url=cfg.url,
            headers=headers,
            auth=auth,
            timeout=cfg.timeout_seconds,
            verify=verify,
            transport=self._transport,
        )

    def _auth_hint(self) -> str:
        cfg = self.config
        if cfg.bearer_token_env:
            return f"check the token in ${cfg.bearer_token_env}"
        if cfg.basic_password_env:
            return f"check user {cfg.basic_user!r} and the password in ${cfg.basic_password_env}"
        return "Loki wants credentials: set bearer_token_env or basic_user + basic_password_env"

    def _call(self, st: _Fetch, path: str, params: list[tuple[str, str | int]]) -> Any:
        """One request with retries; the parsed `data` of a success answer."""
        cfg = self.config
        where = f"loki at {cfg.url}"
        attempt = 0
        while True:
            st.cov.queries += 1
            delay: float | None = None
            try:
                assert st.http is not None
                resp = st.http.get(path, params=params)
            except httpx.TimeoutException:
                problem = f"{where} did not answer within {cfg.timeout_seconds:g}s"
            except httpx.TransportError as exc:
                detail = " ".join(str(exc).split())[:200]
                problem = f"{where} is unreachable ({type(exc).__name__}: {detail})"
            except httpx.HTTPError as exc:  # undecodable body, redirect loop, bad URL
                detail = " ".join(str(exc).split())[:200]
                raise _Fatal(f"{where}: {type(exc).__name__}: {detail}") from None
            else:
                st.cov.bytes += resp.num_bytes_downloaded or len(resp.content)
                status = resp.status_code
                if status == 200:
                    return self._data(resp, where)
                message = _error_text(resp)
                if status == 429 or status >= 500:
                    problem = f"{where} answered {status}: {message}"
                    delay = retry_after_seconds(resp.headers.get("Retry-After"))
                elif status in (401, 403):
                    tenant = f" (tenant {cfg.tenant})" if cfg.tenant and status == 403 else ""
                    raise _Fatal(
                        f"{where} answered {status}{tenant}: {self._auth_hint()}", auth=True
                    )
                elif status == 400 and (shrink := classify_400(message)) is not None:
                    raise _Shrink(shrink[0], f"{where} answered 400: {message}", shrink[1])
                elif status in (413, 414, 431):
                    raise _Shrink("size", f"{where} answered {status}: request too large")
                else:
                    raise _Fatal(f"{where} answered {status}: {message}")
            if attempt >= cfg.retries:
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                raise _Fatal(problem + tries, transient=True)
            backoff = cfg.backoff_seconds * (2**attempt)
            self._sleep(min(cfg.max_backoff_seconds, delay if delay is not None else backoff))
            attempt += 1

    @staticmethod
    def _data(resp: httpx.Response, where: str) -> Any:
        try:
            body = resp.json()
        except ValueError:
            raise _Fatal(f"{where} answered 200 with a body that is not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            what = body.get("error") if isinstance(body, dict) else None
            raise _Fatal(f"{where} answered 200 without a success status ({what or 'no data'})")
        return body["data"]

    # -- series: which nodes have logs at all -------------------------------------------
    def _series(self, st: _Fetch, nodes: tuple[str, ...], start: int, end: int) -> set[str] | None:
        params: list[tuple[str, str | int]] = [
            ("match[]", self._selector(st, nodes)),
            ("start", start),
            ("end", end),
        ]
        try:
            data = self._call(st, SERIES, params)
        except _Shrink as exc:
            st.cov.errors.append(
                f"series lookup refused ({exc}); nodes without hits count as missing"
            )
            return None
        except _Fatal as exc:
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
    def _selector(self, st: _Fetch, nodes: Sequence[str]) -> str:
        return selector_for(self.config, nodes, st.ctx.node_addresses)

    def query_text(self, st: _Fetch, nodes: Sequence[str], anchors: Sequence[str]) -> str:
        return build_query(self.config, nodes, anchors, st.ctx.node_addresses)

    def _fits(self, st: _Fetch, nodes: Sequence[str], anchors: Sequence[str]) -> bool:
        return len(quote_plus(self.query_text(st, nodes, anchors))) <= self.config.max_query_bytes

    def _plan(
        self, st: _Fetch, nodes: tuple[str, ...], anchors: tuple[str, ...]
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

    def _chunks(self, st: _Fetch, unit: _Unit) -> list[_Unit]:
        out = []
        t = unit.cursor
        while t < unit.end:
            e = min(unit.end, t + st.max_window)
            out.append(_Unit(unit.nodes, unit.anchors, t, e))
            t = e
        return out

    def _run_all(
        self, st: _Fetch, nodes: tuple[str, ...], literals: tuple[str, ...], start: int, end: int
    ) -> None:
        queue: deque[_Unit] = deque()
        if not self.config.pushdown:
            literals = ()
        for n, a in self._plan(st, nodes, literals):
            queue.extend(self._chunks(st, _Unit(n, a, start, end)))
        while queue:
            unit = queue.popleft()
            try:
                self._run_unit(st, unit)
            except _Shrink as exc:
                try:
                    queue.extendleft(reversed(self._shrink(st, unit, exc)))
                except _Fatal as fatal:
                    st.cov.errors.append(str(fatal))
            except _Fatal as exc:
                st.cov.errors.append(str(exc))
                if exc.stop:
                    st.stopped = exc
                    return

    def _shrink(self, st: _Fetch, unit: _Unit, exc: _Shrink) -> list[_Unit]:
        """Smaller queries covering what `unit` had left; _Fatal when none is possible."""
        st.shrinks += 1
        if st.shrinks > MAX_SHRINKS:
            raise _Fatal(f"{exc} (gave up after {MAX_SHRINKS} smaller queries)", stop=False)
        rest = replace(unit, start=unit.cursor, cursor=unit.cursor)
        span = rest.end - rest.start
        if exc.kind == "limit":
            new = exc.value if exc.value else st.limit // 2
            if new < 1 or new >= st.limit:
                raise _Fatal(str(exc), stop=False)
            st.limit = new
            return [rest]
        if exc.kind == "range":
            new = exc.value - _NS if exc.value and exc.value > 2 * _NS else span // 2
            new = min(new, span // 2) if new >= span else new
            if new < MIN_WINDOW_NS:
                raise _Fatal(str(exc), stop=False)
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
            raise _Fatal(str(exc), stop=False)
        # volume, or series with one node left: halve the time range
        if span < 2 * MIN_WINDOW_NS:
            raise _Fatal(str(exc), stop=False)
        mid = rest.start + span // 2
        return [replace(rest, end=mid), _Unit(rest.nodes, rest.anchors, mid, rest.end)]

    def _run_unit(self, st: _Fetch, unit: _Unit) -> None:
        """Page through one unit: forward, resuming at the last timestamp inclusive."""
        query = self.query_text(st, unit.nodes, unit.anchors)
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
                self._keep(st, entry)
            if len(entries) < limit:
                return
            last = max(e[2] for e in entries)
            edge = {(e[1], e[2], e[3]) for e in entries if e[2] == last}
            st.edge = st.edge | edge if last == st.edge_ts else edge
            st.edge_ts = last
            if last <= unit.cursor:  # a whole page at one nanosecond: cannot page past it
                self._same_ns(st, query, last, limit)
                unit.cursor = last + 1
            else:
                unit.cursor = last

    def _same_ns(self, st: _Fetch, query: str, ts: int, limit: int) -> None:
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
        except _Shrink:
            entries = None
        if entries is not None:
            st.ok_queries += 1
            for entry in entries:
                self._keep(st, entry)
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

    def _backward(
        self, st: _Fetch, query: str, t: int, step: int, limit: int, what: str
    ) -> list[_Entry] | None:
        """The newest `limit` lines of `query` in the bucket ending at `t` (ns), or None with
        the error in coverage (liveness reads never fail the fetch)."""
        params: list[tuple[str, str | int]] = [
            ("query", query),
            ("direction", "backward"),
            ("start", t - step),  # both bucket ends: Loki's range is (t - step, t]
            ("end", t + 1),
            ("limit", limit),
        ]
        try:
            entries = self._entries(self._call(st, QUERY_RANGE, params), st)
        except (_Fatal, _Shrink) as exc:
            st.cov.errors.append(f"{what} (liveness): {exc}")
            st.cov.retryable = st.cov.retryable or getattr(exc, "transient", False)
            return None
        st.ok_queries += 1
        return entries

    def _entries(self, data: Any, st: _Fetch) -> list[_Entry]:
        if not isinstance(data, dict) or data.get("resultType") != "streams":
            what = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise _Fatal(f"loki at {self.config.url} answered a {what!r} result, not streams")
        out: list[_Entry] = []
        try:
            for stream in data.get("result") or []:
                labels = {str(k): str(v) for k, v in (stream.get("stream") or {}).items()}
                key = tuple(sorted(labels.items()))
                for value in stream.get("values") or []:
                    out.append((labels, key, int(value[0]), str(value[1])))
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            raise _Fatal(
                f"loki at {self.config.url} answered streams in an unknown shape"
            ) from None
        return out

    # -- entries -> records -------------------------------------------------------------
    def _keep(self, st: _Fetch, entry: _Entry) -> None:
        """One entry of a page. Entries at the previous page's last timestamp come again on
        the next page (it starts there, inclusive): those already seen are dropped, as are
        entries already kept (a line matching anchors of two split queries). Only kept
        entries and the page edge are remembered, so memory follows the records."""
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
        if node is None:
            st.unknown_hosts.add(str(raw_host))
            return
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
            st.records.append(self._line_record(node, labels, ts, text))
            if want > len(tail):
                st.hits.append(_Hit(len(st.records) - 1, labels, ts, line, want - len(tail)))

    def _clean(self, text: str, st: _Fetch) -> str:
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

    # -- continuation lines ------------------------------------------------------------
    def _fill_context(self, st: _Fetch, window_end: int) -> None:
        """For hits whose anchor wants following lines: read the stream after the hit.
        One read serves every later hit of the same stream it already covers (a traceback
        naming ChildFailedError twice costs one query)."""
        cfg = self.config
        queries = 0
        skipped = 0
        # per stream: the last read and whether it ended before its limit (then it holds
        # every line of the stream up to its end, enough for a later hit inside it)
        reads: dict[tuple[tuple[str, str], ...], tuple[list[tuple[int, str]], bool]] = {}
        for hit in sorted(st.hits, key=lambda h: h.ts):
            key = tuple(sorted(hit.labels.items()))
            entries, complete = reads.get(key, ([], False))
            after = _lines_after(entries, hit)
            if after is None or (len(after) < hit.want and not complete):
                if queries >= cfg.max_context_queries:
                    skipped += 1
                    continue
                queries += 1
                got = self._context_read(st, hit, window_end)
                if got is None:
                    continue
                reads[key] = got
                after = _lines_after(got[0], hit) or []
            more = [self._clean(p, st) for p in after[: hit.want]]
            if more:
                rec = st.records[hit.record_index]
                st.records[hit.record_index] = rec.model_copy(
                    update={"text": rec.text + "\n" + "\n".join(more)}
                )
        if skipped:
            st.cov.errors.append(
                f"{skipped} hit(s) kept without their continuation lines "
                f"(max_context_queries={cfg.max_context_queries})"
            )

    def _context_read(
        self, st: _Fetch, hit: _Hit, window_end: int
    ) -> tuple[list[tuple[int, str]], bool] | None:
        """(ts, line) of the hit's stream, unfiltered, from the hit for context_seconds, and
        whether the read was complete (fewer entries than its limit)."""
        end = min(window_end, hit.ts + int(self.config.context_seconds * _NS))
        params: list[tuple[str, str | int]] = [
            ("query", stream_selector(hit.labels)),
            ("direction", "forward"),
            ("start", hit.ts),
            ("end", max(end, hit.ts + 1)),
            ("limit", min(st.limit, hit.want + 100)),
        ]
        try:
            entries = self._entries(self._call(st, QUERY_RANGE, params), st)
        except (_Fatal, _Shrink) as exc:
            st.cov.errors.append(f"continuation lines of {locator(hit.labels, hit.ts)}: {exc}")
            return None
        st.ok_queries += 1
        limit = int(params[-1][1])
        ordered = sorted(((e[2], e[3]) for e in entries), key=lambda e: e[0])
        return ordered, len(entries) < limit

    # -- liveness: where each node's streams and its training progress stop ---------------
    def _liveness(
        self, st: _Fetch, nodes: tuple[str, ...], progress: tuple[str, ...], start: int, end: int
    ) -> None:
        """Silence and progress without pulling every line (the files connector reads whole
        files and learns both on the way; a pushed-down query only sees anchor lines).

        1. `sum by (<node label>, <stream labels>) (count_over_time({<nodes>}[<step>]))`: per
           stream of each node, the last bucket holding lines. It becomes that stream's
           `last_of_file` record (LogBatch `tails`, like the files connector's last
           timed line of a file), timed as the interval the bucket covers: `time` its start,
           `time_latest` its end, quality `inherited` (written somewhere in between).
        2. The same with the progress anchors as `|~` filter, by node: the last bucket with a
           progress line. Nodes whose last progress fell in the same bucket are read together
           with one backward query over that bucket (`limit` = the lines the count found), so
           the last progress lines come back whatever the other nodes logged later; they go to
           LogBatch `progress` like the files connector's last progress line of a file.

        A failed liveness query leaves the candidate lines as they are: its error makes the
        coverage partial."""
        step = self._step_ns(end - start)
        points = max(1, -(-(end - start) // step))
        first, last = start + step, start + points * step  # bucket k covers (t - step, t]
        tails = self._buckets(st, nodes, (), "tails", first, last, step)
        for labels, t, count, query in tails or []:
            node = st.index.resolve(labels.get(self.config.node_label))
            if node is None:
                continue
            st.streams_nodes.add(node)  # it has logs in the window, anchor lines or not
            st.tail_selectors.append(self._series_selector(labels))
            st.tails.append(
                RawRecord(
                    source="loki",
                    node=node,
                    locator=QueryAt(language="logql", query=query, at_ns=t),
                    time=from_ns(t - step),
                    time_quality="inherited",
                    time_latest=from_ns(t),
                    text=(
                        f"{count} line(s) of {stream_selector(labels)} in the "
                        f"{step // _NS} s up to {from_ns(t).strftime('%H:%M:%S')}: its last "
                        "lines in the window (count_over_time)"
                    ),
                    stream=self._stream(labels),
                    last_of_file=True,
                )
            )
        self._exact_tails(st, step)
        if not progress or not self.config.pushdown:
            return
        found = self._buckets(st, nodes, progress, "progress", first, last, step)
        if found:
            self._last_progress(st, found, progress, step)

    def _exact_tails(self, st: _Fetch, step: int) -> None:
        """A node whose every stream stopped at least two buckets before most other nodes'
        (a silence candidate) gets its latest stream's real last line: one backward read of
        that bucket, `limit` 1. The tail becomes that exact line (time, text, locator), so
        the evidence of a silence is the line the node wrote last. A healthy job, where all
        nodes log to the end, costs nothing here."""
        by_node: dict[str, int] = {}
        for i, rec in enumerate(st.tails):
            j = by_node.get(rec.node)
            if j is None or rec.time_latest > st.tails[j].time_latest:  # type: ignore[operator]
                by_node[rec.node] = i
        ends = {n: to_ns(st.tails[i].time_latest) for n, i in by_node.items()}  # type: ignore[arg-type]
        if len(ends) < 2:
            return
        early = []
        for node, t in ends.items():
            others = sorted(v for n, v in ends.items() if n != node)
            if t + 2 * step <= others[(len(others) - 1) // 2]:  # median_low of the others
                early.append((t, node))
        for _, node in sorted(early)[: self.config.max_progress_queries]:
            i = by_node[node]
            rec = st.tails[i]
            t = to_ns(rec.time_latest)  # type: ignore[arg-type]
            selector = st.tail_selectors[i]
            entries = self._backward(st, selector, t, step, 1, f"last line of {node}")
            if not entries:
                continue
            labels, _, ts, line = max(entries, key=lambda e: e[2])
            st.tails[i] = rec.model_copy(
                update={
                    "locator": locator(labels, ts),
                    "time": from_ns(ts),
                    "time_quality": "exact",
                    "time_latest": None,
                    "text": self._clean(line.split("\n", 1)[0], st),
                }
            )

    def _step_ns(self, span_ns: int) -> int:
        """The liveness bucket: configured, else window / LIVENESS_POINTS, at least
        MIN_STEP_SECONDS, in whole seconds (a LogQL range like `[29s]`)."""
        seconds = self.config.liveness_step_seconds or max(
            MIN_STEP_SECONDS, span_ns / _NS / LIVENESS_POINTS
        )
        return max(1, int(-(-seconds // 1))) * _NS

    def _count_query(
        self, st: _Fetch, nodes: Sequence[str], literals: Sequence[str], step: int
    ) -> str:
        labels = [self.config.node_label]
        if not literals:  # per stream: like with like (a quiet kern.log is not a silent node)
            labels += [n for n in self.config.stream_labels if n != self.config.node_label]
        inner = self.query_text(st, nodes, literals)
        return f"sum by ({', '.join(labels)}) (count_over_time({inner} [{step // _NS}s]))"

    def _series_selector(self, labels: Mapping[str, str]) -> str:
        """One series' exact labels and the configured matchers, as a stream selector."""
        body = [f"{k}={logql_string(v)}" for k, v in sorted(labels.items())]
        body += self.config.matchers()
        return "{" + ", ".join(body) + "}"

    def _series_query(self, labels: Mapping[str, str], literals: Sequence[str], step: int) -> str:
        """A reopenable query of one series: its exact labels and the configured matchers."""
        inner = self._series_selector(labels)
        if literals:
            inner += " " + line_filter(literals)
        return f"count_over_time({inner} [{step // _NS}s])"

    def _buckets(
        self,
        st: _Fetch,
        nodes: tuple[str, ...],
        literals: tuple[str, ...],
        what: str,
        first: int,
        last: int,
        step: int,
    ) -> list[tuple[dict[str, str], int, int, str]] | None:
        """(series labels, last bucket end with lines, its count, the series' own query) per
        series of the count query; None when the query failed (the error is in coverage).
        Loki's series limit splits the nodes; its range limit cuts the time in chunks."""
        last_of: dict[tuple[tuple[str, str], ...], tuple[int, int]] = {}
        queue: deque[tuple[tuple[str, ...], int, int]] = deque([(nodes, first, last)])
        while queue:
            part, lo, hi = queue.popleft()
            params: list[tuple[str, str | int]] = [
                ("query", self._count_query(st, part, literals, step)),
                ("start", lo),
                ("end", hi),
                ("step", f"{step // _NS}s"),
            ]
            try:
                data = self._call(st, QUERY_RANGE, params)
                series = self._matrix(data)
            except _Shrink as exc:
                more = self._split_buckets(part, lo, hi, step, exc)
                if more is None:
                    st.cov.errors.append(f"{what} query (liveness): {exc}")
                    return None
                queue.extendleft(reversed(more))
                continue
            except _Fatal as exc:
                st.cov.errors.append(f"{what} query (liveness): {exc}")
                st.cov.retryable = st.cov.retryable or exc.transient
                return None
            st.ok_queries += 1
            for labels, values in series:
                key = tuple(sorted(labels.items()))
                for t, count in values:
                    if count > 0 and t >= last_of.get(key, (-1, 0))[0]:
                        last_of[key] = (t, count)
        return [
            (dict(key), t, count, self._series_query(dict(key), literals, step))
            for key, (t, count) in sorted(last_of.items())
        ]

    @staticmethod
    def _split_buckets(
        nodes: tuple[str, ...], lo: int, hi: int, step: int, exc: _Shrink
    ) -> list[tuple[tuple[str, ...], int, int]] | None:
        if exc.kind == "series" and len(nodes) > 1:
            h = len(nodes) // 2
            return [(nodes[:h], lo, hi), (nodes[h:], lo, hi)]
        if exc.kind in ("range", "volume") and hi - lo >= 2 * step:
            span = exc.value if exc.kind == "range" and exc.value else (hi - lo) // 2
            n = max(1, min((hi - lo) // step // 2, span // step - 1))  # buckets per chunk
            out = []
            t = lo
            while t <= hi:
                out.append((nodes, t, min(hi, t + (n - 1) * step)))
                t += n * step
            return out
        return None

    def _matrix(self, data: Any) -> list[tuple[dict[str, str], list[tuple[int, int]]]]:
        """(labels, [(ns, value)]) of a `matrix` result (float seconds, value strings)."""
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            what = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise _Fatal(f"loki at {self.config.url} answered a {what!r} result, not a matrix")
        out = []
        try:
            for item in data.get("result") or []:
                labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
                values = [
                    (round(float(v[0]) * 1000) * 1_000_000, int(float(v[1])))
                    for v in item.get("values") or []
                ]
                out.append((labels, values))
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            raise _Fatal(
                f"loki at {self.config.url} answered a matrix in an unknown shape"
            ) from None
        return out

    def _last_progress(
        self,
        st: _Fetch,
        found: list[tuple[dict[str, str], int, int, str]],
        literals: tuple[str, ...],
        step: int,
    ) -> None:
        """Read the last progress lines: per bucket, one backward query for the nodes whose
        last progress fell in it, `limit` = their count there (more than a page: split)."""
        per_bucket: dict[int, dict[str, int]] = {}
        for labels, t, count, _ in found:
            node = st.index.resolve(labels.get(self.config.node_label))
            if node is not None:
                group = per_bucket.setdefault(t, {})
                group[node] = group.get(node, 0) + count
        reads: list[tuple[int, tuple[str, ...], int]] = []
        for t, group in sorted(per_bucket.items(), reverse=True):
            batch: list[str] = []
            total = 0
            for node, count in sorted(group.items()):
                if batch and total + count > st.limit:
                    reads.append((t, tuple(batch), total))
                    batch, total = [], 0
                batch.append(node)
                total += count
            reads.append((t, tuple(batch), min(total, st.limit)))
        skipped = reads[self.config.max_progress_queries :]
        for t, group_nodes, limit in reads[: self.config.max_progress_queries]:
            query = self.query_text(st, group_nodes, literals)
            entries = self._backward(st, query, t, step, limit, "last progress lines")
            for labels, _, ts, line in entries or []:
                node = st.index.resolve(labels.get(self.config.node_label))
                if node is None:
                    continue
                first = self._clean(line.split("\n", 1)[0], st)
                st.progress.append(self._line_record(node, labels, ts, first))
        if skipped:
            n = sum(len(g) for _, g, _ in skipped)
            st.cov.errors.append(
                f"last progress lines of {n} node(s) not read "
                f"(max_progress_queries={self.config.max_progress_queries})"
            )

    # -- coverage -------------------------------------------------------------------------
    def _finish(self, st: _Fetch, nodes: tuple[str, ...], series_nodes: set[str] | None) -> None:
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
        elif not cov.nodes_read:
            cov.status = "empty"
        elif cov.nodes_missing:
            cov.status = "partial"
        else:
            cov.status = "ok"


def _lines_after(entries: list[tuple[int, str]], hit: _Hit) -> list[str] | None:
    """The lines following the hit's entry in a continuation read (None: not covered)."""
    for k, (ts, line) in enumerate(entries):
        if ts == hit.ts and line == hit.line:
            return [p for _, ln in entries[k + 1 :] for p in ln.split("\n")]
        if ts > hit.ts:  # the hit itself is not in the read
            return None
    return None


def _error_text(resp: httpx.Response) -> str:
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
