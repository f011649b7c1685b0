"""Prometheus (PromQL HTTP API) as a metric source: the samples the metric parsers need,
for one job's nodes and window, with few queries and few bytes.

What is queried. The metric families are the parser catalog's `metrics:` specs (one family
per spec: `DCGM_FI_DEV_XID_ERRORS`, the ECC / remapped-row counters, the NVLink counters,
the IB link_downed counter and port states ...), plus `extra_metrics` from the
configuration. A metric no parser consumes could never become an observation, so it is not
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
raises one generic exception for all of those.
"""

from __future__ import annotations

import json
import math
import os
import re
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator

from attribution_dagster.connectors.base import BackendConfig, SourceError
from attribution_dagster.core.context import ExecutionContext, short_host
from attribution_dagster.core.evidence import MetricSample, SourceCoverage
from attribution_dagster.core.formats.promtext import NODE_LABELS
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.locators import QueryAt
from attribution_dagster.core.settings import Window

MIN_STEP_SECONDS = 15.0
MAX_POINTS_PER_SERIES = 500
RAW_MAX_WINDOW_SECONDS = 12 * 3600.0
_REGEX_META = set("\\.+*?()|[]{}^$")


class PrometheusConfig(BackendConfig):
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


# -- PromQL text --------------------------------------------------------------------------


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal of `value`."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'


def regex_escape(value: str) -> str:
    """Escape RE2 metacharacters (Prometheus matchers are RE2, fully anchored)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in value)


def node_regex(names: Iterable[str]) -> str:
    """One anchored regex matching every spelling of the given hosts: exact, short, any
    case, with an optional domain and an optional `:port` (Prometheus `instance`)."""
    alts: list[str] = []
    for name in names:
        for spelling in (name.strip(), short_host(name)):
            if spelling and spelling not in alts:
                alts.append(spelling)
    body = "|".join(regex_escape(a) for a in sorted(alts))
    return f"(?i)(?:{body})(?:\\.[^:]*)?(?::[0-9]+)?"


def exact_regex(values: Iterable[str]) -> str:
    return "|".join(regex_escape(v) for v in sorted(set(values)))


def step_seconds(window_seconds: float, override: float | None = None) -> float:
    """Step of a long-window subquery: `override`, else max(15 s, window / 500), whole seconds."""
    if override:
        return float(override)
    return float(max(MIN_STEP_SECONDS, math.ceil(window_seconds / MAX_POINTS_PER_SERIES)))


def duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds (`3601000ms`)."""
    return f"{max(1, round(seconds * 1000))}ms"


def format_ts(t: float) -> str:
    return f"{t:.3f}".rstrip("0").rstrip(".")


def series_selector(name: str, labels: dict[str, str]) -> str:
    """`name{k="v",...}` selecting exactly one series (labels sorted)."""
    inner = ",".join(f"{k}={promql_string(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


@dataclass(frozen=True)
class Family:
    """Metric names read together, and what makes a series worth fetching."""

    id: str
    names: tuple[str, ...]
    mode: str  # increase | last_value | positive | state | any | below
    normal: float | None = None
    steady_after: int | None = None
    # fetched with the screened series, never screened: the denominator of mode `below`
    # (PromQL's `or` matches label sets without the metric name, so a screen over both
    # names would drop one of two series that share their labels)
    companions: tuple[str, ...] = ()


def catalog_families(extra: Sequence[str] = ()) -> list[Family]:
    """One family per metric spec of the parser catalog, plus `extra` names."""
    from attribution_dagster.rules.catalog import parsers

    out = [
        Family(
            id=m.id,
            names=tuple(m.names),
            companions=(m.ratio_of,) if m.ratio_of else (),
            mode=m.mode,
            normal=m.normal,
            steady_after=m.steady_abnormal_after,
        )
        for m in parsers().metric_specs
    ]
    known = {n for f in out for n in f.names}
    rest = tuple(n for n in dict.fromkeys(extra) if n not in known)
    if rest:
        out.append(Family(id="extra_metrics", names=rest, mode="any"))
    return out


class Selectors:
    """Selectors for one job: the node regex under each node label, plus the extra matchers."""

    def __init__(self, regex: str, keys: Sequence[str], extra: str, window_seconds: float):
        self.regex = regex
        self.keys = tuple(keys)
        self.extra = extra
        self.range = duration(window_seconds)

    def sel(self, name: str, key: str) -> str:
        matchers = [f"{key}=~{promql_string(self.regex)}"]
        if self.extra:
            matchers.append(self.extra)
        return f"{name}{{{','.join(matchers)}}}"

    def _cond(self, fam: Family, name: str, key: str) -> str:
        r = f"{self.sel(name, key)}[{self.range}]"
        changed = f"changes({r}) > 0"
        if fam.mode == "increase":
            return changed
        if fam.mode == "state" and fam.normal is not None:
            off = f"max_over_time({r}) != {fam.normal:g}"
            if fam.steady_after:
                # constant and abnormal in >= steady_after samples: the parser ignores it
                off = f"({off} and count_over_time({r}) < {fam.steady_after})"
            return f"{changed} or {off}"
        return f"{changed} or max_over_time({r}) != 0"

    def screen(self, fam: Family) -> str:
        parts = []
        for name in fam.names:
            cond = " or ".join(f"({self._cond(fam, name, k)})" for k in self.keys)
            parts.append(f'label_replace({cond}, "__name__", {promql_string(name)}, "", "")')
        return " or ".join(parts)

    def presence(self, names: Sequence[str]) -> str:
        inner = " or ".join(
            f"last_over_time({self.sel(n, k)}[{self.range}])" for n in names for k in self.keys
        )
        return f"count by ({', '.join(self.keys)}) ({inner})"


def fetch_selector(names: Iterable[str], key: str, hosts: Iterable[str], extra: str,
                   hits: Sequence[dict[str, str]], max_values: int = 64) -> str:
    """A selector for the raw samples of screened series: their names, their node label's
    exact values, and each other label all hits share with at most `max_values` values.
    It may select more (quiet) series than the hits, never fewer."""
    matchers = [f"__name__=~{promql_string(exact_regex(names))}",
                f"{key}=~{promql_string(exact_regex(hosts))}"]
    if extra:
        matchers.append(extra)
    common = set.intersection(*(set(h) for h in hits)) if hits else set()
    pinned = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", extra))
    for label in sorted(common - {"__name__", key} - pinned):
        values = {h[label] for h in hits}
        if len(values) <= max_values:
            matchers.append(f"{label}=~{promql_string(exact_regex(values))}")
    return "{" + ",".join(matchers) + "}"


class _Unreachable(SourceError):
    """Connection refused or credentials rejected: every further query would fail alike."""


class _TimedOut(SourceError):
    """No answer within timeout_seconds."""


# -- HTTP ---------------------------------------------------------------------------------


@dataclass
class _Stats:
    queries: int = 0
    bytes: int = 0
    samples: int = 0
    errors: list[str] = field(default_factory=list)
    transient: list[bool] = field(default_factory=list)
    failed_queries: int = 0


def _verify(value: bool | str) -> bool | ssl.SSLContext:
    """httpx wants an SSLContext for a CA bundle (a path string is deprecated)."""
    if isinstance(value, str):
        return ssl.create_default_context(cafile=value)
    return value


class PrometheusClient:
    """Reads a job's metric samples from the Prometheus HTTP API (satisfies MetricSource)."""

    def __init__(
        self,
        config: PrometheusConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        families: Sequence[Family] | None = None,
    ) -> None:
        self.config = config
        self.name = config.source_name
        self._families = list(families) if families is not None else None
        self._setup_error: str | None = None  # reported per job as a failed coverage
        auth: httpx.Auth | None = None
        headers = dict(config.headers)
        if config.bearer_token_env:
            token = os.environ.get(config.bearer_token_env, "").strip()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            else:
                self._setup_error = (
                    f"${config.bearer_token_env} (bearer_token_env) is not set: "
                    "export the Prometheus token there"
                )
        if config.basic_user is not None:
            password = os.environ.get(config.basic_password_env or "", "")
            auth = httpx.BasicAuth(config.basic_user, password)
        try:
            verify = _verify(config.verify_tls)
        except OSError as exc:
            self._setup_error = f"CA bundle {config.verify_tls!r} (verify_tls) is unreadable: {exc}"
            verify = True
        self._http = httpx.Client(
            base_url=config.url,
            headers=headers,
            auth=auth,
            timeout=config.timeout_seconds,
            verify=verify,
            transport=transport,
        )

    @property
    def families(self) -> list[Family]:
        if self._families is None:
            self._families = catalog_families(self.config.extra_metrics)
        return self._families

    def close(self) -> None:
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
        stats.queries += 1
        try:
            if method == "GET":
                resp = self._http.get(path, params=params)
            else:
                resp = self._http.post(path, data=params)
        except httpx.TimeoutException:
            raise _TimedOut(
                f"{where} did not answer {path} within {self.config.timeout_seconds:g}s "
                "(raise timeout_seconds or narrow the window)",
                transient=True,
            ) from None
        except httpx.ConnectError as exc:
            raise _Unreachable(f"cannot connect to {where}: {exc}", transient=True) from None
        except httpx.HTTPError as exc:
            raise SourceError(f"{where}: {type(exc).__name__}: {exc}", transient=True) from None
        stats.bytes += len(resp.content)
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
        if code == 429 or code >= 500:
            raise SourceError(f"{where} answered {code} on {path}{detail[:300]}", transient=True)
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
        self, ctx: ExecutionContext, window: Window
    ) -> tuple[list[MetricSample], SourceCoverage]:
        cfg = self.config
        stats = _Stats()
        index = NodeIndex.of(ctx)
        start, end = window.start.timestamp(), window.end.timestamp()
        length = end - start + 1.0  # Prometheus 3 ranges are left-open: keep a sample at start
        families = [f for f in self.families if f.names]
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

        def ask(what: str, path: str, params: dict[str, Any], first: bool = False,
                method: str = "POST") -> Any:
            try:
                return self.request(path, params, stats, method=method)
            except SourceError as exc:
                stats.errors.append(f"{what}: {exc}"[:500])
                stats.transient.append(exc.transient)
                stats.failed_queries += 1
                # refused, rejected, or the cheap index-only first call timed out: the
                # remaining queries would only add their timeouts
                if isinstance(exc, _Unreachable) or (first and isinstance(exc, _TimedOut)):
                    raise _Unreachable(str(exc), transient=exc.transient) from None
                return None

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
                    families = [replace(f, names=tuple(n for n in f.names if n in have))
                                for f in families]
                    families = [f for f in families if f.names]
                    all_names = [n for f in families for n in f.names]
            if not present or not all_names:
                stats.errors.append(
                    "Prometheus holds no series of "
                    f"{', '.join(all_names[:3] or [n for f in self.families for n in f.names][:3])}"
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
        if stats.failed_queries and stats.failed_queries >= stats.queries:
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

    def _fetch_hits(self, fam: Family, hits: list[dict[str, Any]], index: NodeIndex,
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
