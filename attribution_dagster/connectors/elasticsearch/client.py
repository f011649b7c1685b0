"""`kind: elasticsearch`: the block and its transport, the official `elasticsearch` client
(it checks the server's `X-Elastic-Product` header, so it talks to Elasticsearch only; an
OpenSearch cluster is `kind: opensearch`, connectors/opensearch/). The mechanism (paging,
continuation lines, tails, progress, coverage) is source.py's, shared with OpenSearch."""

from __future__ import annotations

from typing import Any, Literal

from attribution_dagster.connectors import http
from attribution_dagster.connectors.elasticsearch.source import SearchConfig, SearchSource


class ElasticsearchConfig(SearchConfig):
    """`{kind: elasticsearch, url: "https://es:9200", index: "logs-*"}` is a complete block
    (the keys: source.SearchConfig, docs/elasticsearch.md)."""

    kind: Literal["elasticsearch"] = "elasticsearch"

    def client(self, cluster: str) -> ElasticsearchSource:
        return ElasticsearchSource(self, cluster=cluster)


class ElasticsearchSource(SearchSource):
    """Elasticsearch 8 / 9 through `elasticsearch.Elasticsearch`: `POST /<index>/_pit`,
    `DELETE /_pit`; its errors keep the answer's headers, so Retry-After is honoured."""

    config: ElasticsearchConfig

    def build_client(self) -> Any:
        """Retries are the source's (`_retrying`), not the client's; TLS options for an
        https URL; one of API key, basic or bearer auth read from the environment."""
        from elasticsearch import Elasticsearch

        cfg = self.config
        kwargs: dict[str, Any] = {"request_timeout": cfg.timeout_seconds, "max_retries": 0}
        if cfg.url.startswith("https://"):
            kwargs["verify_certs"] = cfg.verify
            if cfg.ca_file:
                kwargs["ca_certs"] = cfg.ca_file
        if cfg.api_key_env:
            kwargs["api_key"] = cfg.secret(cfg.api_key_env, self._environ)
        elif cfg.basic_user and cfg.basic_password_env:
            kwargs["basic_auth"] = (cfg.basic_user, cfg.secret(cfg.basic_password_env,
                                                               self._environ))  # fmt: skip
        elif cfg.bearer_token_env:
            kwargs["bearer_auth"] = cfg.secret(cfg.bearer_token_env, self._environ)
        return Elasticsearch(cfg.url, **kwargs)

    def open_pit(self, client: Any) -> str | None:
        resp = client.open_point_in_time(index=self.config.index, keep_alive=self.config.keep_alive)
        return _body(resp).get("id")

    def close_pit(self, client: Any, pit: str) -> None:
        client.close_point_in_time(id=pit)

    def send_search(self, client: Any, body: dict[str, Any]) -> dict[str, Any]:
        return _body(client.search(**body))

    def status_of(self, exc: BaseException) -> int | None:
        status = getattr(getattr(exc, "meta", None), "status", None)
        return status if isinstance(status, int) else None

    def body_of(self, exc: BaseException) -> Any:
        return getattr(exc, "body", None)

    def dropped(self, exc: BaseException) -> bool:
        from elastic_transport import ConnectionError as TransportConnectionError
        from elastic_transport import ConnectionTimeout, TlsError

        if isinstance(exc, TlsError):  # a certificate that does not verify stays so
            return False
        return isinstance(exc, (TransportConnectionError, ConnectionTimeout, TimeoutError))

    def retry_after(self, exc: BaseException) -> float | None:
        headers = getattr(getattr(exc, "meta", None), "headers", None) or {}
        return http.retry_after_seconds(headers.get("Retry-After"))


def _body(resp: Any) -> dict[str, Any]:
    """An ObjectApiResponse's body (a dict in tests that pass plain answers)."""
    body = getattr(resp, "body", resp)
    return body if isinstance(body, dict) else {}
