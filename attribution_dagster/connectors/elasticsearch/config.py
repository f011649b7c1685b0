"""`kind: elasticsearch`: where the logs are indexed and how their documents are laid out.

The defaults follow the Elastic Common Schema that Filebeat, Elastic Agent and Fluent Bit's
`es` output write (`@timestamp`, `host.name`, `message`, `log.file.path`); a block names
other fields when an index uses its own mapping.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from attribution_dagster.connectors.base import BackendConfig

if TYPE_CHECKING:
    from attribution_dagster.connectors.elasticsearch.client import ElasticsearchSource


class ElasticsearchConfig(BackendConfig):
    """`{kind: elasticsearch, url: "https://es:9200", index: "logs-*"}` is a complete block."""

    kind: Literal["elasticsearch"] = "elasticsearch"
    url: str = Field(description="Elasticsearch base URL (a node or a load balancer)")
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
    retries: int = Field(default=3, ge=0, le=10, description="retries after 429 / 5xx / timeout")
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
        v = v.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"url must be http(s)://host[:port], got {v!r}")
        if "@" in v.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(
                "url must not hold credentials: use api_key_env, basic_user + "
                "basic_password_env, or bearer_token_env"
            )
        return v

    @model_validator(mode="after")
    def _auth(self) -> ElasticsearchConfig:
        ways = [bool(self.api_key_env), bool(self.basic_user), bool(self.bearer_token_env)]
        if sum(ways) > 1:
            raise ValueError("use one of api_key_env, basic_user, bearer_token_env")
        if bool(self.basic_user) != bool(self.basic_password_env):
            raise ValueError("basic_user and basic_password_env go together")
        return self

    def client(self, cluster: str) -> ElasticsearchSource:
        from attribution_dagster.connectors.elasticsearch.client import ElasticsearchSource

        return ElasticsearchSource(self, cluster=cluster)
