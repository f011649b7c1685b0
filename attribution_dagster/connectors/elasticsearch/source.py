"""A LogSource over a Query DSL back-end (Elasticsearch, OpenSearch): the one mechanism
both `kind: elasticsearch` (client.py) and `kind: opensearch` (connectors/opensearch/) use;
they differ only in the client, the point-in-time calls and how their errors read.

One fetch opens a point in time on the index (so every page sees the same documents) and:

1. pages through the job's nodes and window with the anchors pushed down as a query, sorted
   by time and the tiebreaker, by `search_after`; each hit is checked here for the literal
   (a `match_phrase` can match more than a substring does), cut at the line cap, and kept
   with a `SearchHit` locator (`<index>/_doc/<id>` reopens it);
2. reads the lines after a hit whose anchor asks for continuation lines (a traceback);
3. per node, the newest document of each stream (`collapse` on `stream_field`): the tails,
   where each stream stops (the engine's silence test), and the newest lines holding a
   progress anchor: the last progress of each stream (the engine's progress test);
4. closes the point in time.

A failed search costs what it would have read, not the fetch: its error goes into coverage
(status partial); only when nothing at all could be read (the point in time cannot be
opened) does the fetch raise SourceError, as the LogSource contract asks. Transient failures
(429, 5xx, timeouts, dropped connections) are retried first, as connectors/http.py does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from attribution_dagster.connectors import http
from attribution_dagster.connectors.base import SourceError, SourceLimits
from attribution_dagster.connectors.elasticsearch import query as q
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, LogBatch, RawRecord, SourceCoverage
from attribution_dagster.core.formats.kube_events import parse_time
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.locators import SearchHit
from attribution_dagster.core.secrets import remember
from attribution_dagster.core.settings import Window

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class SearchConfig(http.HttpBackendConfig):
    """The keys of every Query DSL log block (`kind: elasticsearch`, `kind: opensearch`).

    The defaults follow the Elastic Common Schema that Filebeat, Elastic Agent, Fluent Bit's
    `es` / `opensearch` outputs and Data Prepper write (`@timestamp`, `host.name`,
    `message`, `log.file.path`); a block names other fields when an index uses its own
    mapping (docs/elasticsearch.md). Retries follow connectors/http.py: 429 / 5xx / timeouts
    / dropped connections, exponential backoff, Retry-After where the client exposes it."""

    url: str = Field(description="base URL (a node or a load balancer)")
    index: str = Field(
        default="logs-*", description="index, alias, data stream or pattern to search"
    )
    time_field: str = Field(default="@timestamp", description="the document's time (date)")
    node_field: str = Field(default="host.name", description="keyword field naming the node")
    message_field: str = Field(default="message", description="the log line (text)")
    stream_field: str | None = Field(
        default="log.file.path",
        description="keyword field naming the file or stream a line belongs to (one tail "
        "each); None: one stream per node",
    )
    filters: dict[str, str] = Field(
        default_factory=dict,
        description="extra exact filters, field -> value (`{data_stream.dataset: system.syslog}`)",
    )
    anchor_query: Literal["match_phrase", "wildcard", "none"] = Field(
        default="match_phrase",
        description="how anchors are pushed down: `match_phrase` on the analysed message "
        "(fast; misses a literal that is part of a longer token), `wildcard` on "
        "`wildcard_field` (a `wildcard` or `keyword` field: exact substrings), `none` (reads "
        "every line of the nodes and filters here). Every hit is checked here either way.",
    )
    wildcard_field: str | None = Field(
        default=None, description="field for anchor_query: wildcard; default message_field"
    )
    tiebreaker: str = Field(
        default="_shard_doc",
        description="the sort after time that makes it total, for search_after: `_shard_doc` "
        "(Elasticsearch, OpenSearch >= 3.3), `_id`, or a unique keyword field",
    )
    api_key_env: str | None = Field(default=None, description="NAME of the env var: an API key")
    basic_user: str | None = Field(default=None, description="HTTP basic-auth user")
    basic_password_env: str | None = Field(
        default=None, description="NAME of the env var holding the basic-auth password"
    )
    bearer_token_env: str | None = Field(
        default=None, description="NAME of the env var holding a bearer token"
    )
    verify: bool = Field(default=True, description="verify the server's TLS certificate")
    ca_file: str | None = Field(default=None, description="CA bundle for the server's certificate")
    page_size: int = Field(default=1000, ge=1, le=10000, description="hits per search request")
    max_records: int = Field(
        default=20000, ge=1, description="records kept per fetch; beyond: coverage partial"
    )
    keep_alive: str = Field(default="2m", description="point-in-time keep-alive per request")
    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")
    liveness: bool = Field(
        default=True,
        description="also ask where each node's streams and its training progress stop "
        "(two sorted searches per node: the engine's silence and progress tests)",
    )
    progress_scan: int = Field(
        default=50, ge=1, le=10000,
        description="newest progress hits per node read to find each stream's last one",
    )  # fmt: skip
    max_context_queries: int = Field(
        default=32, ge=0, description="continuation-line searches per fetch"
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http.checked_url(
            v, "api_key_env, basic_user + basic_password_env, or bearer_token_env"
        )

    @model_validator(mode="after")
    def _auth(self) -> SearchConfig:
        ways = [bool(self.api_key_env), bool(self.basic_user), bool(self.bearer_token_env)]
        if sum(ways) > 1:
            raise ValueError("use one of api_key_env, basic_user, bearer_token_env")
        if bool(self.basic_user) != bool(self.basic_password_env):
            raise ValueError("basic_user and basic_password_env go together")
        return self

    def secret(self, name: str, environ: Mapping[str, str] | None) -> str:
        """The value of the env var `name`; SourceError naming it (never a value) if empty."""
        value = (os.environ if environ is None else environ).get(name, "").strip()
        if not value:
            raise SourceError(f"{self.source_name}: environment variable {name} is empty")
        user = self.basic_user if name == self.basic_password_env else None
        remember(value, user=user)
        return value


@dataclass
class _Hit:
    """A kept record whose anchor wants `want` more lines of its stream."""

    index: int  # into _Run.records
    raw_node: str
    stream: str | None
    sort: list[Any]
    want: int


@dataclass
class _Run:
    ctx: ExecutionContext
    window: Window
    nodes: NodeIndex
    cov: SourceCoverage
    cap: int
    literals: tuple[str, ...]
    progress_literals: tuple[str, ...]
    context: dict[str, int]
    pit: str = ""
    records: list[RawRecord] = field(default_factory=list)
    tails: list[RawRecord] = field(default_factory=list)
    progress: list[RawRecord] = field(default_factory=list)
    hits: list[_Hit] = field(default_factory=list)
    nodes_seen: set[str] = field(default_factory=set)
    unknown_hosts: set[str] = field(default_factory=set)
    ok_searches: int = 0
    failed_searches: int = 0


class SearchSource:
    """A LogSource reading one Query DSL back-end: the mechanism. A subclass is the
    transport: how its client is built, how a point in time is opened and closed, how a
    search is sent, and what its errors say (status, body, a dropped connection,
    Retry-After). `client`, `environ` and `sleep` are for tests."""

    def __init__(
        self,
        config: SearchConfig,
        *,
        cluster: str | None = None,
        client: Any = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.name = config.source_name
        self._client = client
        self._environ = environ
        self._sleep = sleep

    # -- the transport: one subclass per client -------------------------------------------
    def build_client(self) -> Any:
        """The client for this block; SourceError when a secret is missing."""
        raise NotImplementedError

    def open_pit(self, client: Any) -> str | None:
        """Open a point in time on `config.index`; its id (None: the answer had none)."""
        raise NotImplementedError

    def close_pit(self, client: Any, pit: str) -> None:
        raise NotImplementedError

    def send_search(self, client: Any, body: dict[str, Any]) -> dict[str, Any]:
        """One search request (`pit` in the body, no index); the answer's body."""
        raise NotImplementedError

    def status_of(self, exc: BaseException) -> int | None:
        """The HTTP status of a failed request; None when no answer came."""
        raise NotImplementedError

    def body_of(self, exc: BaseException) -> Any:
        """The answer's body of a failed request (a dict with `error`, or text)."""
        raise NotImplementedError

    def dropped(self, exc: BaseException) -> bool:
        """A refused or dropped connection, or a timeout: trying again may help."""
        raise NotImplementedError

    def retry_after(self, exc: BaseException) -> float | None:
        """The answer's Retry-After in seconds, when the client keeps the headers."""
        return None

    # -- LogSource ------------------------------------------------------------------------
    def fetch_logs(
        self,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        limits: SourceLimits | None = None,
    ) -> LogBatch:
        usable = [a for a in anchors if a.literal and "\n" not in a.literal]
        run = _Run(
            ctx=ctx,
            window=window,
            nodes=NodeIndex.of(ctx),
            cov=SourceCoverage(source=self.name),
            # the analysis's cap can lower the source's own, not raise it
            cap=min(self.config.max_line_bytes, (limits and limits.max_line_bytes) or 1 << 62),
            literals=tuple(dict.fromkeys(a.literal for a in usable if not a.last_only)),
            progress_literals=tuple(dict.fromkeys(a.literal for a in usable if a.last_only)),
            context={a.literal: a.context_after for a in usable if a.context_after > 0},
        )
        client = self.client()
        run.pit = self._open(client)
        try:
            if run.literals:
                self._read_hits(client, run)
            self._fill_context(client, run)
            if self.config.liveness:
                for node in dict.fromkeys(ctx.nodes):
                    self._liveness(client, run, node)
        finally:
            try:
                self.close_pit(client, run.pit)
            except Exception:  # noqa: BLE001, S110 - the keep-alive frees it anyway
                pass
        self._finish(run)
        return LogBatch(
            records=run.records, tails=run.tails, progress=run.progress, coverage=run.cov
        )

    # -- requests -------------------------------------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            self._client = self.build_client()
        return self._client

    def _retrying(self, request: Callable[[], Any]) -> Any:
        """`request()` again after a transient failure, as connectors/http.py's `send`
        does: the block's retries, backoff, cap and deadline, the server's Retry-After."""
        policy, started, waited, attempt = self.config.retry, time.monotonic(), 0.0, 0
        while True:
            try:
                return request()
            except Exception as exc:  # noqa: BLE001 - the caller words it
                after = self.retry_after(exc)
                spent = max(time.monotonic() - started, waited)
                if not self.transient(exc) or not http.may_retry(policy, attempt, after, spent):
                    raise
                delay = policy.delay(attempt, after)
            self._sleep(delay)
            waited += delay
            attempt += 1

    def _open(self, client: Any) -> str:
        where = f"{self.name}: cannot open a point in time on {self.config.index!r} at "
        try:
            pit = self._retrying(lambda: self.open_pit(client))
        except Exception as exc:  # noqa: BLE001 - every client error becomes one SourceError
            raise SourceError(
                f"{where}{self.config.url}: {self.error_text(exc)}", transient=self.transient(exc)
            ) from None
        if not pit:
            raise SourceError(f"{where}{self.config.url}: the answer holds no point-in-time id")
        return str(pit)

    def _search(
        self, client: Any, run: _Run, what: str, **body: Any
    ) -> list[dict[str, Any]] | None:
        """One search inside the point in time: its hits, or None with the error in coverage."""
        run.cov.queries += 1
        body["pit"] = {"id": run.pit, "keep_alive": self.config.keep_alive}
        try:
            resp = self._retrying(lambda: self.send_search(client, body))
        except Exception as exc:  # noqa: BLE001 - recorded in coverage, the fetch goes on
            run.failed_searches += 1
            run.cov.errors.append(f"{what}: {self.error_text(exc)}"[:500])
            run.cov.retryable = run.cov.retryable or self.transient(exc)
            return None
        run.ok_searches += 1
        run.pit = str(resp.get("pit_id") or run.pit)  # the id may change between requests
        if resp.get("timed_out") or (resp.get("_shards") or {}).get("failed"):
            run.cov.errors.append(f"{what}: some shards failed or timed out; hits may be missing")
        hits = list((resp.get("hits") or {}).get("hits") or [])
        run.cov.lines += len(hits)
        return hits

    def transient(self, exc: BaseException) -> bool:
        """The client's error in the terms of `connectors.http.is_transient`: a dropped
        connection or a timeout is transient, else the answer's status decides."""
        if self.dropped(exc):
            return True
        status = self.status_of(exc)
        return status is not None and http.is_transient(status)

    def error_text(self, exc: BaseException) -> str:
        """The server's reason (`error.root_cause[0]`) or the exception, in one line."""
        status, body, reason = self.status_of(exc), self.body_of(exc), ""
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            err = body["error"]
            causes = err.get("root_cause") or [err]
            first = causes[0] if causes and isinstance(causes[0], dict) else err
            reason = f"{first.get('type', '')}: {first.get('reason', '')}".strip(": ")
        elif isinstance(body, str) and status:
            reason = body  # a proxy's or the security plugin's plain-text answer
        text = reason or str(exc) or type(exc).__name__
        text = " ".join(text.split())[:300]
        return f"HTTP {status}: {text}" if status else text

    # -- 1. hits of the anchors -----------------------------------------------------------
    def _read_hits(self, client: Any, run: _Run) -> None:
        cfg = self.config
        query = q.search_query(cfg, spellings(run.ctx), run.window.start, run.window.end,
                               run.literals)  # fmt: skip
        after: list[Any] | None = None
        while True:
            extra = {"search_after": after} if after is not None else {}
            hits = self._search(client, run, "anchor search", query=query,
                                sort=q.sort(cfg, "asc"), size=cfg.page_size, **extra)  # fmt: skip
            if hits is None:
                return
            for hit in hits:
                self._keep(run, hit)
            if len(run.records) >= cfg.max_records:
                run.cov.errors.append(
                    f"more than max_records={cfg.max_records} lines hold an anchor; the rest "
                    "were not read"
                )
                return
            if len(hits) < cfg.page_size:
                return
            after = hits[-1].get("sort")

    def _keep(self, run: _Run, hit: Mapping[str, Any]) -> None:
        doc = self._doc(run, hit)
        if doc is None:
            return
        node, raw_node, t, text, stream = doc
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if not any(lit in part for lit in run.literals):
                continue  # pushed down loosely (match_phrase) or a multi-line message
            want = max((n for lit, n in run.context.items() if lit in part), default=0)
            lines = [self._clean(run, p) for p in parts[i : i + 1 + want]]
            run.records.append(self._record(run, hit, node, t, "\n".join(lines), stream))
            if want > len(lines) - 1:
                run.hits.append(
                    _Hit(len(run.records) - 1, raw_node, stream, list(hit.get("sort") or []),
                         want - (len(lines) - 1))
                )  # fmt: skip

    def _doc(
        self, run: _Run, hit: Mapping[str, Any]
    ) -> tuple[str, str, datetime, str, str | None] | None:
        """(node, node as indexed, time, message, stream) of a hit; None when it names no
        job node or has no time or message."""
        cfg = self.config
        source = hit.get("_source") or {}
        raw_node = q.field_value(source, cfg.node_field)
        node = run.nodes.resolve(str(raw_node)) if raw_node is not None else None
        if node is None:
            run.unknown_hosts.add(str(raw_node))
            return None
        t = doc_time(q.field_value(source, cfg.time_field))
        text = q.field_value(source, cfg.message_field)
        if t is None or not isinstance(text, str):
            return None
        run.nodes_seen.add(node)
        stream = q.field_value(source, cfg.stream_field) if cfg.stream_field else None
        return (
            node,
            str(raw_node),
            t,
            text.removesuffix("\n"),
            None if stream is None else str(stream),
        )

    def _record(
        self, run: _Run, hit: Mapping[str, Any], node: str, t: datetime, text: str,
        stream: str | None, last: bool = False,
    ) -> RawRecord:  # fmt: skip
        loc = SearchHit(
            index=str(hit.get("_index", self.config.index)),
            doc_id=str(hit.get("_id", "")),
            stream_key=f"{node} {stream or ''}".strip(),
            at_ns=to_ns(t),
        )
        return RawRecord(
            source=self.config.kind, node=node, locator=loc, time=t, time_quality="exact",
            text=text, stream=(stream or "").rstrip("/").rsplit("/", 1)[-1], last_of_file=last,
        )  # fmt: skip

    def _clean(self, run: _Run, text: str) -> str:
        text = text.removesuffix("\r")
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) > run.cap:
            run.cov.overlong_lines += 1
            return raw[: run.cap].decode("utf-8", "ignore")
        return text

    # -- 2. continuation lines ------------------------------------------------------------
    def _fill_context(self, client: Any, run: _Run) -> None:
        cfg = self.config
        todo, skipped = run.hits[: cfg.max_context_queries], run.hits[cfg.max_context_queries :]
        for h in todo:
            filters: list[dict[str, Any]] = [
                {"term": {cfg.node_field: h.raw_node}},
                q.window_clause(cfg, run.window.start, run.window.end),
            ]
            if cfg.stream_field and h.stream is not None:
                filters.append({"term": {cfg.stream_field: h.stream}})
            hits = self._search(client, run, "continuation lines",
                                query={"bool": {"filter": filters}}, sort=q.sort(cfg, "asc"),
                                size=h.want, search_after=h.sort)  # fmt: skip
            if not hits:
                continue
            texts = [str(q.field_value(x.get("_source") or {}, cfg.message_field) or "")
                     for x in hits]  # fmt: skip
            more = [self._clean(run, p) for t in texts for p in t.split("\n")][: h.want]
            rec = run.records[h.index]
            run.records[h.index] = rec.model_copy(update={"text": "\n".join([rec.text, *more])})
        if skipped:
            run.cov.errors.append(
                f"continuation lines of {len(skipped)} hit(s) not read "
                f"(max_context_queries={cfg.max_context_queries})"
            )

    # -- 3. liveness: where each stream and its progress stop ----------------------------
    def _liveness(self, client: Any, run: _Run, node: str) -> None:
        cfg = self.config
        names = spellings(run.ctx, node)
        extra: dict[str, Any] = {"size": 1}
        if cfg.stream_field:
            extra = {"size": 100, "collapse": {"field": cfg.stream_field}}
        query = q.search_query(cfg, names, run.window.start, run.window.end)
        hits = self._search(client, run, f"tails of {node}", query=query,
                            sort=q.sort(cfg, "desc"), **extra)  # fmt: skip
        for hit in hits or []:
            doc = self._doc(run, hit)
            if doc is not None:
                n, _, t, text, stream = doc
                line = self._clean(run, text.split("\n")[-1])
                run.tails.append(self._record(run, hit, n, t, line, stream, last=True))
        if not run.progress_literals or not hits:
            return
        query = q.search_query(cfg, names, run.window.start, run.window.end,
                               run.progress_literals)  # fmt: skip
        hits = self._search(client, run, f"last progress of {node}", query=query,
                            sort=q.sort(cfg, "desc"), size=cfg.progress_scan)  # fmt: skip
        done: set[str | None] = set()
        for hit in hits or []:
            doc = self._doc(run, hit)
            if doc is None or doc[4] in done:
                continue
            n, _, t, text, stream = doc
            lines = [p for p in text.split("\n") if any(lit in p for lit in run.progress_literals)]
            if lines:
                done.add(stream)
                run.progress.append(self._record(run, hit, n, t, self._clean(run, lines[-1]),
                                                 stream))  # fmt: skip

    # -- 4. coverage ----------------------------------------------------------------------
    def _finish(self, run: _Run) -> None:
        cov, nodes = run.cov, list(dict.fromkeys(run.ctx.nodes))
        cov.nodes_read = [n for n in nodes if n in run.nodes_seen]
        cov.nodes_missing = [n for n in nodes if n not in run.nodes_seen]
        cov.records = len(run.records)
        unknown = sorted(run.unknown_hosts - {"None"})
        if unknown:
            cov.errors.append(
                f"documents whose {self.config.node_field} is no job node skipped: "
                + ", ".join(unknown[:5])
            )
        if run.ok_searches == 0 and run.failed_searches:
            cov.status = "failed"
        elif run.failed_searches or any(not e.startswith("documents whose") for e in cov.errors):
            cov.status = "partial"
        elif not cov.nodes_read:
            cov.status = "empty"
        elif cov.nodes_missing:
            cov.status = "partial"
        else:
            cov.status = "ok"


# -- helpers ----------------------------------------------------------------------------------


def spellings(ctx: ExecutionContext, node: str | None = None) -> list[str]:
    """The names a node may be indexed under: its name and its known addresses."""
    nodes = [node] if node is not None else list(dict.fromkeys(ctx.nodes))
    out = list(nodes)
    for n in nodes:
        out += [str(a) for a in (ctx.node_addresses or {}).get(n, [])]
    return list(dict.fromkeys(out))


def doc_time(value: Any) -> datetime | None:
    """A document's time: RFC 3339 text, or epoch milliseconds (a `date` field's other form)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _EPOCH + timedelta(milliseconds=value)
    if isinstance(value, str) and value.isdigit():
        return _EPOCH + timedelta(milliseconds=int(value))
    return parse_time(value)


def to_ns(t: datetime) -> int:
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000
