"""The OpenSearch log source (connectors/opensearch/) through the real `opensearch-py` client.

Tested against recorded API responses: tests/fixtures/opensearch/ holds OpenSearch 2.x REST
API JSON shapes as its API reference gives them (create PIT `POST /<index>/_search/
point_in_time?keep_alive=` -> `pit_id`, delete PIT `DELETE /_search/point_in_time`, a search
page with `pit_id` and `_id`-tiebroken `sort` values, a `collapse` page with `fields`, and
error bodies: 429 `rejected_execution_exception`, 500 `circuit_breaking_exception`, 404
`index_not_found_exception`, 400 for a `_shard_doc` sort). They are served by
tests/fakes/fake_http.py verbatim, or as the envelopes tests/fakes/fake_opensearch.py fills
with its documents; none is captured from a live cluster. The conformance run over the
shared recorded job is in tests/connectors/test_conformance.py.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from typing import Any

import pytest
from fake_opensearch import FakeOpenSearch
from search_job import CUDA, T0, TIMEOUT, ctx, doc, window

from attribution_dagster.connectors import config_model, parse_config
from attribution_dagster.connectors.base import LogSource, SourceError
from attribution_dagster.connectors.elasticsearch.client import (
    ElasticsearchConfig,
    ElasticsearchSource,
)
from attribution_dagster.connectors.opensearch.client import OpenSearchConfig, OpenSearchSource
from attribution_dagster.core.locators import SearchHit

SECRET = "s3cr3t-value-never-printed"


def recorded(name: str) -> Any:
    return FakeOpenSearch().recorded(name)


def source(fake_http: Any, environ: dict[str, str] | None = None, sleeps: list[float] | None = None,
           **over: Any) -> OpenSearchSource:  # fmt: skip
    cfg = OpenSearchConfig(url=fake_http.url, **{"retries": 0, **over})
    wait = sleeps.append if sleeps is not None else (lambda s: None)
    return OpenSearchSource(cfg, cluster="c", environ=environ or {}, sleep=wait)


def two_nodes(fake_http: Any) -> FakeOpenSearch:
    osd = FakeOpenSearch()
    osd.add(doc("gpu-a", 1, "[rank0]: CUDA error: a"))
    osd.add(doc("gpu-b", 2, "[rank0]: CUDA error: b"))
    osd.install(fake_http)
    return osd


def test_the_recorded_search_page_is_read_as_served(fake_http: Any) -> None:
    """Recorded create-PIT, search and delete-PIT answers served verbatim: both hits become
    records of job nodes (one under its FQDN, with flattened dotted fields) with SearchHit
    locators; the PIT is created with keep_alive at OpenSearch's path, used by the search
    (no index in the search path) and deleted by id in a `pit_id` list."""
    fake_http.route("POST", "/logs-*/_search/point_in_time",
                    lambda r: (200, recorded("create_pit.json")))  # fmt: skip
    fake_http.route("POST", "/_search", lambda r: (200, recorded("search_page.json")))
    fake_http.route(
        "DELETE", "/_search/point_in_time", lambda r: (200, recorded("delete_pit.json"))
    )
    batch = source(fake_http, liveness=False).fetch_logs(ctx(), [CUDA, TIMEOUT], window())
    assert [(r.node, r.time) for r in batch.records] == [
        ("gpu-b", T0 + timedelta(minutes=3, seconds=1)), ("gpu-a", T0 + timedelta(minutes=20)),
    ]  # fmt: skip
    loc = batch.records[0].locator
    assert (
        isinstance(loc, SearchHit) and str(loc) == "logs-gpu-2026.11.02/_doc/Hk3ZRpMBh2n1wJt0kY7e"
    )
    assert batch.records[0].source == "opensearch" and batch.records[0].stream == "app.log"
    assert batch.coverage.source == "opensearch"
    assert batch.coverage.status == "ok" and batch.coverage.nodes_read == ["gpu-a", "gpu-b"]
    create = next(r for r in fake_http.requests if r.path.endswith("/point_in_time")
                  and r.method == "POST")  # fmt: skip
    assert create.arg("keep_alive") == "2m"
    search = next(r for r in fake_http.requests if r.path == "/_search").json()
    pit_id = recorded("create_pit.json")["pit_id"]
    assert search["pit"] == {"id": pit_id, "keep_alive": "2m"} and "index" not in search
    assert search["sort"][1] == {"_id": "asc"}  # no _shard_doc before OpenSearch 3.3
    delete = next(r for r in fake_http.requests if r.method == "DELETE")
    assert delete.json() == {"pit_id": [pit_id]}


def test_a_shard_doc_sort_is_refused_by_opensearch_2(fake_http: Any) -> None:
    """`tiebreaker: _shard_doc` against OpenSearch 2.x: the recorded 400
    `query_shard_exception` is in coverage (failed, not retryable), not a traceback."""
    two_nodes(fake_http)
    batch = source(fake_http, tiebreaker="_shard_doc").fetch_logs(ctx(), [CUDA], window())
    cov = batch.coverage
    assert not batch.records and cov.status == "failed" and not cov.retryable
    assert any("HTTP 400" in e and "No mapping found for [_shard_doc]" in e for e in cov.errors)


def test_the_recorded_collapse_page_gives_one_tail_per_file(fake_http: Any) -> None:
    """The recorded collapse answer (hits with `fields`), served verbatim for every search:
    each hit is the tail of its file, stamped with the document's time."""
    fake_http.route("POST", "/logs-*/_search/point_in_time",
                    lambda r: (200, recorded("create_pit.json")))  # fmt: skip
    fake_http.route("POST", "/_search", lambda r: (200, recorded("collapse_page.json")))
    fake_http.route(
        "DELETE", "/_search/point_in_time", lambda r: (200, recorded("delete_pit.json"))
    )
    batch = source(fake_http).fetch_logs(ctx(("gpu-a",)), [], window())
    assert sorted((r.stream, r.time, r.text[:12]) for r in batch.tails) == [
        ("app.log", T0 + timedelta(minutes=11), "iteration 11"),
        ("kern.log", T0 + timedelta(minutes=12), "kernel: NVRM"),
    ]
    assert batch.coverage.status == "ok"


def test_timeouts_are_coverage_and_retryable(fake_http: Any) -> None:
    """A search slower than timeout_seconds: the client times out, the error is in
    coverage (every search failed: status failed, retryable); a slow PIT creation is a
    transient SourceError. Never a traceback."""
    osd = two_nodes(fake_http)

    def slow(body: dict[str, Any]) -> tuple | None:
        time.sleep(1.0)
        return None

    osd.fail = slow
    started = time.monotonic()
    with pytest.raises(SourceError, match="cannot open a point in time") as info:
        source(fake_http, timeout_seconds=0.2).fetch_logs(ctx(), [CUDA], window())
    assert info.value.transient and time.monotonic() - started < 5
    osd.fail = lambda body: None if "open_pit" in body else slow(body)
    batch = source(fake_http, timeout_seconds=0.2, liveness=False).fetch_logs(
        ctx(), [CUDA], window()
    )
    cov = batch.coverage
    assert cov.status == "failed" and cov.retryable and "anchor search" in cov.errors[0]
    assert "timed out" in cov.errors[0].lower() or "timeout" in cov.errors[0].lower()


def test_nothing_readable_raises_source_error(fake_http: Any) -> None:
    """No PIT: a recorded 404 index_not_found_exception (not transient, names the index);
    the security plugin's plain-text 401 (not transient, says Unauthorized, never the
    password)."""
    osd = two_nodes(fake_http)
    osd.fail = lambda body: (
        (404, recorded("error_index_missing.json")) if "open_pit" in body else None
    )
    with pytest.raises(SourceError, match="index_not_found_exception.*logs-missing") as info:
        source(fake_http, index="logs-missing").fetch_logs(ctx(), [CUDA], window())
    assert not info.value.transient
    osd.fail = lambda body: (
        (401, "Unauthorized", {"WWW-Authenticate": 'Basic realm="OpenSearch Security"'})
        if "open_pit" in body else None
    )  # fmt: skip
    src = source(fake_http, environ={"OS_PASSWORD": SECRET}, retries=3, basic_user="reader",
                 basic_password_env="OS_PASSWORD")  # fmt: skip
    with pytest.raises(SourceError, match="HTTP 401: Unauthorized") as info:
        src.fetch_logs(ctx(), [CUDA], window())
    assert not info.value.transient and SECRET not in str(info.value)
    assert len([r for r in fake_http.requests if r.method == "POST"]) == 2  # no retry on 401


@pytest.mark.parametrize(("keys", "header"), [
    ({"basic_user": "reader", "basic_password_env": "OS_SECRET"},
     "Basic " + base64.b64encode(f"reader:{SECRET}".encode()).decode()),
    ({"api_key_env": "OS_SECRET"}, f"ApiKey {SECRET}"),
    ({"bearer_token_env": "OS_SECRET"}, f"Bearer {SECRET}"),
])  # fmt: skip
def test_auth_comes_from_the_environment(fake_http: Any, keys: dict[str, str], header: str) -> None:
    """Each way of auth sends its header on every request, the secret read from the
    variable the block names; it is in no error, coverage or config dump."""
    osd = two_nodes(fake_http)
    osd.fail = lambda body: (500, recorded("error_500.json")) if "query" in body else None
    src = source(fake_http, environ={"OS_SECRET": SECRET}, **keys)
    batch = src.fetch_logs(ctx(), [CUDA], window())
    assert fake_http.requests and all(r.headers.get("authorization") == header
                                      for r in fake_http.requests)  # fmt: skip
    assert any("HTTP 500: circuit_breaking_exception" in e for e in batch.coverage.errors)
    assert batch.coverage.retryable and SECRET not in json.dumps(
        batch.coverage.model_dump(mode="json")
    )
    assert SECRET not in src.config.model_dump_json()
    with pytest.raises(SourceError, match="OS_SECRET is empty") as info:
        source(fake_http, environ={}, **keys).fetch_logs(ctx(), [CUDA], window())
    assert SECRET not in str(info.value)


def test_tls_options_reach_the_client() -> None:
    """An https URL: TLS on; `verify: false` turns certificate checks (and the warning)
    off; `ca_file` is the bundle the connection verifies with."""
    src = OpenSearchSource(OpenSearchConfig(url="https://os.example:9200", verify=False))
    conn = src.client().transport.connection_pool.connections[0]
    assert conn.use_ssl and conn.pool.cert_reqs == "CERT_NONE"
    cfg = OpenSearchConfig(url="https://os.example:9200", ca_file="/etc/ssl/os-ca.pem")
    conn = OpenSearchSource(cfg).client().transport.connection_pool.connections[0]
    assert conn.pool.cert_reqs == "CERT_REQUIRED" and conn.pool.ca_certs == "/etc/ssl/os-ca.pem"
    plain = OpenSearchSource(OpenSearchConfig(url="http://os:9200")).client()
    assert not plain.transport.connection_pool.connections[0].use_ssl
    assert plain.transport.max_retries == 0  # the source retries, with backoff


def test_the_official_elasticsearch_client_refuses_opensearch(fake_http: Any) -> None:
    """Why the kind exists: `kind: elasticsearch` against the same OpenSearch answers is a
    SourceError (no `_pit` path there, no product header), not a traceback."""
    two_nodes(fake_http)
    es = ElasticsearchSource(ElasticsearchConfig(url=fake_http.url, retries=0), environ={})
    with pytest.raises(SourceError, match="cannot open a point in time"):
        es.fetch_logs(ctx(), [CUDA], window())


def test_the_kind_is_registered_with_the_elasticsearch_keys() -> None:
    """`kind: opensearch` in attribution.yaml: one line in connectors/__init__.py, the same
    field options as `kind: elasticsearch`, `_id` as the tiebreaker."""
    cfg = parse_config("logs", {"kind": "opensearch", "url": "https://os:9200/", "name": "main",
                                "index": "filebeat-*", "anchor_query": "wildcard"})  # fmt: skip
    assert isinstance(cfg, OpenSearchConfig) and cfg.url == "https://os:9200"
    assert cfg.source_name == "opensearch:main" and cfg.tiebreaker == "_id"
    assert isinstance(cfg.client("c"), LogSource)
    es_keys = set(config_model("logs", "elasticsearch").model_fields)
    assert set(OpenSearchConfig.model_fields) == es_keys
    assert ElasticsearchConfig(url="http://es:9200").tiebreaker == "_shard_doc"
    with pytest.raises(ValueError, match="credentials"):
        OpenSearchConfig(url="https://admin:admin@os:9200")
    with pytest.raises(ValueError, match="one of"):
        OpenSearchConfig(url="https://os:9200", api_key_env="A", bearer_token_env="B")
    with pytest.raises(ValueError, match="go together"):
        OpenSearchConfig(url="https://os:9200", basic_user="reader")
