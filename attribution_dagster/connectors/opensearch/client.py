"""`kind: opensearch`: OpenSearch 2.x / 3.x through the `opensearch-py` client.

The official `elasticsearch` client refuses an OpenSearch server (it checks the
`X-Elastic-Product` header) and calls Elasticsearch's point-in-time paths. OpenSearch opens
one at `POST /<index>/_search/point_in_time?keep_alive=` (answer: `pit_id`) and closes it at
`DELETE /_search/point_in_time` (`{"pit_id": [..]}`); the search body (`pit: {id,
keep_alive}`, `sort`, `search_after`, `collapse`) is the same. Before 3.3 OpenSearch has no
`_shard_doc` sort, so the tiebreaker defaults to `_id` (the one its pagination docs use).
Everything else, paging, continuation lines, tails, progress and coverage, is the shared
mechanism of connectors/elasticsearch/source.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from attribution_dagster.connectors.elasticsearch.source import SearchConfig, SearchSource


class OpenSearchConfig(SearchConfig):
    """`{kind: opensearch, url: "https://opensearch:9200", index: "logs-*"}` is a complete
    block; the keys are those of `kind: elasticsearch` (docs/elasticsearch.md)."""

    kind: Literal["opensearch"] = "opensearch"
    tiebreaker: str = Field(
        default="_id",
        description="the sort after time that makes it total, for search_after: `_id` "
        "(OpenSearch 2.x), `_shard_doc` (OpenSearch >= 3.3), or a unique keyword field",
    )

    def client(self, cluster: str) -> OpenSearchSource:
        return OpenSearchSource(self, cluster=cluster)


class OpenSearchSource(SearchSource):
    """The OpenSearch transport. opensearch-py's errors do not keep the answer's headers, so
    a 429 or 503 is retried with the block's exponential backoff, not its Retry-After."""

    config: OpenSearchConfig

    def build_client(self) -> Any:
        """Retries are the source's (`_retrying`), not the client's (it would retry at once,
        without backoff); TLS options for an https URL; one of API key, basic or bearer auth
        read from the environment (sent as a header, never logged)."""
        from opensearchpy import OpenSearch

        cfg = self.config
        headers: dict[str, str] = {}
        kwargs: dict[str, Any] = {
            "timeout": cfg.timeout_seconds, "max_retries": 0, "retry_on_timeout": False,
            "retry_on_status": (),
        }  # fmt: skip
        if cfg.url.startswith("https://"):
            kwargs.update(use_ssl=True, verify_certs=cfg.verify, ssl_show_warn=cfg.verify)
            if cfg.ca_file:
                kwargs["ca_certs"] = cfg.ca_file
        if cfg.api_key_env:
            headers["Authorization"] = f"ApiKey {cfg.secret(cfg.api_key_env, self._environ)}"
        elif cfg.basic_user and cfg.basic_password_env:
            kwargs["http_auth"] = (cfg.basic_user, cfg.secret(cfg.basic_password_env,
                                                              self._environ))  # fmt: skip
        elif cfg.bearer_token_env:
            headers["Authorization"] = f"Bearer {cfg.secret(cfg.bearer_token_env, self._environ)}"
        return OpenSearch(hosts=[cfg.url], headers=headers, **kwargs)

    def open_pit(self, client: Any) -> str | None:
        resp = client.create_pit(index=self.config.index, keep_alive=self.config.keep_alive)
        return resp.get("pit_id") if isinstance(resp, dict) else None

    def close_pit(self, client: Any, pit: str) -> None:
        client.delete_pit(body={"pit_id": [pit]})

    def send_search(self, client: Any, body: dict[str, Any]) -> dict[str, Any]:
        resp = client.search(body=body)
        return resp if isinstance(resp, dict) else {}

    def status_of(self, exc: BaseException) -> int | None:
        from opensearchpy import TransportError

        status = exc.status_code if isinstance(exc, TransportError) else None
        return status if isinstance(status, int) else None  # 'N/A': no answer came

    def body_of(self, exc: BaseException) -> Any:
        from opensearchpy import TransportError

        if not isinstance(exc, TransportError) or not isinstance(exc.status_code, int):
            return None
        # a JSON answer is `info`; a plain-text one (the security plugin's 401) `error`
        return exc.info if exc.info is not None else exc.error

    def dropped(self, exc: BaseException) -> bool:
        from opensearchpy import ConnectionError as OpenSearchConnectionError
        from opensearchpy import SSLError

        if isinstance(exc, SSLError):  # a certificate that does not verify stays so
            return False
        return isinstance(exc, (OpenSearchConnectionError, TimeoutError))
