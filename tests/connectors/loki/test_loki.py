"""Loki log source (connectors/loki/: client, query, liveness) against a fake Loki that
evaluates queries.

The fake (tests/fake_loki.py) answers with the `query_range` / `series` response shapes of
the Loki HTTP API reference (grafana.com/docs/loki/latest/reference/loki-http-api: "Query
logs within a range of time", "Query streams"), and it evaluates `start` (inclusive), `end`
(exclusive), `limit`, `direction`, the stream selector and `|~` / `|=` line filters over
stored entries, so pagination and push-down are exercised for real over local HTTP. Error
bodies are Loki's own messages as documented in Loki's query troubleshooting reference
("max entries limit per query exceeded, limit > max_entries_limit_per_query (N > M)",
"the query time range exceeds the limit (query length: X, limit: Y)", "maximum number of
series (N) reached for a single query").
"""

from __future__ import annotations

import gzip
import json
import re
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fake_loki import FakeLoki, parse_logql

from attribution_dagster import pipeline
from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import LogSource
from attribution_dagster.connectors.clusters import Cluster, EvidenceSources
from attribution_dagster.connectors.http import retry_after_seconds
from attribution_dagster.connectors.loki.client import LokiClient, LokiConfig
from attribution_dagster.connectors.loki.query import (
    build_query,
    classify_400,
    line_filter,
    logql_string,
    parse_duration_ns,
    to_ns,
)
from attribution_dagster.core.config import ClusterConfig
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor
from attribution_dagster.core.formats.timestamps import TimestampParser
from attribution_dagster.core.hosts import NodeIndex, re2_escape
from attribution_dagster.core.locators import QueryAt
from attribution_dagster.core.settings import Window

pytestmark = pytest.mark.loki

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
END = datetime(2026, 11, 2, 10, 30, tzinfo=UTC)
WINDOW = Window(start=START - timedelta(minutes=2), end=END + timedelta(minutes=1))
T0 = to_ns(START)
S = 1_000_000_000
ANCHORS = [Anchor(literal="NVRM: Xid"), Anchor(literal="NCCL WARN")]


def ctx(nodes: list[str] | None = None, **kw: object) -> ExecutionContext:
    return ExecutionContext(
        job_id="77",
        scheduler="slurm",
        state="FAILED",
        start=START,
        end=END,
        nodes=nodes or ["node-a", "node-b"],
        **kw,  # type: ignore[arg-type]
    )


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(url: str, sleeps: Sleeps | None = None, env: dict | None = None, **kw: object):
    cfg = LokiConfig.model_validate({"kind": "loki", "url": url, **kw})
    return LokiClient(cfg, sleep=sleeps if sleeps is not None else Sleeps(), environ=env or {})


def kern(node: str) -> dict[str, str]:
    return {"host": node, "filename": "/var/log/kern.log", "job": "syslog"}


# -- configuration ------------------------------------------------------------------------
def test_minimal_block_is_complete_and_registered():
    cfg = parse_config("logs", {"kind": "loki", "url": "http://loki:3100", "node_label": "host"})
    assert isinstance(cfg, LokiConfig)
    assert cfg.source_name == "loki"
    assert cfg.max_entries_per_query == 5000 and cfg.max_window_seconds == 6 * 3600
    src = cfg.client("atlas")
    assert isinstance(src, LogSource) and src.name == "loki"
    cluster = ClusterConfig.model_validate(
        {"logs": [{"kind": "loki", "name": "main", "url": "https://loki.example:3100/"}]}
    )
    assert cluster.logs[0].source_name == "loki:main"
    (loki,) = Cluster("atlas", cluster).log_configs  # validated by the kind registry
    assert isinstance(loki, LokiConfig) and loki.url == "https://loki.example:3100"


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "loki:3100"},
        {"url": "http://l", "node_label": "host-name"},
        {"url": "http://l", "bearer_token_env": "T", "basic_user": "u", "basic_password_env": "P"},
        {"url": "http://l", "basic_user": "u"},
        {"url": "http://l", "selectors": {"bad-label": "x"}},
        {"url": "http://l", "client_key": "/k.pem"},
        {"url": "http://l", "password": "secret"},  # secrets only via env var names
        {"url": "http://reader:secret@loki:3100"},
    ],
)
def test_bad_blocks_are_refused(bad):
    with pytest.raises(ValueError):
        parse_config("logs", {"kind": "loki", **bad})


def test_selectors_as_mapping_or_matcher_string():
    a = LokiConfig(url="http://l", selectors={"job": "syslog"})
    b = LokiConfig(url="http://l", selectors='{job=~"syslog|kernel", env!="dev"}')
    assert build_query(a, ["n1"], ["x y z"]).startswith(
        '{host=~"(?i)(?:(?:n1)(?:\\\\.[^:]*)?)(?::[0-9]+)?", job="syslog"}'
    )
    assert ', job=~"syslog|kernel", env!="dev"}' in build_query(b, ["n1"], ["abc"])


# -- escaping -------------------------------------------------------------------------------
TRICKY = ["SXid (PCI:", "rc = -5.0", 'say "hi"', "C:\\temp\\x", "a|b", "[x]{2}^$*+?"]


def test_line_filter_escapes_re2_and_logql_strings():
    f = line_filter(TRICKY)
    assert f.startswith('|~ "') and f.endswith('"')
    # LogQL string level: backslashes doubled, quotes escaped
    assert logql_string('a"b\\c') == '"a\\"b\\\\c"'
    assert logql_string("tab\there") == '"tab\\there"'
    # what Loki would compile: parse the LogQL string back and use it as a regex
    _, filters = parse_logql('{a="b"} ' + f)
    rx = re.compile(filters[0][1])
    for lit in TRICKY:
        assert rx.search(f"prefix {lit} suffix"), lit
    for near in ["SXid PCI:", "rc = -5x0", "say hi", "C:tempx", "ab", "xx2"]:
        assert rx.search(near) is None, near


def test_tricky_anchors_pushed_down_select_exactly_their_lines(fake_http):
    loki = FakeLoki()
    lines = [f"{lit} present" for lit in TRICKY] + ["SXid PCI: near miss", "a b", "C:tempx"]
    for i, line in enumerate(lines):
        loki.add(kern("node-a"), T0 + i * S, line)
    loki.install(fake_http)
    anchors = [Anchor(literal=x) for x in TRICKY]
    recs, cov = client(fake_http.url).fetch_logs(ctx(), anchors, WINDOW).pair()
    assert sorted(r.text for r in recs) == sorted(f"{lit} present" for lit in TRICKY)
    assert cov.status == "partial" and cov.nodes_missing == ["node-b"]  # node-b has no stream
    q = loki.queries[0]
    assert q["direction"] == "forward" and q["limit"] == "5000"
    assert int(q["start"]) == to_ns(WINDOW.start) and int(q["end"]) == to_ns(WINDOW.end) + 1


# -- records ----------------------------------------------------------------------------------
def test_records_node_time_stream_locator(fake_http):
    loki = FakeLoki()
    ts = T0 + 61 * S + 123_456_789
    loki.add(
        {"host": "NODE-A.cluster.local", "filename": "/var/log/kern.log"},
        ts,
        "NVRM: Xid (PCI:0000:91:00): 79, pid=1",
    )
    loki.add({"host": "node-b", "unit": "slurmd.service"}, ts + 1, "node-b:1:2 [0] NCCL WARN boom")
    loki.add({"host": "node-a", "filename": "/var/log/kern.log"}, ts + 2, "nothing to see")
    loki.add({"host": "node-c", "filename": "/var/log/kern.log"}, ts + 3, "NVRM: Xid other job")
    loki.install(fake_http)
    # candidate lines only here; the liveness queries: tests/test_loki_liveness.py
    recs, cov = client(fake_http.url, liveness=False).fetch_logs(ctx(), ANCHORS, WINDOW).pair()
    assert [(r.node, r.stream) for r in recs] == [
        ("node-a", "kern.log"),
        ("node-b", "slurmd.service"),
    ]
    a = recs[0]
    assert a.source == "loki" and a.time_quality == "exact"
    assert a.time == datetime(2026, 11, 2, 10, 1, 1, 123456, tzinfo=UTC)
    sel = '{filename="/var/log/kern.log", host="NODE-A.cluster.local"}'
    assert a.locator == QueryAt(language="logql", query=sel, at_ns=ts)
    assert str(a.locator) == f"{sel} @ns:{ts}"
    assert cov.status == "ok" and cov.nodes_read == ["node-a", "node-b"]
    assert cov.queries == 2 and cov.records == 2 and cov.lines == 2 and cov.bytes > 0
    # the locator's selector finds the line again (Grafana Explore / logcli)
    sel = a.locator.query
    code, body = loki.evaluate({"query": sel, "start": str(ts), "end": str(ts + 1), "limit": "10"})
    assert body["data"]["result"][0]["values"] == [[str(ts), a.text]]


def test_instance_label_with_port_and_alias(fake_http):
    loki = FakeLoki()
    loki.add({"instance": "gpu-017:9100"}, T0, "NCCL WARN x")
    loki.add({"instance": "10.1.0.18:9100"}, T0 + 1, "NCCL WARN y")
    loki.install(fake_http)
    c = ctx(["gpu-017.cluster", "gpu-018"], node_addresses={"gpu-018": ["10.1.0.18"]})
    recs, cov = client(fake_http.url, node_label="instance").fetch_logs(c, ANCHORS, WINDOW).pair()
    assert [r.node for r in recs] == ["gpu-017.cluster", "gpu-018"]
    assert cov.status == "ok"


def test_long_lines_truncated_and_counted(fake_http):
    loki = FakeLoki()
    loki.add(kern("node-a"), T0, "NVRM: Xid " + "x" * 1000)
    loki.install(fake_http)
    recs, cov = client(fake_http.url, max_line_bytes=300).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    ).pair()
    assert len(recs[0].text.encode()) == 300 and cov.overlong_lines == 1


def test_headers_tenant_and_bearer_from_named_env(fake_http):
    loki = FakeLoki()
    loki.install(fake_http)
    c = client(
        fake_http.url, env={"LOKI_TOKEN": "s3cret"}, tenant="team-a", bearer_token_env="LOKI_TOKEN"
    )
    c.fetch_logs(ctx(), ANCHORS, WINDOW)
    h = fake_http.requests[-1].headers
    assert h["x-scope-orgid"] == "team-a" and h["authorization"] == "Bearer s3cret"
    c2 = client(fake_http.url, env={"PW": "pw"}, basic_user="reader", basic_password_env="PW")
    c2.fetch_logs(ctx(), ANCHORS, WINDOW)
    assert fake_http.requests[-1].headers["authorization"].startswith("Basic ")


def test_empty_secret_env_fails_without_a_request(fake_http):
    FakeLoki().install(fake_http)
    recs, cov = client(fake_http.url, bearer_token_env="LOKI_TOKEN").fetch_logs(
        ctx(), ANCHORS, WINDOW
    ).pair()
    assert cov.status == "failed" and "LOKI_TOKEN is empty" in cov.errors[0]
    assert fake_http.requests == [] and cov.retryable is False


# -- pagination ---------------------------------------------------------------------------------
def test_pagination_equal_ns_at_the_page_edge_no_gap_no_duplicate(fake_http):
    """limit 4; timestamps 1,2,3,3,3,3,4,...: the first page ends inside the run of 3s."""
    loki = FakeLoki()
    stamps = [1, 2, 3, 3, 3, 3, 4, 5, 5, 6, 7, 7, 7, 8]
    for i, t in enumerate(stamps):
        node = "node-a" if i % 2 else "node-b"  # two streams interleaved at equal ns
        loki.add(kern(node), T0 + t * S, f"NCCL WARN entry {i}")
    loki.install(fake_http)
    recs, cov = client(fake_http.url, max_entries_per_query=4, liveness=False).fetch_logs(
        ctx(), ANCHORS, WINDOW
    ).pair()
    texts = [r.text for r in recs]
    assert sorted(texts) == sorted(f"NCCL WARN entry {i}" for i in range(len(stamps)))
    assert len(set(texts)) == len(texts)
    starts = [int(q["start"]) for q in loki.queries]
    # each page resumes AT the last timestamp of the previous one (inclusive)
    assert starts[0] == to_ns(WINDOW.start)
    assert starts[1] == T0 + 3 * S
    assert all(b >= a for a, b in zip(starts, starts[1:], strict=False))
    assert cov.records == len(stamps) and cov.lines == len(stamps)
    assert cov.queries == len(loki.queries) + 1  # + the series lookup
    assert not cov.errors and cov.status == "ok"


def test_more_entries_at_one_ns_than_a_page_is_reported_not_looped(fake_http):
    """8 entries at one ns, pages of 3: the probe with limit 6 is full too -> reported."""
    loki = FakeLoki(max_entries=6)
    for i in range(8):
        loki.add(kern("node-a"), T0, f"NCCL WARN same ns {i}")
    loki.add(kern("node-a"), T0 + S, "NCCL WARN later")
    loki.install(fake_http)
    c = client(fake_http.url, max_entries_per_query=3)
    recs, cov = c.fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert "NCCL WARN later" in [r.text for r in recs]
    assert len(recs) == 7  # 6 of the 8 same-ns entries, and the later one
    assert cov.status == "partial" and "more than 3 entries at one nanosecond" in cov.errors[0]


def test_a_full_page_at_one_ns_is_completed_by_a_probe(fake_http):
    """5 entries at one ns, pages of 3: the one-nanosecond probe (limit 6) reads them all."""
    loki = FakeLoki()
    for i in range(5):
        loki.add(kern("node-a"), T0, f"NCCL WARN same ns {i}")
    loki.add(kern("node-a"), T0 + S, "NCCL WARN later")
    loki.install(fake_http)
    c = client(fake_http.url, max_entries_per_query=3)
    recs, cov = c.fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert len(recs) == 6 and len({r.text for r in recs}) == 6
    assert cov.status == "ok" and not cov.errors
    probe = [q for q in loki.queries if int(q["end"]) - int(q["start"]) == 1]
    assert probe and probe[0]["limit"] == "6"


def test_pushdown_off_reads_everything_and_filters_in_the_client(fake_http):
    loki = FakeLoki()
    for i in range(40):
        line = f"NCCL WARN {i}" if i % 10 == 3 else f"noise line {i}"
        loki.add(kern("node-a" if i % 2 else "node-b"), T0 + (i // 3) * S, line)
    loki.install(fake_http)
    on, cov_on = (
        client(fake_http.url, max_entries_per_query=7).fetch_logs(ctx(), ANCHORS, WINDOW).pair()
    )
    n_on = len(loki.queries)
    off, cov_off = client(fake_http.url, max_entries_per_query=7, pushdown=False).fetch_logs(
        ctx(), ANCHORS, WINDOW
    ).pair()
    assert sorted(str(r.locator) for r in on) == sorted(str(r.locator) for r in off)
    assert len(on) == 4 and cov_on.lines == 4
    assert cov_off.lines == 40 and cov_off.records == 4  # every line moved, once
    assert all("|~" not in q["query"] for q in loki.queries[n_on:])
    assert cov_off.bytes > cov_on.bytes


def test_long_window_is_split_into_contiguous_chunks(fake_http):
    loki = FakeLoki()
    for m in range(0, 30, 3):
        loki.add(kern("node-a"), T0 + m * 60 * S, f"NCCL WARN minute {m}")
    loki.install(fake_http)
    recs, cov = client(fake_http.url, max_window_seconds=600, liveness=False).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    ).pair()
    assert len(recs) == 10 and cov.status == "ok"
    spans = [(int(q["start"]), int(q["end"])) for q in loki.queries]
    assert len(spans) == 4  # 33 minutes in 10-minute chunks
    assert spans[0][0] == to_ns(WINDOW.start) and spans[-1][1] == to_ns(WINDOW.end) + 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(e - s <= 600 * S for s, e in spans)


def test_query_over_max_bytes_splits_anchors_and_still_finds_all(fake_http):
    loki = FakeLoki()
    anchors = [Anchor(literal=f"anchor-number-{i:03d} (x)") for i in range(120)]
    for i in range(0, 120, 7):
        loki.add(kern("node-a"), T0 + i * S, f"line with anchor-number-{i:03d} (x)")
    loki.add(kern("node-a"), T0 + 500 * S, "anchor-number-007 x  (near miss)")
    loki.install(fake_http)
    recs, cov = client(fake_http.url, max_query_bytes=1024).fetch_logs(
        ctx(["node-a"]), anchors, WINDOW
    ).pair()
    assert len(loki.queries) > 1
    assert all(len(q["query"]) < 1024 for q in loki.queries)
    assert sorted(r.text for r in recs) == sorted(
        f"line with anchor-number-{i:03d} (x)" for i in range(0, 120, 7)
    )
    assert cov.status == "ok"


# -- errors and retries --------------------------------------------------------------------
def serve_then(fake_http, loki: FakeLoki, failures: list[tuple]) -> None:
    """Answer each failure in turn, then let the fake Loki answer."""
    pending = list(failures)

    def handler(req):
        if pending:
            return pending.pop(0)
        return loki.query_range(req)

    fake_http.route("GET", "/loki/api/v1/query_range", handler)
    fake_http.route("GET", "/loki/api/v1/series", loki.series)


def one_hit() -> FakeLoki:
    loki = FakeLoki()
    loki.add(kern("node-a"), T0, "NVRM: Xid 79")
    return loki


def test_429_with_retry_after_then_success(fake_http):
    serve_then(fake_http, one_hit(), [(429, "too many outstanding requests", {"Retry-After": "7"})])
    sleeps = Sleeps()
    recs, cov = client(fake_http.url, sleeps).fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert len(recs) == 1 and cov.status == "ok" and not cov.errors
    assert sleeps == [7.0]


def test_retry_after_is_capped_and_http_dates_parsed(fake_http):
    serve_then(fake_http, one_hit(), [(503, "overloaded", {"Retry-After": "3600"})])
    sleeps = Sleeps()
    client(fake_http.url, sleeps, max_backoff_seconds=5).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    )
    assert sleeps == [5.0]
    now = 1_800_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 12))
    assert retry_after_seconds(date, now=now) == pytest.approx(12, abs=1)
    assert retry_after_seconds("garbage") is None and retry_after_seconds("2") == 2.0


def test_500_then_success_with_exponential_backoff(fake_http):
    serve_then(fake_http, one_hit(), [(500, "boom"), (502, "bad gateway")])
    sleeps = Sleeps()
    recs, cov = client(fake_http.url, sleeps, backoff_seconds=0.5).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    ).pair()
    assert len(recs) == 1 and cov.status == "ok"
    assert sleeps == [0.5, 1.0]


def test_5xx_until_retries_run_out_is_failed_and_retryable(fake_http):
    serve_then(fake_http, one_hit(), [(503, "down")] * 10)
    recs, cov = client(fake_http.url, retries=2).fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert recs == [] and cov.status == "failed"
    assert cov.retryable is True
    assert "answered 503: down (after 3 attempts)" in cov.errors[-1]


def test_timeout_is_transient(fake_http):
    def slow(req):
        time.sleep(1.0)
        return 200, {"status": "success", "data": []}

    fake_http.route("GET", "/loki/api/v1/series", slow)
    fake_http.route("GET", "/loki/api/v1/query_range", slow)
    recs, cov = client(fake_http.url, timeout_seconds=0.2, retries=1).fetch_logs(
        ctx(), ANCHORS, WINDOW
    ).pair()
    assert recs == [] and cov.status == "failed" and cov.retryable is True
    assert "did not answer within 0.2s (after 2 attempts)" in cov.errors[0]
    assert cov.queries == 2


def test_timeout_then_success(fake_http):
    loki = one_hit()
    calls = []

    def flaky(req):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.0)
        return loki.query_range(req)

    fake_http.route("GET", "/loki/api/v1/query_range", flaky)
    fake_http.route("GET", "/loki/api/v1/series", loki.series)
    recs, cov = client(fake_http.url, timeout_seconds=0.3).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    ).pair()
    assert len(recs) == 1 and cov.status == "ok"


def test_connection_refused_is_transient():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    sleeps = Sleeps()
    recs, cov = client(f"http://127.0.0.1:{port}", sleeps, retries=2).fetch_logs(
        ctx(), ANCHORS, WINDOW
    ).pair()
    assert recs == [] and cov.status == "failed" and cov.retryable is True
    assert "is unreachable (ConnectError" in cov.errors[0] and len(sleeps) == 2


def test_malformed_json_is_failed_not_retryable(fake_http):
    fake_http.route(
        "GET", "/loki/api/v1/series", lambda r: (200, {"status": "success", "data": []})
    )
    fake_http.route(
        "GET",
        "/loki/api/v1/query_range",
        lambda r: (200, b'{"status": "succ', {"Content-Type": "application/json"}),
    )
    recs, cov = client(fake_http.url).fetch_logs(ctx(), ANCHORS, WINDOW).pair()
    assert cov.status == "failed"
    assert cov.retryable is False and "not JSON" in cov.errors[0]
    assert len([r for r in fake_http.requests if r.path.endswith("query_range")]) == 1


def test_401_names_the_env_var_and_is_not_retried(fake_http):
    fake_http.route("GET", "/loki/api/v1/series", lambda r: (401, "no org id"))
    fake_http.route("GET", "/loki/api/v1/query_range", lambda r: (401, "no org id"))
    c = client(fake_http.url, env={"LOKI_TOKEN": "expired"}, bearer_token_env="LOKI_TOKEN")
    recs, cov = c.fetch_logs(ctx(), ANCHORS, WINDOW).pair()
    assert recs == [] and cov.status == "failed" and cov.retryable is False
    assert cov.errors == [f"loki at {fake_http.url} answered 401: check the token in $LOKI_TOKEN"]
    assert len(fake_http.requests) == 1


def test_other_4xx_fails_once(fake_http):
    fake_http.route(
        "GET", "/loki/api/v1/series", lambda r: (200, {"status": "success", "data": []})
    )
    fake_http.route(
        "GET",
        "/loki/api/v1/query_range",
        lambda r: (400, "parse error at line 1, col 5: syntax error"),
    )
    recs, cov = client(fake_http.url).fetch_logs(ctx(), ANCHORS, WINDOW).pair()
    assert cov.retryable is False and "answered 400: parse error" in cov.errors[0]
    assert len([r for r in fake_http.requests if r.path.endswith("query_range")]) == 1


def test_400_max_entries_lowers_the_limit(fake_http):
    loki = FakeLoki(max_entries=3)
    for i in range(8):
        loki.add(kern("node-a"), T0 + i * S, f"NCCL WARN {i}")
    loki.install(fake_http)
    recs, cov = client(fake_http.url, max_entries_per_query=5000, liveness=False).fetch_logs(
        ctx(["node-a"]), ANCHORS, WINDOW
    ).pair()
    assert len(recs) == 8 and cov.status == "ok" and not cov.errors
    assert loki.queries[0]["limit"] == "5000"
    assert {q["limit"] for q in loki.queries[1:]} == {"3"}


def test_400_time_range_shrinks_the_window(fake_http):
    loki = FakeLoki(max_query_length_ns=600 * S)
    for m in range(0, 30, 2):
        loki.add(kern("node-a"), T0 + m * 60 * S, f"NCCL WARN minute {m}")
    loki.install(fake_http)
    src = client(fake_http.url, liveness=False)
    recs, cov = src.fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW).pair()
    assert len(recs) == 15 and cov.status == "ok"
    ok = [q for q in loki.queries if int(q["end"]) - int(q["start"]) <= 600 * S]
    assert len(ok) == len(loki.queries) - 1  # only the first, whole-window query was refused


def test_400_series_limit_splits_the_nodes(fake_http):
    loki = FakeLoki(max_series=2)
    for i, n in enumerate(["node-a", "node-b", "node-c", "node-d"]):
        loki.add(kern(n), T0 + i * S, f"NCCL WARN on {n}")
    loki.install(fake_http)
    recs, cov = client(fake_http.url).fetch_logs(
        ctx(["node-a", "node-b", "node-c", "node-d"]), ANCHORS, WINDOW
    ).pair()
    assert sorted(r.node for r in recs) == ["node-a", "node-b", "node-c", "node-d"]
    assert cov.status == "ok"


def test_classify_real_loki_messages():
    assert classify_400(
        "max entries limit per query exceeded, limit > max_entries_limit_per_query (6000 > 5000)"
    ) == ("limit", 5000)
    assert classify_400(
        "max entries limit per query exceeded, limit > max_entries_limit (6000 > 1000)"
    ) == ("limit", 1000)
    assert classify_400(
        "the query time range exceeds the limit (query length: 745h0m0s, limit: 721h0m0s)"
    ) == ("range", 721 * 3600 * S)
    assert classify_400(
        "the query time range exceeds the limit (query length: 32d, limit: 30d1h)"
    ) == (
        "range",
        (30 * 24 + 1) * 3600 * S,
    )
    assert (
        classify_400("maximum number of series (500) reached for a single query; consider")[0]
        == "series"
    )
    assert classify_400("maximum of series (500) reached for a single query")[0] == "series"
    assert (
        classify_400("the query would read too many bytes (query: 12 GB, limit: 10 GB)")[0]
        == "volume"
    )
    assert classify_400("parse error at line 1, col 5: syntax error") is None
    assert parse_duration_ns("1m30s") == 90 * S and parse_duration_ns("soon") is None


# -- continuation lines ------------------------------------------------------------------------
def test_context_after_is_read_with_a_second_narrow_query(fake_http):
    loki = FakeLoki()
    app = {"host": "node-a", "filename": "/var/log/app.log"}
    block = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================",
        "train.py FAILED",
        "  exitcode  : 1 (pid: 4242)",
        "not in the context",
    ]
    for i, line in enumerate(block):
        loki.add(app, T0 + 100 * S + i * 1000, line)
    loki.install(fake_http)
    anchors = [*ANCHORS, Anchor(literal="ChildFailedError", context_after=3)]
    src = client(fake_http.url, liveness=False)
    recs, cov = src.fetch_logs(ctx(["node-a"]), anchors, WINDOW).pair()
    assert len(recs) == 1
    assert recs[0].text == "\n".join(block[:4])
    ctx_query = loki.queries[-1]
    assert ctx_query["query"] == '{filename="/var/log/app.log", host="node-a"}'  # no line filter
    assert cov.queries == 3 and cov.status == "ok"


def test_multiline_entry_keeps_its_anchor_lines():
    loki = FakeLoki()
    loki.add(kern("node-a"), T0, "header line\nNCCL WARN inside\nnext")
    code, body = loki.evaluate(
        {
            "query": build_query(LokiConfig(url="http://l"), ["node-a"], ["NCCL WARN"]),
            "start": str(T0),
            "end": str(T0 + 1),
            "limit": "5",
        }
    )
    assert len(body["data"]["result"]) == 1  # `|~` sees the whole multi-line entry


# -- coverage ----------------------------------------------------------------------------------
def test_series_tells_missing_nodes_from_nodes_without_hits(fake_http):
    loki = FakeLoki()
    loki.add(kern("node-a"), T0, "NVRM: Xid 79")
    loki.add(kern("node-b"), T0, "quiet healthy node")  # logs, but no hit
    loki.install(fake_http)
    recs, cov = client(fake_http.url).fetch_logs(
        ctx(["node-a", "node-b", "node-c"]), ANCHORS, WINDOW
    ).pair()
    assert cov.nodes_read == ["node-a", "node-b"] and cov.nodes_missing == ["node-c"]
    assert cov.status == "partial"


def test_failed_loki_in_pipeline_is_one_failed_coverage_entry(fake_http):
    fake_http.route("GET", "/loki/api/v1/series", lambda r: (503, "Service Unavailable"))
    src = client(fake_http.url, retries=1, name="main")
    result = pipeline.analyze_context(ctx(), sources=EvidenceSources(logs=(src,)))
    cov = result.coverage[0]
    assert cov.source == "loki:main" and cov.status == "failed" and cov.retryable is True
    assert cov.queries == 2 and cov.errors[0].endswith(
        "answered 503: Service Unavailable (after 2 attempts)"
    )


# -- end to end: a bundled sample served from the fake Loki ---------------------------------------
SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def serve_case(case: Path, loki: FakeLoki) -> ExecutionContext:
    """Every line of a case's log files as a Loki entry, stamped the way a shipper would.

    A line with its own time keeps it (a shipper's timestamp stage). A line without one gets
    its ingestion time, which for a live shipper is about when it was written: after the
    timed line before it and no later than the next timed line of the same file, so it is
    stamped just before that next timed line (1 µs apart, order kept), or at the job end
    when no timed line follows (srun's `error: node-b: task 1: Exited` summary is written
    when the job ends, not when the banner before it was)."""
    c = pipeline.load_context(case)
    parser = TimestampParser(c.start, c.log_timezone)
    end_ns = to_ns(c.end)
    for path in sorted((case / "logs").rglob("*")):
        if not path.is_file():
            continue
        node = path.relative_to(case / "logs").parts[0]
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        name = path.relative_to(case / "logs" / node).as_posix().removesuffix(".gz")
        labels = {"host": node, "filename": f"/var/log/{name}", "job": "varlogs"}
        if name.endswith(".json"):
            # a `kubectl get events -o json` dump: an event exporter ships one JSON line per
            # event, stamped with the event's own time
            for item in json.loads(raw).get("items", []):
                when = (
                    item.get("eventTime") or item.get("lastTimestamp") or item.get("firstTimestamp")
                )
                stamp = datetime.fromisoformat(when.replace("Z", "+00:00"))
                loki.add({**labels, "job": "k8s-events"}, to_ns(stamp), json.dumps(item))
            continue
        lines = [ln for ln in raw.split(b"\n") if ln]
        stamps: list[int | None] = []
        for line in lines:
            t = parser.parse_line(line)
            stamps.append(to_ns(t) if t is not None else None)
        following = end_ns
        for i in range(len(lines) - 1, -1, -1):
            if stamps[i] is None:
                following -= 1000
                stamps[i] = following
            else:
                following = stamps[i]  # type: ignore[assignment]
        for line, ts in zip(lines, stamps, strict=True):
            loki.add(labels, ts, line.decode("utf-8", "replace").removesuffix("\r"))
    return c.model_copy(update={"case_dir": None})


def cluster_selectors(case: Path) -> list[str]:
    """The `cluster_selectors` a cluster shipping this case's logs would configure: its
    cluster-level directories (`logs/<name that is not a job node>/`: UFM, OpenSM, a leaf
    switch's syslog, the controller), which serve_case ships with `host=<dir name>`, as one
    stream selector, evaluated by the fake Loki like any other."""
    c = pipeline.load_context(case)
    index = NodeIndex.of(c)
    dirs = sorted(
        p.name for p in (case / "logs").iterdir() if p.is_dir() and index.resolve(p.name) is None
    )
    if not dirs:
        return []
    return [f"host=~{logql_string('|'.join(map(re2_escape, dirs)))}"]


def _file_only_samples() -> list[str]:
    return sorted(
        p.name
        for p in SAMPLES.iterdir()
        if (p / "context.json").is_file() and (p / "logs").is_dir() and not (p / "metrics").exists()
        and not (p / "dumps").exists()  # flight-recorder dumps are case files, not log lines
    )


def test_end_to_end_xid149_from_loki(fake_http):
    """samples/xid149-nvlink-3node served from the fake Loki, no case files: the same
    result as from files, with one candidate-line query for the whole job."""
    case = SAMPLES / "xid149-nvlink-3node"
    loki = FakeLoki()
    c = serve_case(case, loki)
    loki.install(fake_http)
    src = client(fake_http.url, name="e2e")
    got = pipeline.analyze_context(c, sources=EvidenceSources(logs=(src,)))
    want = pipeline.analyze_case(case)
    assert (got.status, got.category, got.suspect_nodes) == (
        want.status,
        want.category,
        want.suspect_nodes,
    )
    assert got.status == "attributed" and got.category == "gpu.nvlink"
    assert got.suspect_nodes == ["node-b"]
    cov = got.coverage[0]
    assert cov.source == "loki:e2e" and cov.status == "ok" and cov.nodes_read == c.nodes
    assert got.evidence and all(" @ns:" in e.locator for e in got.evidence)
    assert all(e.locator.startswith("{") for e in got.evidence)
    main = [q for q in loki.queries if "|~" in q["query"] and q.get("direction") == "forward"]
    assert len(main) == 1  # one candidate-line query for the whole job
    # + one continuation read per node's app.log: each traceback names ChildFailedError
    # twice (`raise ChildFailedError(` and the exception line); one read serves both
    # + liveness: two count_over_time queries (every line; progress lines) and one backward
    # read of the last progress lines (the three nodes' last progress share one bucket)
    metric = [q for q in loki.queries if q["query"].startswith("sum by")]
    backward = [q for q in loki.queries if q.get("direction") == "backward"]
    assert len(metric) == 2 and len(backward) == 1
    assert len(loki.queries) == 1 + 3 + 2 + 1 and cov.queries == 1 + 1 + 3 + 2 + 1
    # ChildFailedError blocks came with their continuation lines (second, narrow queries)
    raw = pipeline.collect_evidence(None, c, sources=EvidenceSources(logs=(src,)))
    blocks = [r for r in raw.records if r.text.startswith("torch.distributed.elastic")]
    assert blocks and all(r.text.count("\n") >= 3 for r in blocks)


HELDOUT = Path(__file__).resolve().parents[2] / "heldout"
# held-out cases whose verdict depends on where logs or training progress stop (the files
# path without its tails / last progress lines gives another verdict for the first four);
# before the liveness queries Loki disagreed with files on those four. h107 is left out: it
# also depends on liveness, but its root cause is an untimed traceback, which files read as
# an interval and a shipper stamps at ingestion (serve_case), a difference of its own.
LIVENESS_CASES = [
    "h103-kueue-pod-goes-silent-gloo-closed",
    "h105-timeout-after-link-flap-training-continued",
    "h114-two-nodes-one-silent-gloo-by-ip",
    "h115-nvlink-xid-then-30-min-progress-then-host-oom",
    "h111-mce-panic-then-silence",
    "h117-xid79-node-then-silent-peers-converge",
]


@pytest.mark.parametrize("sample", _file_only_samples() + [f"heldout/{n}" for n in LIVENESS_CASES])
def test_every_log_only_sample_from_loki_equals_files(fake_http, sample):
    """Each bundled sample without metrics, and the held-out cases that hinge on silence or
    progress, served from the fake Loki: status, category, suspect nodes and fault domain
    equal the files path (see serve_case for how entries are stamped; a case's cluster-level
    directories are read through `cluster_selectors`). Silence and progress come from Loki's
    liveness queries (count_over_time matrices), never from case files."""
    case = HELDOUT / sample.split("/", 1)[1] if sample.startswith("heldout/") else SAMPLES / sample
    loki = FakeLoki()
    c = serve_case(case, loki)
    loki.install(fake_http)
    # the cluster-level streams (switch-side lines, a controller) as cluster_selectors
    src = client(fake_http.url, cluster_selectors=cluster_selectors(case))
    # a case's topology (issue 23) is the cluster's: the Loki path reads it as a topology
    # source, as a configured cluster would (switch-side lines need it to name a node)
    topology = ()
    if (case / "topology").is_dir():
        from attribution_dagster.connectors.topology.files import TopologyFilesConfig

        topology = (TopologyFilesConfig(paths=[str(case / "topology")]).client("e2e"),)
    got = pipeline.analyze_context(c, sources=EvidenceSources(logs=(src,), topology=topology))
    want = pipeline.analyze_case(case)
    assert (got.status, got.category, got.suspect_nodes) == (
        want.status,
        want.category,
        want.suspect_nodes,
    )
    # the switch, its ports and the nodes under it (topology samples) as from files
    assert got.fault_domain == want.fault_domain
    assert got.coverage[0].status in ("ok", "partial")
    if sample.startswith("heldout/"):  # where each node stopped came from Loki
        raw = pipeline.collect_evidence(None, c, sources=EvidenceSources(logs=(src,)))
        tails = raw.tails
        assert {t.node for t in tails} == set(raw.coverage[0].nodes_read)
        # an interval (the bucket of its last lines), or, for a node that stopped early,
        # its last line read exactly
        assert all(
            str(t.locator).startswith("count_over_time(")
            if t.time_quality == "inherited"
            else str(t.locator).startswith("{")
            for t in tails
        )
