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
from search_job import CHILD, CUDA, PROGRESS, T0, TIMEOUT, UTC, ctx, doc, iso, window

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import LogSource, SourceError, SourceLimits
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


def test_pages_follow_search_after_inside_one_point_in_time(fake_http: Any) -> None:
    """Twelve hits at page_size 5: three pages, each after the last sort values of the one
    before, none lost or repeated, equal timestamps ordered by `_shard_doc`."""
    es = FakeElasticsearch()
    for k in range(12):
        es.add(doc("gpu-a", 1 + k // 2, f"[rank0]: RuntimeError: CUDA error: number {k}"))
    es.add(doc("gpu-a", 2, "an ordinary line"))
    es.install(fake_http)
    batch = source(fake_http, page_size=5, liveness=False).fetch_logs(ctx(), [CUDA], window())
    assert [r.text.rsplit(" ", 1)[-1] for r in batch.records] == [str(k) for k in range(12)]
    pages = [s for s in es.searches if "must" in s["query"]["bool"]]
    assert len(pages) == 3 and "search_after" not in pages[0]
    assert pages[1]["search_after"] == [iso(T0 + timedelta(minutes=3)).replace("Z", "000Z"), 4]
    assert es.closed == ["pit-1"] and not es.pits
    assert batch.coverage.records == 12 and batch.coverage.queries == 3


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


def test_tails_and_last_progress_per_stream(fake_http: Any) -> None:
    """Per node, the newest document of each file (collapse on log.file.path) is a tail;
    the newest line holding a progress anchor is its progress, and a lookalike the
    match_phrase returned (`elapsed time per iteration?` is not) is skipped."""
    es = FakeElasticsearch()
    for m in range(0, 10):
        es.add(doc("gpu-a", m, f"iteration {m} | elapsed time per iteration (ms): 9"))
    es.add(doc("gpu-a", 11, "Elapsed-time per iteration unknown"))
    es.add(doc("gpu-a", 12, "kernel: something", path="/var/log/kern.log"))
    es.add(doc("gpu-b", 4, "iteration 4 | elapsed time per iteration (ms): 9"))
    es.install(fake_http)
    batch = source(fake_http).fetch_logs(ctx(), [CUDA, PROGRESS], window(),
                                         SourceLimits(max_line_bytes=512))  # fmt: skip
    tails = sorted((r.node, r.stream, r.time) for r in batch.tails)
    assert tails == [
        ("gpu-a", "app.log", T0 + timedelta(minutes=11)),
        ("gpu-a", "kern.log", T0 + timedelta(minutes=12)),
        ("gpu-b", "app.log", T0 + timedelta(minutes=4)),
    ]
    assert all(r.last_of_file for r in batch.tails)
    assert sorted((r.node, r.time) for r in batch.progress) == [
        ("gpu-a", T0 + timedelta(minutes=9)), ("gpu-b", T0 + timedelta(minutes=4)),
    ]  # fmt: skip
    assert batch.coverage.status == "ok" and batch.coverage.nodes_read == ["gpu-a", "gpu-b"]


def test_continuation_lines_follow_the_hit_in_its_stream(fake_http: Any) -> None:
    """An anchor with context_after 2: the next two lines of the same node and file, read by
    a search after the hit's sort values, are appended to the record."""
    es = FakeElasticsearch()
    es.add(doc("gpu-a", 1, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"))
    es.add(doc("gpu-a", 1.1, "other file", path="/var/log/kern.log"))
    es.add(doc("gpu-a", 1.2, "train.py FAILED"))
    es.add(doc("gpu-a", 1.3, "Failures: rank 3 exitcode -9"))
    es.add(doc("gpu-a", 1.4, "not asked for"))
    es.install(fake_http)
    batch = source(fake_http, liveness=False).fetch_logs(ctx(), [CHILD], window())
    assert batch.records[0].text.split("\n")[1:] == [
        "train.py FAILED",
        "Failures: rank 3 exitcode -9",
    ]


def test_a_failed_search_is_coverage_not_a_crash(fake_http: Any) -> None:
    """A 429 (recorded es_rejected_execution_exception body) on one node's tail search:
    the other reads stand, coverage is partial and retryable, the error names the cause."""
    es = FakeElasticsearch()
    es.add(doc("gpu-a", 1, "[rank0]: CUDA error: a"))
    es.add(doc("gpu-b", 2, "[rank0]: CUDA error: b"))

    def reject(body: dict[str, Any]) -> tuple[int, Any] | None:
        flt = (body.get("query") or {}).get("bool", {}).get("filter", [{}])
        names = flt[0].get("bool", {}).get("should", [{}])[0].get("terms", {}).get("host.name")
        return (429, recorded("error_429.json")) if names == ["gpu-b"] else None

    es.fail = reject
    es.install(fake_http)
    batch = source(fake_http).fetch_logs(ctx(), [CUDA], window())
    assert len(batch.records) == 2
    cov = batch.coverage
    assert cov.status == "partial" and cov.retryable
    assert any("tails of gpu-b" in e and "HTTP 429" in e and "es_rejected_execution" in e
               for e in cov.errors)  # fmt: skip


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
