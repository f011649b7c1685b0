"""The `{kind: loki, ...}` block's keys (docs/loki.md). `LokiConfig` in loki/client.py adds
the client it builds; everything else types against these keys."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from attribution_dagster.connectors import http
from attribution_dagster.connectors.http import HttpBackendConfig
from attribution_dagster.connectors.loki.query import logql_string

_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# one LogQL label matcher: name, operator, a double-quoted (Go escapes) or backquoted value
_MATCHER = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*(?:,|$)'
)
MIN_STEP_SECONDS = 15.0  # liveness buckets: finer does not help (shippers batch, skew 5 s)


def _matcher_text(v: str, where: str) -> str:
    """A matcher string without its optional braces."""
    v = v.strip()
    if v.startswith("{") and v.endswith("}"):
        v = v[1:-1].strip()
    if "{" in v or "}" in v:
        raise ValueError(f"{where}: give label matchers only, e.g. 'job=\"syslog\"'")
    return v


class LokiKeys(HttpBackendConfig):
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
    cluster_selectors: list[dict[str, str] | str] = Field(
        default_factory=list,
        description="streams of cluster-level logs (switches, UFM, OpenSM, Fabric Manager, "
        "the controller): each item one stream selector, a mapping of exact values or a LogQL "
        "matcher string ('job=\"ufm\"', 'host=~\"ib-leaf.*\"'); one extra query per item",
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
        return http.checked_url(v, "basic_user + basic_password_env or bearer_token_env")

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
            return _matcher_text(v, "selectors")
        for name in v:
            if not _LABEL_NAME.match(name):
                raise ValueError(f"selectors: {name!r} is not a Loki label name")
        return v

    @field_validator("cluster_selectors", mode="before")
    @classmethod
    def _one_selector_is_a_list(cls, v: object) -> object:
        return [v] if isinstance(v, (str, dict)) else v

    @field_validator("cluster_selectors")
    @classmethod
    def _cluster_selectors(cls, v: list[dict[str, str] | str]) -> list[dict[str, str] | str]:
        """Each item stands alone as a query's stream selector (no node matcher is added),
        so it must be one Loki accepts: well-formed matchers, at least one `=` / `=~` with a
        non-empty value (Loki refuses a selector that matches every stream)."""
        out: list[dict[str, str] | str] = []
        for i, item in enumerate(v):
            where = f"cluster_selectors[{i}]"
            if isinstance(item, dict):
                for name in item:
                    if not _LABEL_NAME.match(name):
                        raise ValueError(f"{where}: {name!r} is not a Loki label name")
                if not any(item.values()):
                    raise ValueError(f"{where}: give at least one label with a non-empty value")
                out.append(item)
                continue
            text = _matcher_text(item, where)
            pos, positive = 0, False
            while pos < len(text):
                m = _MATCHER.match(text, pos)
                if m is None or m.end() == pos:
                    raise ValueError(
                        f"{where}: {text[pos:][:40]!r} is not a label matcher "
                        '(name="value", name=~"regex", name!="value", name!~"regex")'
                    )
                positive = positive or (m.group(2) in ("=", "=~") and len(m.group(3)) > 2)
                pos = m.end()
            if not positive:
                raise ValueError(
                    f"{where}: needs at least one = or =~ matcher with a non-empty value "
                    "(a selector of only negative matchers would read every stream)"
                )
            out.append(text)
        return out

    @model_validator(mode="after")
    def _auth(self) -> LokiKeys:
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

    def cluster_stream_selectors(self) -> list[str]:
        """Each `cluster_selectors` item as a LogQL stream selector, braces included."""
        out = []
        for item in self.cluster_selectors:
            if isinstance(item, str):
                out.append("{" + item + "}")
            else:
                body = ", ".join(f"{k}={logql_string(v)}" for k, v in item.items())
                out.append("{" + body + "}")
        return out
