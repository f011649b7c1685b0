"""Prometheus metric source (connectors/prometheus/: client.py, promql.py; retries in
connectors/http.py).

Three layers:

- PromQL text (escaping, node regex, step formula, the queries per parser mode): no server.
- Error mapping and the request flow against `fake_http`, answering the Prometheus HTTP API
  shapes (`{"status": "success", "data": {"resultType": "matrix"|"vector", "result": [...]}}`,
  `{"status": "error", "errorType": ..., "error": ...}`) as documented at
  https://prometheus.io/docs/prometheus/latest/querying/api/ and as the real Prometheus
  2.42 of `scripts/ci-prometheus.sh` answers them.
- A REAL Prometheus (marker `prometheus`): `scripts/ci-prometheus.sh start` backfills it with
  exactly the `metrics/*.prom` samples of every bundled case (samples/ and tests/heldout/),
  each series labelled `attribution_case`. Each case read from it must yield the same
  observations as its files, and analysing the case with its logs from files and its metrics
  from Prometheus must give the same status, category and suspects. These tests are skipped
  when ATTRIBUTION_TEST_PROM_URL is unset, and FAIL then if ATTRIBUTION_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from attribution_dagster import pipeline
from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.clusters import Cluster, EvidenceSources
from attribution_dagster.connectors.prometheus.client import (
    PrometheusClient,
    PrometheusConfig,
    with_extra,
)
from attribution_dagster.connectors.prometheus.promql import (
    Selectors,
    fetch_selector,
    promql_string,
    step_seconds,
)
from attribution_dagster.core.config import ClusterConfig
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricFamily, RawEvidence
from attribution_dagster.core.hosts import node_regex
from attribution_dagster.core.hosts import re2_escape as regex_escape
from attribution_dagster.core.settings import AnalysisSettings, Window

UTC = timezone.utc
REPO = Path(__file__).resolve().parents[3]
PROM_URL = os.environ.get("ATTRIBUTION_TEST_PROM_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"

START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
END = datetime(2026, 11, 2, 10, 30, tzinfo=UTC)
WINDOW = Window(start=START - timedelta(minutes=2), end=END + timedelta(minutes=1))


def make_ctx(nodes: list[str], **kw) -> ExecutionContext:
    return ExecutionContext(
        job_id="1", scheduler="slurm", state="FAILED", start=START, end=END, nodes=nodes, **kw
    )


# -- PromQL text ---------------------------------------------------------------------------


def _re2ish(regex: str) -> re.Pattern:
    """Prometheus anchors matchers fully; the constructs used here mean the same in `re`."""
    return re.compile(f"^(?:{regex[4:]})$", re.IGNORECASE) if regex.startswith("(?i)") else (
        re.compile(f"^(?:{regex})$"))


def test_promql_string_escapes_quotes_backslashes_newlines():
    assert promql_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_regex_escape_makes_metacharacters_literal():
    pat = _re2ish(regex_escape("gpu.017+(x)"))
    assert pat.match("gpu.017+(x)")
    assert not pat.match("gpuX017+(x)")


@pytest.mark.parametrize(
    "label, hit",
    [
        ("node-a", True),
        ("NODE-A", True),
        ("node-a:9400", True),  # instance
        ("node-a.cluster.local", True),
        ("node-a.cluster.local:9100", True),
        ("node-b", True),
        ("10.64.3.7:9400", True),  # an address from ctx.node_addresses
        ("node-ab", False),
        ("xnode-a", False),
        ("node-a:port", False),
        ("10.64.3.70", False),
        ("dcgm-exporter-b9152", False),
    ],
)
def test_node_regex_matches_every_spelling_of_job_nodes_only(label, hit):
    pat = _re2ish(node_regex(["node-a", "node-b.cluster.local", "10.64.3.7"]))
    assert bool(pat.match(label)) is hit


def test_step_formula_is_max_15s_or_window_over_500():
    assert step_seconds(3600) == 15.0
    assert step_seconds(24 * 3600) == 173.0  # ceil(86400 / 500)
    assert step_seconds(7 * 24 * 3600) == 1210.0
    assert step_seconds(24 * 3600, override=60) == 60.0


def test_families_come_from_the_parser_catalog():
    extra = ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "up"]
    fams = {f.id: f for f in with_extra(pipeline.catalog().metric_families(), extra)}
    assert fams["dcgm_xid"].names == ("DCGM_FI_DEV_XID_ERRORS",)
    assert fams["dcgm_xid"].mode == "last_value"
    assert "node_infiniband_link_downed_total" in fams["ib_link_downed_counter"].names
    assert fams["ib_port_state"].normal == 4 and fams["ib_port_state"].steady_after == 3
    assert fams["extra_metrics"].names == ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "up")


def test_screen_query_per_mode_for_all_nodes_in_one_query():
    sels = Selectors(node_regex(["a", "b"]), ["Hostname", "instance"], 'cluster="atlas"', 3601)
    counter = sels.screen(MetricFamily(id="c", names=("X_TOTAL", "Y_TOTAL"), mode="increase"))
    assert counter.count("changes(") == 4  # 2 names x 2 node labels, one query
    assert "max_over_time" not in counter
    assert 'label_replace(' in counter and '"__name__", "Y_TOTAL"' in counter
    regex = '"(?i)(?:(?:a|b)(?:\\\\.[^:]*)?)(?::[0-9]+)?"'
    assert f'X_TOTAL{{Hostname=~{regex},cluster="atlas"}}' in counter
    assert "[3601000ms]" in counter
    gauge = sels.screen(MetricFamily(id="g", names=("XID",), mode="last_value"))
    assert "max_over_time(" in gauge and "!= 0" in gauge
    state = sels.screen(MetricFamily(id="s", names=("ST",), mode="state", normal=4, steady_after=3))
    assert "!= 4" in state and "count_over_time(" in state and "< 3" in state
    presence = sels.presence(["X_TOTAL", "XID"])
    assert presence.startswith("count by (Hostname, instance) (")


def test_fetch_selector_narrows_to_the_hits():
    hits = [
        {"__name__": "XID", "Hostname": "node-b", "gpu": "3", "UUID": "GPU-3"},
        {"__name__": "XID", "Hostname": "node-c", "gpu": "5", "UUID": "GPU-5", "pod": "p"},
    ]
    sel = fetch_selector(["XID"], "Hostname", ["node-b", "node-c"], 'cluster="x"', hits)
    assert sel == (
        '{__name__=~"XID",Hostname=~"node\\\\-b|node\\\\-c",cluster="x",'
        'UUID=~"GPU\\\\-3|GPU\\\\-5",gpu=~"3|5"}'
    ).replace("\\\\-", "-")  # '-' is not escaped (not an RE2 metacharacter)


def test_config_registered_and_validated():
    cfg = parse_config(
        "metrics",
        {
            "kind": "prometheus",
            "url": "http://prom:9090/",
            "name": "main",
            "headers": {"X-Scope-OrgID": "tenant-a"},
            "extra_selector": 'cluster="atlas"',
        },
    )
    assert isinstance(cfg, PrometheusConfig)
    assert cfg.url == "http://prom:9090" and cfg.source_name == "prometheus:main"
    assert cfg.node_labels[0] == "Hostname" and "instance" in cfg.node_labels
    with pytest.raises(ValueError, match="http"):
        PrometheusConfig(url="prom:9090")
    with pytest.raises(ValueError, match="matchers only"):
        PrometheusConfig(url="http://p", extra_selector='{cluster="a"}')
    with pytest.raises(ValueError, match="unknown|extra"):
        parse_config("metrics", {"kind": "prometheus", "url": "http://p", "password": "x"})


# -- request flow and errors against fake_http ----------------------------------------------

XID = "DCGM_FI_DEV_XID_ERRORS"
CATALOG = pipeline.catalog().metric_families()
FAMILIES = [
    MetricFamily(id="dcgm_xid", names=(XID,), mode="last_value"),
    MetricFamily(
        id="ib_link_downed_counter", names=("node_infiniband_link_downed_total",), mode="increase"
    ),
]
T0 = int(START.timestamp())


def ok(data):
    return (200, {"status": "success", "data": data})


def matrix(series):
    return {"resultType": "matrix", "result": series}


def vector(series):
    return {"resultType": "vector", "result": series}


def fake_prometheus(fake, *, fail_family: str | None = None, status: int = 503):
    """A Prometheus answering the connector's four kinds of requests in the API's shapes."""
    pod = {"Hostname": "dcgm-exporter-b9152", "node": "node-c", "gpu": "5"}

    def labels(req):
        return ok(["Hostname", "__name__", "device", "gpu", "instance", "node", "port"])

    def query(req):
        q = req.arg("query") or ""
        if fail_family and fail_family in q and q.startswith("label_replace("):
            return (status, {"status": "error", "errorType": "internal", "error": "boom"})
        if q.startswith("count by"):
            return ok(vector([
                {"metric": {"Hostname": "node-a"}, "value": [T0, "8"]},
                {"metric": {"Hostname": "dcgm-exporter-b9152", "node": "node-c"},
                 "value": [T0, "8"]},
            ]))
        if q.startswith("label_replace(") and XID in q:  # screen
            return ok(vector([
                {"metric": {"__name__": XID, "Hostname": "node-a", "gpu": "3"},
                 "value": [T0, "1"]},
                {"metric": {"__name__": XID, **pod}, "value": [T0, "1"]},
                {"metric": {"__name__": XID, "Hostname": "dcgm-exporter-zz", "gpu": "1"},
                 "value": [T0, "1"]},
            ]))
        if q.startswith("label_replace("):
            return ok(vector([]))
        if q.startswith("{__name__=~") and 'Hostname=~"node-a"' in q:  # raw samples
            return ok(matrix([{
                "metric": {"__name__": XID, "Hostname": "node-a", "gpu": "3"},
                "values": [[T0, "0"], [T0 + 60, "79"], [T0 + 120.5, "79"], [T0 + 180, "NaN"]],
            }]))
        if q.startswith("{__name__=~") and 'node=~"node-c"' in q:
            return ok(matrix([{"metric": {"__name__": XID, **pod},
                               "values": [[T0, "0"], [T0 + 90, "48"]]}]))
        return (400, {"status": "error", "errorType": "bad_data", "error": f"unexpected {q}"})

    fake.route("POST", "/api/v1/labels", labels)
    fake.route("GET", "/api/v1/label/__name__/values",
               lambda req: ok([XID, "node_infiniband_link_downed_total", "up"]))
    fake.route("POST", "/api/v1/query", query)


def route_everything(fake, handler):
    for method in ("GET", "POST"):
        fake.route_prefix(method, "/api/v1/", handler)


def client_for(fake_url: str, sleep=lambda s: None, **kw) -> PrometheusClient:
    """A client on the fake; retry waits are recorded by `sleep` (none by default), not slept."""
    return PrometheusClient(PrometheusConfig(url=fake_url, **kw), sleep=sleep)


def test_reads_samples_of_changed_series_with_locators(fake_http):
    fake_prometheus(fake_http)
    ctx = make_ctx(["node-a", "node-b", "node-c"])
    samples, cov = client_for(fake_http.url).fetch_metrics(ctx, FAMILIES, WINDOW)
    # labels, names, 2 screens, 2 raw fetches (Hostname group, node group), presence
    assert cov.queries == 7, [r.arg("query")[:60] for r in fake_http.requests]
    assert cov.status == "partial" and cov.nodes_missing == ["node-b"]
    assert cov.nodes_read == ["node-a", "node-c"]
    assert cov.bytes > 500  # response bodies counted
    assert cov.samples == 6 and cov.records == 5  # NaN dropped
    assert {s.node for s in samples} == {"node-a", "node-c"}  # exporter pod is no node
    s79 = next(s for s in samples if s.value == 79)
    assert s79.time == START + timedelta(seconds=60) and s79.source == "prometheus"
    assert str(s79.locator) == f'promql: {XID}{{Hostname="node-a",gpu="3"}} @ {T0 + 60}'
    assert any(str(s.locator).endswith(f"@ {T0 + 120}.5") for s in samples)
    obs = pipeline.normalize(RawEvidence(job_id="1", samples=samples), ctx)
    assert [(o.kind, o.node, o.code, o.gpu) for o in obs] == [
        ("xid", "node-a", 79, 3), ("xid", "node-c", 48, 5)]


def test_one_family_failing_leaves_the_others_partial(fake_http):
    fake_prometheus(fake_http, fail_family="node_infiniband_link_downed_total", status=503)
    samples, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "partial"
    assert len(cov.errors) == 1 and "ib_link_downed_counter" in cov.errors[0]
    assert "answered 503" in cov.errors[0] and "boom" in cov.errors[0]
    assert cov.retryable is True
    assert any(s.value == 79 for s in samples)


def test_bad_query_400_is_not_retryable(fake_http):
    fake_prometheus(fake_http, fail_family="node_infiniband_link_downed_total", status=400)
    _, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "partial" and cov.retryable is False
    assert "answered 400" in cov.errors[0]


def test_every_query_500_is_failed_and_retryable(fake_http):
    route_everything(fake_http, lambda req: (500, "internal error"))
    samples, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert samples == [] and cov.status == "failed" and cov.retryable is True
    # the first (index-only) call answered 500 four times (3 retries, connectors/http.py):
    # the fetch stops there rather than hammer a failing server with the other calls
    assert cov.queries == 4 and len(cov.errors) == 1 and "(after 4 attempts)" in cov.errors[0]
    assert all("answered 500" in e for e in cov.errors)


def test_timeout_is_retryable_with_an_actionable_line(fake_http):
    def slow(req):
        time.sleep(0.6)
        return ok(["Hostname"])

    fake_http.route_prefix("POST", "/api/v1/", slow)
    t = time.monotonic()
    _, cov = client_for(fake_http.url, timeout_seconds=0.2).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert time.monotonic() - t < 4
    assert cov.status == "failed" and cov.retryable is True
    # the index-only first call timed out, was retried (3 retries, connectors/http.py) and
    # timed out again: the rest would too
    assert cov.queries == 4 and "(after 4 attempts)" in cov.errors[0]
    assert "did not answer /api/v1/labels within 0.2s" in cov.errors[0]
    assert "timeout_seconds" in cov.errors[0]


def test_one_family_timing_out_leaves_the_others(fake_http):
    fake_prometheus(fake_http)
    answer = fake_http.routes[("POST", "/api/v1/query")]

    def slow_ib(req):
        if "node_infiniband_link_downed_total" in (req.arg("query") or "")[:200]:
            time.sleep(0.6)
        return answer(req)

    fake_http.route("POST", "/api/v1/query", slow_ib)
    samples, cov = client_for(fake_http.url, timeout_seconds=0.3).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "partial" and cov.retryable is True
    assert len(cov.errors) == 1 and cov.errors[0].startswith("family ib_link_downed_counter")
    assert any(s.value == 79 for s in samples)


def test_malformed_json_fails_with_a_clear_line(fake_http):
    route_everything(fake_http, lambda req: (200, "<html>login</html>"))
    _, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "failed" and cov.retryable is False
    assert "malformed JSON" in cov.errors[0] and "<html>login" in cov.errors[0]
    assert "\n" not in cov.errors[0]


def test_unexpected_result_type_is_an_error_not_a_crash(fake_http):
    fake_http.route("POST", "/api/v1/labels", lambda req: ok(["Hostname"]))
    fake_http.route("GET", "/api/v1/label/__name__/values", lambda req: ok([XID]))
    fake_http.route("POST", "/api/v1/query", lambda req: ok({"resultType": "scalar",
                                                             "result": [0, "1"]}))
    _, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "partial" and any("resultType 'scalar'" in e for e in cov.errors)


def test_401_stops_after_one_query_and_names_the_env_var(fake_http, monkeypatch):
    monkeypatch.setenv("PROM_TOKEN", "s3cret")
    fake_http.route_prefix("POST", "/api/v1/", lambda req: (401, "Unauthorized"))
    client = client_for(fake_http.url, bearer_token_env="PROM_TOKEN")
    _, cov = client.fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.queries == 1 and cov.status == "failed" and cov.retryable is False
    assert cov.errors == [
        f"label discovery: Prometheus at {fake_http.url} answered 401: "
        "check the token in $PROM_TOKEN"
    ]
    assert "s3cret" not in cov.errors[0]
    assert fake_http.requests[0].headers["authorization"] == "Bearer s3cret"


def test_403_without_credentials_says_how_to_configure_them(fake_http):
    fake_http.route_prefix("POST", "/api/v1/", lambda req: (403, {"error": "forbidden"}))
    _, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert "answered 403" in cov.errors[0] and "bearer_token_env" in cov.errors[0]


def test_connection_refused_is_retryable_and_stops(fake_http):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nobody listens
    _, cov = client_for(f"http://127.0.0.1:{port}").fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    # one call, retried 3 times (connectors/http.py), then the fetch stops
    assert cov.queries == 4 and cov.status == "failed" and cov.retryable is True
    assert "cannot connect to Prometheus at" in cov.errors[0]


def test_headers_basic_auth_and_extra_selector_are_sent(fake_http, monkeypatch):
    monkeypatch.setenv("PROM_PW", "pw")
    fake_prometheus(fake_http)
    client = client_for(
        fake_http.url,
        headers={"X-Scope-OrgID": "tenant-a"},
        basic_user="reader",
        basic_password_env="PROM_PW",
        extra_selector='cluster="atlas"',
    )
    client.fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    first = fake_http.requests[0]
    assert first.headers["x-scope-orgid"] == "tenant-a"
    assert first.headers["authorization"].startswith("Basic ")
    assert first.arg("match[]") == (
        '{__name__=~"DCGM_FI_DEV_XID_ERRORS|node_infiniband_link_downed_total",cluster="atlas"}'
    )
    names = fake_http.requests[1]
    assert (names.method, names.path) == ("GET", "/api/v1/label/__name__/values")
    assert names.arg("match[]") == first.arg("match[]")
    queries = fake_http.requests[2:]
    assert queries and all('cluster="atlas"' in r.arg("query") for r in queries)
    assert all(float(r.arg("time")) == WINDOW.end.timestamp() for r in queries)


def test_no_node_label_on_the_series_is_empty_with_a_hint(fake_http):
    fake_http.route("POST", "/api/v1/labels", lambda req: ok(["__name__", "job", "gpu"]))
    _, cov = client_for(fake_http.url).fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "empty" and cov.queries == 1
    assert "carries a node label" in cov.errors[0] and "node_labels" in cov.errors[0]


def test_transport_is_injectable():
    """Tests (and callers) can swap the transport, not the code path."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"status": "success", "data": []})

    client = PrometheusClient(PrometheusConfig(url="http://prom.invalid"),
                              transport=httpx.MockTransport(handler))
    _, cov = client.fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert seen == ["/api/v1/labels"] and cov.status == "empty"
    assert "holds no series" in cov.errors[0]


def test_pipeline_takes_case_logs_and_cluster_metrics(tmp_path, fake_http):
    """A case with logs/ but no metrics/ reads its metrics from the cluster's source."""
    fake_prometheus(fake_http)
    src = REPO / "samples" / "metrics-only-cause"
    case = tmp_path / "case"
    shutil.copytree(src, case, ignore=shutil.ignore_patterns("metrics"))
    ctx = pipeline.load_context(case)
    client = client_for(fake_http.url)
    raw = pipeline.collect_evidence(case, ctx, sources=EvidenceSources(metrics=(client,)))
    assert [c.source for c in raw.coverage] == ["files:logs", "prometheus"]
    assert raw.records and fake_http.requests
    # a case holding metrics/ keeps reading its own files, as before
    fake_http.requests.clear()
    raw = pipeline.collect_evidence(src, ctx, sources=EvidenceSources(metrics=(client,)))
    assert [c.source for c in raw.coverage] == ["files:logs", "files:metrics"]
    assert fake_http.requests == []


# -- a real Prometheus ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def prom_url() -> str:
    if not PROM_URL:
        if REQUIRE:
            pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PROM_URL is unset "
                        "(scripts/ci-prometheus.sh start did not run or failed)")
        pytest.skip("ATTRIBUTION_TEST_PROM_URL is not set (scripts/ci-prometheus.sh start)")
    return PROM_URL


def metric_cases() -> list[Path]:
    out = []
    for root in (REPO / "samples", REPO / "tests" / "heldout"):
        out.extend(sorted(p for p in root.iterdir() if (p / "metrics").is_dir()))
    return out


CASES = metric_cases()


def prom_client(url: str, case: Path) -> PrometheusClient:
    return PrometheusConfig(
        url=url, extra_selector=f'attribution_case="{case.name}"'
    ).client(case.name)


def obs_key(o) -> tuple:
    return (o.kind, o.node, o.time, o.gpu, o.pci, o.port, o.code, o.parser,
            o.attrs.get("delta"), o.attrs.get("state"))


@pytest.mark.prometheus
def test_real_prometheus_holds_the_fixture(prom_url):
    """Guard: the server CI started is reachable and holds every case's series."""
    data = httpx.get(f"{prom_url}/api/v1/label/attribution_case/values", timeout=10).json()
    assert data["status"] == "success"
    assert {c.name for c in CASES} <= set(data["data"])
    assert len(CASES) >= 2


@pytest.mark.prometheus
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_real_prometheus_gives_the_same_observations_as_the_files(prom_url, case):
    ctx = pipeline.load_context(case)
    window = AnalysisSettings().window(ctx)
    samples, cov = prom_client(prom_url, case).fetch_metrics(ctx, CATALOG, window)
    file_samples, file_cov = pipeline.LocalFilesClient().fetch_metrics(case, ctx, CATALOG, window)
    read = {n for f in CATALOG for n in (*f.names, *f.companions)}
    if not {s.name for s in file_samples} & read:
        # only series no parser reads (h146: DCGM power violation): the source says so
        [error] = cov.errors
        assert error.startswith("Prometheus holds no series of") and not samples
        return
    assert cov.errors == [] and cov.status in ("ok", "partial")
    assert cov.nodes_read == file_cov.nodes_read
    prom_obs = pipeline.normalize(RawEvidence(job_id="1", samples=samples), ctx)
    file_obs = pipeline.normalize(RawEvidence(job_id="1", samples=file_samples), ctx)
    assert sorted(map(obs_key, prom_obs)) == sorted(map(obs_key, file_obs))
    assert all(str(o.locator).startswith("promql: ") and o.source == "prometheus" for o in prom_obs)
    # fewer samples cross the wire than the files hold: only series that changed
    assert cov.records <= len(file_samples)
    assert cov.queries <= 2 + 2 * len(CATALOG)


@pytest.mark.prometheus
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_end_to_end_logs_from_files_metrics_from_prometheus(prom_url, case, tmp_path):
    """The case without its metrics/ dir, the cluster's metric source the real Prometheus:
    same status, category and suspect nodes as reading the `.prom` files."""
    expected = pipeline.analyze_case(case)
    stripped = tmp_path / case.name
    shutil.copytree(case, stripped, ignore=shutil.ignore_patterns("metrics"))
    cluster = Cluster("ci", ClusterConfig.model_validate({"metrics": [{
        "kind": "prometheus", "url": prom_url,
        "extra_selector": f'attribution_case="{case.name}"'}]}))
    ctx = pipeline.load_context(stripped)
    got = pipeline.analyze_context(ctx, case=stripped, sources=cluster.sources)
    assert (got.status, got.category, got.suspect_nodes) == (
        expected.status, expected.category, expected.suspect_nodes)
    prom_cov = [c for c in got.coverage if c.source == "prometheus"]
    assert len(prom_cov) == 1 and prom_cov[0].queries > 0


@pytest.mark.prometheus
def test_locator_reopens_the_sample_in_prometheus(prom_url):
    """`promql: <selector> @ <ts>` is valid PromQL (the @ modifier): pasted into Prometheus it
    returns exactly the sample the observation rests on."""
    case = REPO / "samples" / "metrics-only-cause"
    ctx = pipeline.load_context(case)
    window = AnalysisSettings().window(ctx)
    samples, _ = prom_client(prom_url, case).fetch_metrics(ctx, CATALOG, window)
    hit = next(s for s in samples if s.value == 79)
    query = str(hit.locator).removeprefix("promql: ")
    data = httpx.post(f"{prom_url}/api/v1/query", data={"query": query}, timeout=10).json()
    assert data["status"] == "success"
    (series,) = data["data"]["result"]
    assert float(series["value"][1]) == 79
    assert series["metric"]["Hostname"] == "node-b"


@pytest.mark.prometheus
def test_real_prometheus_unknown_selector_is_empty_not_failed(prom_url):
    case = REPO / "samples" / "metrics-only-cause"
    ctx = pipeline.load_context(case)
    client = PrometheusConfig(url=prom_url, extra_selector='attribution_case="nope"').client("x")
    samples, cov = client.fetch_metrics(ctx, CATALOG, AnalysisSettings().window(ctx))
    assert samples == [] and cov.status == "empty" and cov.nodes_missing == ctx.nodes
    assert "holds no series" in cov.errors[0]


@pytest.mark.prometheus
def test_real_prometheus_bad_extra_selector_is_a_400_line(prom_url):
    case = REPO / "samples" / "metrics-only-cause"
    ctx = pipeline.load_context(case)
    client = PrometheusConfig(url=prom_url, extra_selector="cluster=atlas").client("x")
    _, cov = client.fetch_metrics(ctx, CATALOG, AnalysisSettings().window(ctx))
    assert cov.status == "failed" and cov.retryable is False
    assert "answered 400" in cov.errors[0] and "bad_data" in cov.errors[0]


def test_end_to_end_cases_need_their_metrics(tmp_path):
    """The end-to-end comparison above is not vacuous: without metrics most of these cases
    get another status, category or suspects, so Prometheus must deliver the right samples."""
    differs = []
    for case in CASES:
        stripped = tmp_path / case.name
        shutil.copytree(case, stripped, ignore=shutil.ignore_patterns("metrics"))
        without = pipeline.analyze_context(pipeline.load_context(stripped), case=stripped)
        full = pipeline.analyze_case(case)
        if (without.status, without.category, without.suspect_nodes) != (
            full.status, full.category, full.suspect_nodes):
            differs.append(case.name)
    assert "metrics-only-cause" in differs
    assert len(differs) >= 5, differs


def test_unset_token_variable_and_missing_ca_bundle_are_named(fake_http, monkeypatch):
    monkeypatch.delenv("PROM_TOKEN_UNSET", raising=False)
    _, cov = client_for(fake_http.url, bearer_token_env="PROM_TOKEN_UNSET").fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "failed" and cov.queries == 0 and fake_http.requests == []
    assert cov.errors[0].startswith("environment variable PROM_TOKEN_UNSET is empty")
    assert "bearer_token_env" in cov.errors[0]
    client = client_for(fake_http.url, verify_tls="/nonexistent/ca.pem")
    _, cov = client.fetch_metrics(
        make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert cov.status == "failed" and cov.queries == 0
    assert "cannot load TLS files" in cov.errors[0] and "/nonexistent/ca.pem" in cov.errors[0]


@pytest.mark.prometheus
def test_real_prometheus_skips_quiet_series(prom_url):
    """A spare IB port DOWN all along (h71: cn-0414 mlx5_3) and GPUs whose XID stays 0 are
    screened out: none of their samples cross the wire, yet the observations are the same."""
    case = REPO / "tests" / "heldout" / "h71-ib-port-down-node-exporter-spare-port"
    ctx = pipeline.load_context(case)
    window = AnalysisSettings().window(ctx)
    samples, cov = prom_client(prom_url, case).fetch_metrics(ctx, CATALOG, window)
    file_samples, _ = pipeline.LocalFilesClient().fetch_metrics(case, ctx, CATALOG, window)
    assert any(s.labels.get("device") == "mlx5_3" for s in file_samples)
    assert not any(s.labels.get("device") == "mlx5_3" for s in samples)
    assert cov.samples < len(file_samples) / 2
    assert cov.nodes_read == ctx.nodes  # the presence query still sees every node


@pytest.mark.prometheus
def test_real_prometheus_long_window_subquery_path(prom_url):
    """Windows longer than raw_max_window_seconds read stepped points (`[W:step]`): with a
    step dividing the scrape interval the same events come out at the same times."""
    case = REPO / "samples" / "metrics-only-cause"
    ctx = pipeline.load_context(case)
    window = AnalysisSettings().window(ctx)
    client = PrometheusConfig(
        url=prom_url, extra_selector=f'attribution_case="{case.name}"',
        raw_max_window_seconds=60, step_seconds=60,
    ).client("x")
    samples, cov = client.fetch_metrics(ctx, CATALOG, window)
    assert cov.errors == []
    file_samples, _ = pipeline.LocalFilesClient().fetch_metrics(case, ctx, CATALOG, window)
    prom_obs = pipeline.normalize(RawEvidence(job_id="1", samples=samples), ctx)
    file_obs = pipeline.normalize(RawEvidence(job_id="1", samples=file_samples), ctx)
    assert sorted(map(obs_key, prom_obs)) == sorted(map(obs_key, file_obs))
    _, raw_cov = prom_client(prom_url, case).fetch_metrics(ctx, CATALOG, window)
    assert cov.samples > raw_cov.samples  # 60 s steps over a 120 s scrape interval
    times = sorted({s.time for s in samples})
    assert all((b - a).total_seconds() % 60 == 0 for a, b in zip(times, times[1:], strict=False))


# -- issue 21 probe: a rate-limited Prometheus is not hammered -------------------------------


def _stamped(fake, path: str, answers: list) -> list[float]:
    """Route POST `path` to `answers` in turn (then the fake Prometheus's own answer);
    returns the monotonic times of the requests, appended as they come."""
    times: list[float] = []
    real = fake.routes[("POST", path)]

    def handler(req):
        times.append(time.monotonic())
        return answers.pop(0) if answers else real(req)

    fake.route("POST", path, handler)
    return times


def test_429_with_retry_after_waits_as_told_then_reads(fake_http):
    """Issue 21: a Prometheus answering 429 `Retry-After: 2` got 11 requests within 10 ms.
    Now the client waits the 2 s it was told (real sleep, real HTTP) and asks once more."""
    fake_prometheus(fake_http)
    times = _stamped(fake_http, "/api/v1/labels",
                     [(429, "rate limited", {"Retry-After": "2"})])  # fmt: skip
    client = PrometheusClient(PrometheusConfig(url=fake_http.url))  # real time.sleep
    t = time.monotonic()
    samples, cov = client.fetch_metrics(make_ctx(["node-a"]), FAMILIES, WINDOW)
    elapsed = time.monotonic() - t
    assert len(times) == 2, times  # the 429, then one retry
    assert times[1] - times[0] >= 2.0 and elapsed < 5
    assert cov.errors == [] and any(s.value == 79 for s in samples)


def test_500_backs_off_exponentially_then_reads(fake_http):
    fake_prometheus(fake_http)
    times = _stamped(fake_http, "/api/v1/labels", [(500, "internal error"), (503, "busy")])
    client = PrometheusClient(PrometheusConfig(url=fake_http.url, backoff_seconds=0.3))
    samples, cov = client.fetch_metrics(make_ctx(["node-a"]), FAMILIES, WINDOW)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) == 3 and gaps[0] >= 0.3 and gaps[1] >= 0.6, gaps  # 0.3 s, then 0.6 s
    assert cov.errors == [] and any(s.value == 79 for s in samples)


def test_retry_after_is_capped_and_the_deadline_stops_retries(fake_http):
    """`Retry-After: 3600` waits `max_backoff_seconds`; a retry that would end after
    `retry_deadline_seconds` is not made (the error then says how many attempts)."""
    fake_prometheus(fake_http)
    _stamped(fake_http, "/api/v1/labels", [(429, "slow", {"Retry-After": "3600"})] * 10)
    waits: list[float] = []
    client = PrometheusClient(
        PrometheusConfig(url=fake_http.url, max_backoff_seconds=4, retry_deadline_seconds=10),
        sleep=waits.append,
    )
    _, cov = client.fetch_metrics(make_ctx(["node-a"]), FAMILIES, WINDOW)
    assert waits == [4.0, 4.0]  # a third 4 s wait would end past the 10 s deadline
    assert cov.status == "failed" and cov.retryable is True
    assert "answered 429" in cov.errors[0] and "(after 3 attempts)" in cov.errors[0]
