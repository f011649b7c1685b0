"""Prometheus (PromQL HTTP API) as a metric source: the samples the metric parsers need,
for one job's nodes and window, with few queries and few bytes.

What is queried. The metric families are what the rules want (`MetricFamily`, passed by
pipeline.py from the parser catalog's `metrics:` specs, one family per spec:
`DCGM_FI_DEV_XID_ERRORS`, the ECC / remapped-row counters, the NVLink counters,
the IB link_downed counter and port states ...), plus `extra_metrics` from the
configuration (connectors import only core: the catalog is not read here). A metric no
parser consumes could never become an observation, so it is not
fetched unless asked for.

How (per job; `W` = window length + 1 s, every query evaluated at the window's end):

1. `GET /api/v1/labels?match[]={__name__=~"<all names>"}`: which of `node_labels` exist on
   these series at all, so later selectors try only those (a few, not six).
2. Per family, ONE screening query for all the job's nodes: the series that did something
   in the window, e.g. `changes(X{Hostname=~"(?i)(?:a|b)..."}[W]) > 0 or max_over_time(...) != 0`.
   The condition comes from the spec's mode, so a series the parsers would stay silent on
   (a constant zero gauge, an unchanged counter, a spare IB port down the whole time)
   moves no bytes. Names are kept with `label_replace` so two names of one family with the
   same labels stay apart.
3. For the families that had hits: the RAW samples of just those series (`X{...}[W]`, a
   range-vector instant query): the same samples a `.prom` file of that series holds, with
   their own timestamps. The engine orders cause before symptom by time, so we do not
   quantize event times to a step. Windows longer than `raw_max_window_seconds` use a
   subquery `X{...}[W:step]` instead, `step = step_seconds or max(15 s, W / 500)`, so a
   series yields at most about 500 points.
4. One presence query, `count by (<node labels>) (last_over_time(...))`, for coverage:
   which job nodes have any series of these families in the window.

Node matching is one regex per label for all nodes: short and full names and the
context's `node_addresses`, regex-escaped, case-insensitive, an optional domain and an
optional `:port` (`instance`). Each returned series is then resolved with `NodeIndex`
over `node_labels` in order; a series none of whose labels names a job node (a
Kubernetes dcgm-exporter `Hostname` that is the exporter pod) is not attributed to a node.

Why httpx and not prometheus-api-client: we need the status code of every answer
(401/403 vs 5xx vs 429), the bytes received, POST bodies for long selectors, a per-request
timeout and an injectable transport for tests; prometheus-api-client wraps `requests` and
raises one generic exception for all of those. Every request goes through
connectors/http.py: 429, 5xx and timeouts are retried with exponential backoff, honouring
`Retry-After`, within `retry_deadline_seconds`. The PromQL text is in prometheus/promql.py.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator

from attribution_dagster.connectors import http
from attribution_dagster.connectors.base import SourceError
from attribution_dagster.connectors.prometheus.promql import (
    Selectors,
    duration,
    exact_regex,
    fetch_selector,
    format_ts,
    promql_string,
    series_selector,
    step_seconds,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricFamily, MetricSample, SourceCoverage
from attribution_dagster.core.formats.promtext import NODE_LABELS
from attribution_dagster.core.hosts import NodeIndex, node_regex
from attribution_dagster.core.locators import QueryAt
from attribution_dagster.core.settings import Window

RAW_MAX_WINDOW_SECONDS = 12 * 3600.0


class PrometheusConfig(http.HttpBackendConfig):
    """`{kind: prometheus, url: ...}` under `clusters.<name>.metrics` in attribution.yaml."""

    kind: Literal["prometheus"] = "prometheus"
    url: str = Field(description="base URL, e.g. http://prometheus:9090 or a Mimir /prometheus")
    bearer_token_env: str | None = Field(
        default=None, description="NAME of the environment variable holding a bearer token"
    )
    basic_user: str | None = Field(default=None, description="user for basic auth")
    basic_password_env: str | None = Field(
        default=None, description="NAME of the environment variable holding the basic password"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="extra headers, e.g. X-Scope-OrgID for Mimir/Thanos"
    )
    verify_tls: bool | str = Field(
        default=True, description="verify TLS certificates; or the path of a CA bundle"
    )
    node_labels: tuple[str, ...] = Field(
        default=NODE_LABELS,
        description="labels that may name a node, in order of preference",
        min_length=1,
    )
    extra_selector: str = Field(
        default="",
        description='matchers added to every selector, e.g. cluster="atlas"',
    )
    extra_metrics: tuple[str, ...] = Field(
        default=(),
        description="more metric names to read (a change or a nonzero value is kept)",
    )
    step_seconds: float | None = Field(
        default=None, gt=0, description="step of long-window subqueries (default max(15s, W/500))"
    )
    raw_max_window_seconds: float = Field(
        default=RAW_MAX_WINDOW_SECONDS,
        gt=0,
        description="windows up to this long read raw samples (exact times); longer use steps",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {v!r})")
        return v.rstrip("/")

    @field_validator("extra_selector")
    @classmethod
    def _extra(cls, v: str) -> str:
        v = v.strip().strip(",")
        if "{" in v or "}" in v:
            raise ValueError('extra_selector holds matchers only, e.g. cluster="atlas"')
        return v

    def client(self, cluster: str) -> PrometheusClient:
        return PrometheusClient(self)


def with_extra(families: Sequence[MetricFamily], extra: Sequence[str] = ()) -> list[MetricFamily]:
    """The families, plus one `extra_metrics` family of the names none of them holds."""
    out = list(families)
    known = {n for f in out for n in f.names}
    rest = tuple(n for n in dict.fromkeys(extra) if n not in known)
    if rest:
        out.append(MetricFamily(id="extra_metrics", names=rest, mode="any"))
    return out


class _Unreachable(SourceError):
    """Connection refused or credentials rejected: every further query would fail alike."""


class _TimedOut(SourceError):
    """No answer within timeout_seconds."""


# -- HTTP ---------------------------------------------------------------------------------


@dataclass
class _Stats:
    queries: int = 0  # requests sent, retries included
    calls: int = 0  # API calls (a call and its retries count once)
    bytes: int = 0
    samples: int = 0
    errors: list[str] = field(default_factory=list)
    transient: list[bool] = field(default_factory=list)
    failed_queries: int = 0


class PrometheusClient:
    """Reads a job's metric samples from the Prometheus HTTP API (satisfies MetricSource)."""

    def __init__(
        self,
        config: PrometheusConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.name = config.source_name
        self._sleep = sleep
        self._setup_error: str | None = None  # reported per job as a failed coverage
        verify = config.verify_tls if isinstance(config.verify_tls, bool) else True
        ca_file = config.verify_tls if isinstance(config.verify_tls, str) else None
        self._http: httpx.Client | None
        try:
            self._http = http.build_client(
                base_url=config.url,
                timeout=config.timeout_seconds,
                verify=verify,
                ca_file=ca_file,
                headers=config.headers,
                bearer_token_env=config.bearer_token_env,
                basic_user=config.basic_user,
                basic_password_env=config.basic_password_env,
                transport=transport,
            )
        except http.HttpSetupError as exc:  # reported per job as a failed coverage
            self._setup_error = f"{exc} ({self._setup_hint()})"
            self._http = None

    def _setup_hint(self) -> str:
        c = self.config
        if c.bearer_token_env:
            return "bearer_token_env: export the Prometheus token there"
        if c.basic_password_env:
            return "basic_password_env: export the password there"
        return f"verify_tls: the CA bundle {c.verify_tls!r}"

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    # one request -------------------------------------------------------------------------
    def _auth_hint(self) -> str:
        c = self.config
        if c.bearer_token_env:
            return f"check the token in ${c.bearer_token_env}"
        if c.basic_user is not None:
            return f"check user {c.basic_user!r} and the password in ${c.basic_password_env}"
        return "it needs credentials: set bearer_token_env or basic_user/basic_password_env"

    def request(self, path: str, params: dict[str, Any], stats: _Stats,
                method: str = "POST") -> Any:
        """One API call (POST, form-encoded, unless the endpoint is GET-only); returns `data`.
        Raises SourceError with one actionable line."""
        where = f"Prometheus at {self.config.url}"
        stats.calls += 1

        client = self._http
        assert client is not None  # fetch_metrics stops before any call on a setup error

        def one() -> httpx.Response:
            stats.queries += 1
            if method == "GET":
                resp = client.get(path, params=params)
            else:
                resp = client.post(path, data=params)
            stats.bytes += len(resp.content)
            return resp

        try:
            resp, attempts = http.send(one, self.config.retry, sleep=self._sleep)
        except httpx.TimeoutException as exc:
            raise _TimedOut(
                f"{where} did not answer {path} within {self.config.timeout_seconds:g}s"
                f"{_tries(http.attempts_of(exc))} (raise timeout_seconds or narrow the window)",
                transient=True,
            ) from None
        except httpx.ConnectError as exc:
            raise _Unreachable(
                f"cannot connect to {where}: {http.one_line(exc)}{_tries(http.attempts_of(exc))}",
                transient=True,
            ) from None
        except httpx.HTTPError as exc:
            raise SourceError(
                f"{where}: {http.one_line(exc)}", transient=http.is_transient(exc)
            ) from None
        code = resp.status_code
        try:
            payload = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            payload = None
        detail = ""
        if isinstance(payload, dict) and payload.get("error"):
            detail = f": {payload.get('errorType', 'error')}: {payload['error']}"
        if code in (401, 403):
            raise _Unreachable(f"{where} answered {code}: {self._auth_hint()}")
        if http.is_transient(code):
            raise SourceError(
                f"{where} answered {code} on {path}{detail[:300]}{_tries(attempts)}",
                transient=True,
            )
        if not isinstance(payload, dict) or "status" not in payload:
            snippet = resp.text[:80].replace("\n", " ")
            raise SourceError(
                f"{where} answered {code} on {path} with malformed JSON, not a Prometheus API "
                f"response (check url; body starts {snippet!r})"
            )
        if payload["status"] != "success" or code >= 400:
            raise SourceError(f"{where} answered {code} on {path}{detail[:300]}")
        return payload.get("data")

    def _matrix(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, dict):
            raise SourceError(f"Prometheus at {self.config.url}: query answer has no data object")
        result = data.get("result")
        if data.get("resultType") not in ("matrix", "vector") or not isinstance(result, list):
            raise SourceError(
                f"Prometheus at {self.config.url}: unexpected resultType {data.get('resultType')!r}"
            )
        return [r for r in result if isinstance(r, dict) and isinstance(r.get("metric"), dict)]

    # the job -----------------------------------------------------------------------------
    def fetch_metrics(
        self, ctx: ExecutionContext, families: Sequence[MetricFamily], window: Window
    ) -> tuple[list[MetricSample], SourceCoverage]:
        cfg = self.config
        wanted = with_extra(families, cfg.extra_metrics)
        stats = _Stats()
        index = NodeIndex.of(ctx)
        start, end = window.start.timestamp(), window.end.timestamp()
        length = end - start + 1.0  # Prometheus 3 ranges are left-open: keep a sample at start
        families = [f for f in wanted if f.names]
        all_names = [n for f in families for n in f.names]
        hosts = list(ctx.nodes) + [
            str(a) for names in (ctx.node_addresses or {}).values() for a in names
        ]
        samples: list[MetricSample] = []
        read: set[str] = set()
        if not ctx.nodes or self._setup_error:
            stats.errors.append(self._setup_error or "the job names no nodes")
            stats.failed_queries += bool(self._setup_error)
            return self._coverage(ctx, window, samples, read, stats)

        ask = functools.partial(self._ask, stats)
        extra = f",{cfg.extra_selector}" if cfg.extra_selector else ""
        at = {"time": format_ts(end)}
        try:
            # 1. which node labels and which metric names exist (index only; on failure:
            #    try every configured label / every name)
            match = {
                "match[]": f"{{__name__=~{promql_string(exact_regex(all_names))}{extra}}}",
                "start": format_ts(start - 1),
                "end": format_ts(end),
            }
            data = ask("label discovery", "/api/v1/labels", match, first=True)
            present = set(data) if isinstance(data, list) else set(cfg.node_labels)
            keys = [k for k in cfg.node_labels if k in present]
            if present and not keys:
                stats.errors.append(
                    "no series of the metric families in the window carries a node label "
                    f"({', '.join(cfg.node_labels)}); check node_labels and extra_selector"
                )
            if keys:
                data = ask("metric discovery", "/api/v1/label/__name__/values", match,
                           method="GET")
                if isinstance(data, list):
                    have = set(data)
                    families = [
                        f.model_copy(update={"names": tuple(n for n in f.names if n in have)})
                        for f in families
                    ]
                    families = [f for f in families if f.names]
                    all_names = [n for f in families for n in f.names]
            if not present or not all_names:
                stats.errors.append(
                    "Prometheus holds no series of "
                    f"{', '.join(all_names[:3] or [n for f in wanted for n in f.names][:3])}"
                    "... in the window (check url and extra_selector)"
                )
            if not keys or not all_names:
                return self._coverage(ctx, window, samples, read, stats)
            sels = Selectors(node_regex(hosts), keys, cfg.extra_selector, length)
            # 2./3. per family: which series did something, then their raw samples
            for fam in families:
                data = ask(f"family {fam.id}", "/api/v1/query", {"query": sels.screen(fam), **at})
                hits = self._result(data, stats, f"family {fam.id}")
                if hits:
                    samples.extend(self._fetch_hits(fam, hits, index, length, end, ask, stats))
            # 4. which job nodes have any series of these families
            data = ask("node presence", "/api/v1/query",
                       {"query": sels.presence(all_names), **at})
            for row in self._result(data, stats, "node presence"):
                node = self._resolve(row["metric"], index, keys)
                if node:
                    read.add(node)
        except _Unreachable:
            pass  # one line in errors already; the remaining queries would fail the same way
        return self._coverage(ctx, window, samples, read, stats)

    def _ask(self, stats: _Stats, what: str, path: str, params: dict[str, Any],
             first: bool = False, method: str = "POST") -> Any:
        """One call's `data`, or None with its error in `stats`; raises _Unreachable when
        every further call would fail alike."""
        try:
            return self.request(path, params, stats, method=method)
        except SourceError as exc:
            stats.errors.append(f"{what}: {exc}"[:500])
            stats.transient.append(exc.transient)
            stats.failed_queries += 1
            # refused, rejected, or the cheap index-only first call still failed after its
            # retries (timeouts, 429, 5xx): the remaining queries would fail alike
            if isinstance(exc, _Unreachable) or (first and exc.transient):
                raise _Unreachable(str(exc), transient=exc.transient) from None
            return None

    def _coverage(self, ctx: ExecutionContext, window: Window, samples: list[MetricSample],
                  read: set[str], stats: _Stats) -> tuple[list[MetricSample], SourceCoverage]:
        kept = sorted((s for s in samples if window.contains(s.time)),
                      key=lambda s: (s.time, s.name, s.node))
        read = read | {s.node for s in samples}
        cov = SourceCoverage(
            source=self.name,
            nodes_read=[n for n in ctx.nodes if n in read],
            nodes_missing=[n for n in ctx.nodes if n not in read],
            queries=stats.queries,
            bytes=stats.bytes,
            samples=stats.samples,
            records=len(kept),
            out_of_window=len(samples) - len(kept),
            errors=stats.errors,
            retryable=bool(stats.transient) and all(stats.transient),
        )
        if stats.failed_queries and stats.failed_queries >= stats.calls:
            cov.status = "failed"
        elif stats.failed_queries:
            cov.status = "partial"
        elif not cov.nodes_read:
            cov.status = "empty"
        else:
            cov.status = "partial" if cov.nodes_missing else "ok"
        return kept, cov

    def _result(self, data: Any, stats: _Stats, what: str) -> list[dict[str, Any]]:
        """The series of a query answer; a malformed answer is one error, not an exception."""
        if data is None:
            return []
        try:
            return self._matrix(data)
        except SourceError as exc:
            stats.errors.append(f"{what}: {exc}"[:500])
            stats.failed_queries += 1
            stats.transient.append(False)
            return []

    def _resolve(self, labels: dict[str, str], index: NodeIndex, keys: Sequence[str]) -> str | None:
        for key in keys:
            node = index.resolve(labels.get(key))
            if node is not None:
                return node
        return None

    def _fetch_hits(self, fam: MetricFamily, hits: list[dict[str, Any]], index: NodeIndex,
                    length: float, end: float, ask: Any, stats: _Stats) -> list[MetricSample]:
        """Raw samples (or, for long windows, stepped points) of the screened series."""
        cfg = self.config
        groups: dict[str, list[dict[str, str]]] = {}
        for hit in hits:
            labels = {k: str(v) for k, v in hit["metric"].items()}
            for key in cfg.node_labels:
                if index.resolve(labels.get(key)) is not None:
                    groups.setdefault(key, []).append(labels)
                    break
        out: list[MetricSample] = []
        rng = duration(length)
        if length > cfg.raw_max_window_seconds:
            rng += f":{duration(step_seconds(length, cfg.step_seconds))}"
        for key, group in groups.items():
            names = sorted({h.get("__name__", "") for h in group} - {""}) or list(fam.names)
            names += [n for n in fam.companions if n not in names]
            sel = fetch_selector(names, key, {h[key] for h in group}, cfg.extra_selector, group)
            what = f"family {fam.id} samples"
            data = ask(what, "/api/v1/query", {"query": f"{sel}[{rng}]", "time": format_ts(end)})
            for row in self._result(data, stats, what):
                labels = {k: str(v) for k, v in row["metric"].items()}
                name = labels.pop("__name__", "")
                values = row.get("values") or []
                stats.samples += len(values)
                node = self._resolve(labels, index, cfg.node_labels)
                if node is None or not name:
                    continue
                for point in values:
                    try:
                        ts, value = float(point[0]), float(point[1])
                    except (TypeError, ValueError, IndexError):
                        continue
                    if not math.isfinite(value):
                        continue
                    out.append(MetricSample(
                        source="prometheus",
                        node=node,
                        locator=QueryAt(
                            language="promql",
                            query=series_selector(name, labels),
                            at_ns=round(ts * 1000) * 1_000_000,  # Prometheus: ms resolution
                        ),
                        time=datetime.fromtimestamp(ts, tz=timezone.utc),
                        name=name,
                        labels=labels,
                        value=value,
                    ))
        return out


def _tries(attempts: int) -> str:
    return f" (after {attempts} attempts)" if attempts > 1 else ""
