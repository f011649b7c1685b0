"""The one Query DSL mechanism (connectors/elasticsearch/source.py) through both transports:
`kind: elasticsearch` (the official client) and `kind: opensearch` (opensearch-py).

Tested against recorded API responses: each flavor's fake (tests/fakes/fake_elasticsearch.py,
tests/fakes/fake_opensearch.py) answers in that server's recorded REST shapes
(tests/fixtures/elasticsearch/, tests/fixtures/opensearch/: its point-in-time calls, search
pages, `sort` values ending in its tiebreaker, its 429 body). They are API reference shapes,
not captures of live clusters. What only one flavor does is tested in its own folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from fake_elasticsearch import FakeElasticsearch
from fake_opensearch import FakeOpenSearch
from search_job import CHILD, CUDA, PROGRESS, T0, ctx, doc, iso, window

from attribution_dagster.connectors.base import SourceError, SourceLimits
from attribution_dagster.connectors.elasticsearch.client import (
    ElasticsearchConfig,
    ElasticsearchSource,
)
from attribution_dagster.connectors.elasticsearch.source import SearchSource
from attribution_dagster.connectors.opensearch.client import OpenSearchConfig, OpenSearchSource


@dataclass(frozen=True)
class Flavor:
    kind: str
    fake: type[FakeElasticsearch]
    config: type[Any]
    source: type[SearchSource]
    rejected: str  # the type of its recorded 429
    honours_retry_after: bool  # whether its client keeps the answer's headers


FLAVORS = [
    Flavor("elasticsearch", FakeElasticsearch, ElasticsearchConfig, ElasticsearchSource,
           "es_rejected_execution_exception", True),
    Flavor("opensearch", FakeOpenSearch, OpenSearchConfig, OpenSearchSource,
           "rejected_execution_exception", False),
]  # fmt: skip


@pytest.fixture(params=FLAVORS, ids=lambda f: f.kind)
def flavor(request: Any) -> Flavor:
    return request.param


def serve(flavor: Flavor, fake_http: Any, *docs: dict[str, Any]) -> FakeElasticsearch:
    fake = flavor.fake()
    for d in docs:
        fake.add(d)
    fake.install(fake_http)
    return fake


def source(flavor: Flavor, fake_http: Any, sleeps: list[float] | None = None,
           **over: Any) -> SearchSource:  # fmt: skip
    cfg = flavor.config(url=fake_http.url, **{"retries": 0, **over})
    wait = sleeps.append if sleeps is not None else (lambda s: None)
    return flavor.source(cfg, cluster="c", environ={}, sleep=wait)


def test_pages_follow_search_after_inside_one_point_in_time(flavor: Flavor, fake_http: Any) -> None:
    """Twelve hits, two per timestamp, at page_size 5: three pages, each after the last
    (time, tiebreaker) of the one before (`_shard_doc` on Elasticsearch, `_id` on
    OpenSearch 2.x), none lost or repeated; one point in time, closed at the end."""
    docs = [doc("gpu-a", 1 + k // 2, f"[rank0]: RuntimeError: CUDA error: number {k}")
            for k in range(12)]  # fmt: skip
    fake = serve(flavor, fake_http, *docs, doc("gpu-a", 2, "an ordinary line"))
    src = source(flavor, fake_http, page_size=5, liveness=False)
    batch = src.fetch_logs(ctx(), [CUDA], window())
    assert [r.text.rsplit(" ", 1)[-1] for r in batch.records] == [str(k) for k in range(12)]
    pages = [s for s in fake.searches if "must" in s["query"]["bool"]]
    assert len(pages) == 3 and "search_after" not in pages[0]
    assert pages[0]["sort"][1] == {src.config.tiebreaker: "asc"}
    at = iso(T0 + timedelta(minutes=3)).replace("Z", "000Z")
    assert pages[1]["search_after"] == [at, fake.tiebreak(4)]
    assert len(fake.closed) == 1 and not fake.pits
    assert batch.coverage.records == 12 and batch.coverage.queries == 3
    assert {r.source for r in batch.records} == {flavor.kind}


def test_tails_and_last_progress_per_stream(flavor: Flavor, fake_http: Any) -> None:
    """Per node, the newest document of each file (collapse on log.file.path) is a tail;
    the newest line holding a progress anchor is its progress, and a lookalike the
    match_phrase returned (`Elapsed-time per iteration` is not) is skipped."""
    docs = [doc("gpu-a", m, f"iteration {m} | elapsed time per iteration (ms): 9")
            for m in range(10)]  # fmt: skip
    fake = serve(flavor, fake_http, *docs,
                 doc("gpu-a", 11, "Elapsed-time per iteration unknown"),
                 doc("gpu-a", 12, "kernel: something", path="/var/log/kern.log"),
                 doc("gpu-b", 4, "iteration 4 | elapsed time per iteration (ms): 9"))  # fmt: skip
    batch = source(flavor, fake_http).fetch_logs(ctx(), [CUDA, PROGRESS], window(),
                                                 SourceLimits(max_line_bytes=512))  # fmt: skip
    assert sorted((r.node, r.stream, r.time) for r in batch.tails) == [
        ("gpu-a", "app.log", T0 + timedelta(minutes=11)),
        ("gpu-a", "kern.log", T0 + timedelta(minutes=12)),
        ("gpu-b", "app.log", T0 + timedelta(minutes=4)),
    ]
    assert all(r.last_of_file for r in batch.tails)
    assert sorted((r.node, r.time) for r in batch.progress) == [
        ("gpu-a", T0 + timedelta(minutes=9)), ("gpu-b", T0 + timedelta(minutes=4)),
    ]  # fmt: skip
    assert batch.coverage.status == "ok" and batch.coverage.nodes_read == ["gpu-a", "gpu-b"]
    assert next(s for s in fake.searches if "collapse" in s)["collapse"] == {
        "field": "log.file.path"
    }


def test_continuation_lines_follow_the_hit_in_its_stream(flavor: Flavor, fake_http: Any) -> None:
    """An anchor with context_after 2: the next two lines of the same node and file, read by
    a search after the hit's sort values, are appended to the record."""
    child = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"
    fake = serve(flavor, fake_http, doc("gpu-a", 1, child),
                 doc("gpu-a", 1.1, "other file", path="/var/log/kern.log"),
                 doc("gpu-a", 1.2, "train.py FAILED"),
                 doc("gpu-a", 1.3, "Failures: rank 3 exitcode -9"),
                 doc("gpu-a", 1.4, "not asked for"))  # fmt: skip
    batch = source(flavor, fake_http, liveness=False).fetch_logs(ctx(), [CHILD], window())
    assert batch.records[0].text.split("\n")[1:] == [
        "train.py FAILED",
        "Failures: rank 3 exitcode -9",
    ]
    follow = [s for s in fake.searches if s.get("size") == 2]
    assert follow and follow[0]["search_after"][1] == fake.tiebreak(0)


def test_a_failed_search_is_coverage_not_a_crash(flavor: Flavor, fake_http: Any) -> None:
    """The flavor's recorded 429 on one node's tail search: the other reads stand, coverage
    is partial and retryable, the error names the server's reason."""
    fake = serve(flavor, fake_http, doc("gpu-a", 1, "[rank0]: CUDA error: a"),
                 doc("gpu-b", 2, "[rank0]: CUDA error: b"))  # fmt: skip

    def reject(body: dict[str, Any]) -> tuple | None:
        flt = (body.get("query") or {}).get("bool", {}).get("filter", [{}])
        names = flt[0].get("bool", {}).get("should", [{}])[0].get("terms", {}).get("host.name")
        return (429, fake.recorded("error_429.json")) if names == ["gpu-b"] else None

    fake.fail = reject
    batch = source(flavor, fake_http).fetch_logs(ctx(), [CUDA], window())
    assert len(batch.records) == 2
    cov = batch.coverage
    assert cov.status == "partial" and cov.retryable
    assert any(e.startswith("tails of gpu-b: HTTP 429: ") and flavor.rejected in e
               for e in cov.errors)  # fmt: skip


def test_transient_answers_are_retried(flavor: Flavor, fake_http: Any) -> None:
    """Two 429s carrying `Retry-After: 7`, then the answer: retried as connectors/http.py
    does, the client's own instant retries off. The elasticsearch client keeps the answer's
    headers, so the waits are the server's 7 s; opensearch-py does not, so they are the
    block's exponential backoff. More failures than retries: a transient SourceError."""
    fake = serve(flavor, fake_http, doc("gpu-a", 1, "[rank0]: CUDA error: a"))
    left = [2]

    def flaky(body: dict[str, Any]) -> tuple | None:
        if "open_pit" in body and left[0]:
            left[0] -= 1
            return 429, fake.recorded("error_429.json"), {"Retry-After": "7"}
        return None

    fake.fail = flaky
    sleeps: list[float] = []
    batch = source(flavor, fake_http, sleeps, retries=3).fetch_logs(ctx(), [CUDA], window())
    assert sleeps == ([7.0, 7.0] if flavor.honours_retry_after else [0.5, 1.0])
    assert len(batch.records) == 1 and batch.coverage.nodes_read == ["gpu-a"]
    left[0], sleeps[:] = 5, []
    with pytest.raises(SourceError, match="HTTP 429") as info:
        source(flavor, fake_http, sleeps, retries=1).fetch_logs(ctx(), [CUDA], window())
    assert info.value.transient and len(sleeps) == 1
