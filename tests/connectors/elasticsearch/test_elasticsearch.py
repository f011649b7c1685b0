"""The Elasticsearch log source (connectors/elasticsearch/) through the official client.

Tested against recorded API responses: tests/fixtures/elasticsearch/ holds the Elasticsearch
REST API's JSON shapes (open point in time `POST /<index>/_pit`, `POST /_search` with `pit`,
`sort` and `search_after`, `DELETE /_pit`, and error bodies with `root_cause`), served by
tests/fakes/fake_http.py, either verbatim or as the envelope tests/fakes/fake_elasticsearch.py
fills with its documents. They are not captured from a live cluster. The conformance run
over the shared recorded lines is in tests/connectors/test_conformance.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from fake_elasticsearch import HEADERS, FakeElasticsearch, recorded
from search_job import CUDA, T0, TIMEOUT, UTC, ctx, doc, window

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import LogSource, SourceError
from attribution_dagster.connectors.elasticsearch.client import (
    ElasticsearchConfig,
    ElasticsearchSource,
)
from attribution_dagster.connectors.elasticsearch.query import escape_wildcard, field_value
from attribution_dagster.connectors.elasticsearch.source import doc_time
from attribution_dagster.core.locators import SearchHit


def source(fake_http: Any, **over: Any) -> ElasticsearchSource:
    cfg = ElasticsearchConfig(url=fake_http.url, retries=0, **over)
    return ElasticsearchSource(cfg, cluster="c", environ={})


def test_the_recorded_search_page_is_read_as_served(fake_http: Any) -> None:
    """A recorded `_search` page served verbatim (nested and flat dotted fields, an FQDN
    host, string sort values): both hits become records of job nodes with SearchHit
    locators that reopen the document, exact times, and the stream's file name."""
    fake_http.route("POST", "/logs-*/_pit", lambda r: (200, recorded("open_pit.json"), HEADERS))
    fake_http.route("POST", "/_search", lambda r: (200, recorded("search_page.json"), HEADERS))
    fake_http.route("DELETE", "/_pit", lambda r: (200, recorded("close_pit.json"), HEADERS))
    batch = source(fake_http, liveness=False).fetch_logs(ctx(), [CUDA, TIMEOUT], window())
    assert [(r.node, r.time) for r in batch.records] == [
        ("gpu-b", T0 + timedelta(minutes=3, seconds=1)), ("gpu-a", T0 + timedelta(minutes=20)),
    ]  # fmt: skip
    loc = batch.records[0].locator
    assert isinstance(loc, SearchHit)
    assert str(loc) == ".ds-logs-system.syslog-default-2026.11.02-000001/_doc/FaslK3QBySSL_rrj9zM5"
    assert batch.records[0].stream == "app.log"
    assert batch.coverage.status == "ok" and batch.coverage.nodes_read == ["gpu-a", "gpu-b"]
    # the point in time was opened, used by the search and closed
    search = next(r for r in fake_http.requests if r.path == "/_search").json()
    assert search["pit"]["id"] == recorded("open_pit.json")["id"]
    assert any(r.method == "DELETE" and r.path == "/_pit" for r in fake_http.requests)
    assert "index" not in search  # a search inside a point in time names no index


def test_anchors_are_pushed_down_and_checked_here(fake_http: Any) -> None:
    """match_phrase finds `CUDA error:` in `cuda error - retrying` too (the analyser drops
    punctuation and case): the hit is read but not kept; `wildcard` sends exact substrings."""
    es = FakeElasticsearch()
    es.add(doc("gpu-a", 1, "cuda error - retrying"))
    es.add(doc("gpu-a", 2, "[rank0]: CUDA error: an illegal memory access"))
    es.install(fake_http)
    batch = source(fake_http, liveness=False).fetch_logs(ctx(), [CUDA], window())
    assert [r.text for r in batch.records] == ["[rank0]: CUDA error: an illegal memory access"]
    assert batch.coverage.lines == 2
    sent = es.searches[-1]["query"]["bool"]["must"][0]["bool"]["should"]
    assert sent == [{"match_phrase": {"message": "CUDA error:"}}]
    wild = source(fake_http, liveness=False, anchor_query="wildcard",
                  wildcard_field="message.wildcard")  # fmt: skip
    wild.fetch_logs(ctx(), [CUDA], window())
    sent = es.searches[-1]["query"]["bool"]["must"][0]["bool"]["should"]
    assert sent == [{"wildcard": {"message.wildcard": {"value": "*CUDA error:*"}}}]
    assert escape_wildcard("a*b?c\\") == "a\\*b\\?c\\\\"


def test_nodes_window_and_filters_are_filters(fake_http: Any) -> None:
    """Only the job's nodes (also under their FQDN), inside the window, matching the extra
    filters are read; a document of another host is never asked for."""
    es = FakeElasticsearch()
    es.add(doc("gpu-a.cluster.local", 1, "[rank0]: CUDA error: a"))
    es.add(doc("gpu-z", 1, "[rank0]: CUDA error: other job"))
    es.add(doc("gpu-b", 45, "[rank0]: CUDA error: after the window"))
    es.install(fake_http)
    batch = source(fake_http).fetch_logs(ctx(), [CUDA], window())
    assert [(r.node, r.text) for r in batch.records] == [("gpu-a", "[rank0]: CUDA error: a")]
    assert batch.coverage.nodes_read == ["gpu-a"] and batch.coverage.nodes_missing == ["gpu-b"]
    assert batch.coverage.status == "partial"
    flt = es.searches[0]["query"]["bool"]["filter"]
    assert flt[0]["bool"]["should"][0] == {"terms": {"host.name": ["gpu-a", "gpu-b"]}}
    assert flt[1]["range"]["@timestamp"]["gte"].startswith("2026-11-02T09:59:00")


def test_nothing_readable_raises_source_error(fake_http: Any) -> None:
    """No point in time (a recorded index_not_found_exception): nothing was read, so the
    fetch raises SourceError, not transient, naming the index; a 503 is transient."""
    es = FakeElasticsearch()
    es.fail = lambda body: (
        (404, recorded("error_index_missing.json")) if "open_pit" in body else None
    )
    es.install(fake_http)
    with pytest.raises(SourceError, match="index_not_found_exception") as info:
        source(fake_http, index="logs-missing").fetch_logs(ctx(), [CUDA], window())
    assert not info.value.transient
    es.fail = lambda body: (
        (503, {"error": "unavailable", "status": 503}) if "open_pit" in body else None
    )
    with pytest.raises(SourceError) as info:
        source(fake_http).fetch_logs(ctx(), [CUDA], window())
    assert info.value.transient


def test_a_missing_secret_is_a_source_error(fake_http: Any) -> None:
    cfg = ElasticsearchConfig(url=fake_http.url, api_key_env="ES_API_KEY")
    with pytest.raises(SourceError, match="ES_API_KEY"):
        ElasticsearchSource(cfg, environ={}).fetch_logs(ctx(), [CUDA], window())


def test_the_kind_is_registered_and_validated() -> None:
    """`kind: elasticsearch` in attribution.yaml: one line in connectors/__init__.py."""
    cfg = parse_config("logs", {"kind": "elasticsearch", "url": "https://es:9200/",
                                "name": "main"})  # fmt: skip
    assert isinstance(cfg, ElasticsearchConfig) and cfg.url == "https://es:9200"
    assert cfg.source_name == "elasticsearch:main"
    assert isinstance(cfg.client("c"), LogSource)
    with pytest.raises(ValueError, match="credentials"):
        ElasticsearchConfig(url="https://u:p@es:9200")
    with pytest.raises(ValueError, match="one of"):
        ElasticsearchConfig(url="https://es:9200", api_key_env="A", bearer_token_env="B")


def test_fields_and_times() -> None:
    assert field_value({"host": {"name": "a"}}, "host.name") == "a"
    assert field_value({"host.name": "b"}, "host.name") == "b"
    assert field_value({"log": {"file.path": "/x"}}, "log.file.path") == "/x"
    assert field_value({"host": "a"}, "host.name") is None
    assert doc_time(1793613600000) == datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    assert doc_time("2026-11-02T10:00:00.123456789Z") == datetime(
        2026, 11, 2, 10, 0, 0, 123456, tzinfo=UTC
    )
    assert doc_time("yesterday") is None
