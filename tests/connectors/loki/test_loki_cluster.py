"""Cluster-level Loki streams (`cluster_selectors`, connectors/loki/cluster.py): the lines
switches and fabric managers write, read with one extra query per selector and kept by the
files connector's rule (a line naming a job node, or a switch-side one) on CLUSTER_NODE.

Served by tests/fakes/fake_loki.py, which evaluates the selector, the `|~` filter,
`start` / `end` / `limit` and paging as Loki does (the `query_range` response shape of the
Loki HTTP API reference). The UFM, OpenSM and Cumulus lines are the formats of
../shared/reference/TOPOLOGY-FACTS.md, as in samples/topo-*. The anchors are the parser
catalog's own, so the switch-side flags come from rules/parsers.yaml.
"""

from __future__ import annotations

import time
from urllib.parse import quote_plus

import pytest
from fake_loki import FakeLoki, parse_logql
from test_loki import T0, WINDOW, Sleeps, client, ctx, kern

from attribution_dagster import pipeline
from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.loki.client import LokiConfig
from attribution_dagster.connectors.loki.cluster import cluster_query
from attribution_dagster.core.hosts import CLUSTER_NODE

pytestmark = pytest.mark.loki

S = 1_000_000_000
UFM = {"host": "ufm-01", "job": "ufm", "filename": "/opt/ufm/log/event.log"}
OPENSM = {"host": "sm-01", "job": "opensm", "filename": "/var/log/opensm.log"}
ANCHORS = pipeline.catalog().anchors(last_only=True)
UFM_DOWN = (
    "2026-11-02 10:{m:02d}:31.575 [881301] [329] WARNING [Fabric_Topology] Link [Source "
    "b8599f0300100200_3  TO Dest: b8599f0300200204_1]: Link went down: b8599f0300100200 "
    "(Switch: ib-leaf-02) : 3 - b8599f0300200204 (Computer: gpu-{n:03d} HCA-1) : 1"
)
SM_DOWN = (
    "Nov 02 10:05:09 124000 [7A1FF640] 0x02 -> osm_pi_rcv_process: Switch 0xb8599f0300100700 "
    "MF0;ib-leaf-07:MQM9700/U1 port {p} changed state from ACTIVE to DOWN"
)


def cluster_queries(loki: FakeLoki) -> list[dict[str, str]]:
    return [q for q in loki.queries if not q["query"].startswith(("{host=~", "sum by"))]


def served() -> FakeLoki:
    """Two job nodes with a kernel line each; UFM and OpenSM streams of the fabric."""
    loki = FakeLoki()
    loki.add(kern("node-a"), T0 + 1 * S, "NVRM: Xid (PCI:0000:91:00): 79, pid=1")
    loki.add(kern("node-b"), T0 + 2 * S, "kernel: healthy line")
    loki.add(UFM, T0 + 60 * S, UFM_DOWN.format(m=1, n=901))  # a switch port: switch-side
    loki.add(UFM, T0 + 61 * S, "2026-11-02 10:01:32.000 INFO [Fabric_Topology] health ok")
    loki.add(OPENSM, T0 + 300 * S, SM_DOWN.format(p=14))
    # the controller's line naming a job node (kept, on CLUSTER_NODE: the parsers move it)
    loki.add(OPENSM, T0 + 301 * S, "NVRM: Xid (PCI:0000:1b:00): 79 reported for node-b")
    # an anchor line naming no job node and not switch-side: context only, not kept
    loki.add(OPENSM, T0 + 302 * S, "NVRM: Xid (PCI:0000:1b:00): 79 reported for gpu-777")
    return loki


# -- configuration ------------------------------------------------------------------------
def test_cluster_selectors_forms():
    one = LokiConfig(url="http://l", cluster_selectors='job="ufm"')
    assert one.cluster_stream_selectors() == ['{job="ufm"}']
    many = LokiConfig(
        url="http://l",
        cluster_selectors=['{job="ufm"}', 'host=~"ib-leaf.*", env!="dev"', {"job": "opensm"}],
    )
    assert many.cluster_stream_selectors() == [
        '{job="ufm"}',
        '{host=~"ib-leaf.*", env!="dev"}',
        '{job="opensm"}',
    ]
    assert LokiConfig(url="http://l").cluster_selectors == []  # default: no extra query
    # every selector the fake Loki (and so LogQL's grammar) parses
    for sel in many.cluster_stream_selectors():
        matchers, filters = parse_logql(cluster_query(sel, ["Link went down"]))
        assert matchers and filters == [("|~", "Link went down")]


@pytest.mark.parametrize(
    "bad, says",
    [
        ('job!="ufm"', "at least one = or =~"),  # would read every stream
        ('job=""', "at least one = or =~"),
        ("", "at least one = or =~"),
        ('job="ufm" host="x"', "is not a label matcher"),  # missing comma
        ("job", "is not a label matcher"),
        ('{job="ufm"', "label matchers only"),
        ({"bad-label": "x"}, "not a Loki label name"),
        ({"job": ""}, "non-empty value"),
        ([{"job": "ufm"}, 'job=~"a"}{x="b"'], "cluster_selectors[1]"),
    ],
)
def test_bad_cluster_selectors_are_refused_with_a_clear_line(bad, says):
    with pytest.raises(ValueError) as err:
        parse_config("logs", {"kind": "loki", "url": "http://l", "cluster_selectors": bad})
    assert says in str(err.value)


# -- the query and its records ----------------------------------------------------------------
def test_one_cluster_query_per_selector_and_the_files_rule(fake_http):
    loki = served()
    loki.install(fake_http)
    src = client(fake_http.url, cluster_selectors=['job=~"ufm|opensm"'])
    batch = src.fetch_logs(ctx(), ANCHORS, WINDOW)
    (q,) = cluster_queries(loki)  # one extra query for the job
    assert q["query"].startswith('{job=~"ufm|opensm"} |~ "')
    assert "Link went down" in q["query"] and "osm_pi_rcv_process: Switch" in q["query"]
    assert q["direction"] == "forward" and q["limit"] == "5000"
    assert int(q["start"]) == T0 - 120 * S and int(q["end"]) == T0 + 31 * 60 * S + 1
    cluster = [r for r in batch.records if r.node == CLUSTER_NODE]
    assert [r.text for r in cluster] == [
        UFM_DOWN.format(m=1, n=901),
        SM_DOWN.format(p=14),
        "NVRM: Xid (PCI:0000:1b:00): 79 reported for node-b",
    ]
    assert cluster[0].source == "loki" and cluster[0].time_quality == "exact"
    assert str(cluster[0].locator) == (
        '{filename="/opt/ufm/log/event.log", host="ufm-01", job="ufm"} @ns:' + str(T0 + 60 * S)
    )
    assert cluster[1].stream == "opensm.log"
    cov = batch.coverage
    assert cov.context_lines == 1  # gpu-777's line: read, not kept (as from files)
    assert cov.status == "ok" and cov.nodes_read == ["node-a", "node-b"]
    assert not any("no job node" in e for e in cov.errors)  # ufm-01 / sm-01 are expected
    # cluster-level streams say nothing about where a job node stopped
    assert {t.node for t in batch.tails} == {"node-a", "node-b"}


def test_without_cluster_selectors_no_cluster_query_and_no_cluster_lines(fake_http):
    loki = served()
    loki.install(fake_http)
    batch = client(fake_http.url).fetch_logs(ctx(), ANCHORS, WINDOW)
    assert cluster_queries(loki) == []
    assert all(r.node != CLUSTER_NODE for r in batch.records)


def test_a_cluster_stream_of_a_job_node_stays_that_nodes(fake_http):
    """A selector that also matches a job node's stream (a central syslog job): its lines are
    that node's, read once even though both queries return them."""
    loki = served()
    loki.install(fake_http)
    batch = client(fake_http.url, cluster_selectors=['filename="/var/log/kern.log"']).fetch_logs(
        ctx(), ANCHORS, WINDOW
    )
    xid = [r for r in batch.records if r.text.startswith("NVRM: Xid (PCI:0000:91:00)")]
    assert [r.node for r in xid] == ["node-a"]


def test_a_switch_side_line_becomes_the_cabled_nodes_evidence(fake_http):
    """samples/topo-link-switch-side-only from Loki: without cluster_selectors the UFM line
    is never read and no node is suspected; with them the engine names gpu-002 and the
    switch port, as from files."""
    from test_loki import SAMPLES, cluster_selectors, serve_case

    from attribution_dagster.connectors.clusters import EvidenceSources
    from attribution_dagster.connectors.topology.files import TopologyFilesConfig

    case = SAMPLES / "topo-link-switch-side-only"
    loki = FakeLoki()
    c = serve_case(case, loki)
    loki.install(fake_http)
    topo = (TopologyFilesConfig(paths=[str(case / "topology")]).client("t"),)
    verdicts = []
    for selectors in ([], cluster_selectors(case)):
        src = client(fake_http.url, cluster_selectors=selectors)
        got = pipeline.analyze_context(c, sources=EvidenceSources(logs=(src,), topology=topo))
        verdicts.append(got)
    assert cluster_selectors(case) == ['host=~"ufm"']
    assert verdicts[0].suspect_nodes == [] and verdicts[0].fault_domain is None
    fd = verdicts[1].fault_domain
    assert verdicts[1].suspect_nodes == ["gpu-002"]
    assert fd is not None and fd.level == "link" and fd.name == "ib-leaf-02"
    assert [(p.node, p.switch, p.switch_port) for p in fd.ports] == [("gpu-002", "ib-leaf-02", "3")]


# -- caps ---------------------------------------------------------------------------------------
def test_cluster_query_pages_caps_lines_and_keeps_to_the_window(fake_http):
    loki = FakeLoki()
    loki.add(kern("node-a"), T0, "NVRM: Xid (PCI:0000:91:00): 79, pid=1")
    for k in range(5):  # five port-down traps, the last two at one nanosecond
        loki.add(OPENSM, T0 + (100 + min(k, 3)) * S, SM_DOWN.format(p=10 + k))
    loki.add(OPENSM, T0 - 600 * S, SM_DOWN.format(p=1))  # before the window: not read
    loki.add(UFM, T0 + 200 * S, UFM_DOWN.format(m=3, n=902) + " " + "x" * 600)
    loki.install(fake_http)
    src = client(
        fake_http.url,
        cluster_selectors=[{"job": "opensm"}, 'job="ufm"'],
        max_entries_per_query=2,
        max_line_bytes=300,
        liveness=False,
    )
    batch = src.fetch_logs(ctx(["node-a"]), ANCHORS, WINDOW)
    cluster = [r for r in batch.records if r.node == CLUSTER_NODE]
    ports = sorted(int(r.text.split(" port ")[1].split()[0]) for r in cluster if "port" in r.text)
    assert ports == [10, 11, 12, 13, 14]  # every trap once, none doubled at a page edge
    ufm = [r for r in cluster if "Link went down" in r.text]
    assert len(ufm) == 1 and len(ufm[0].text.encode()) == 300
    assert batch.coverage.overlong_lines == 1
    qs = cluster_queries(loki)
    shapes = [(q["query"].split(" |~")[0], int(q["start"]), q["limit"]) for q in qs]
    w0, sm = T0 - 120 * S, '{job="opensm"}'
    assert shapes == [
        (sm, w0, "2"),  # pages of max_entries_per_query from the window start,
        (sm, T0 + 101 * S, "2"),  # each resuming at the last timestamp, inclusive
        (sm, T0 + 102 * S, "2"),
        (sm, T0 + 103 * S, "2"),  # a full page at one nanosecond:
        (sm, T0 + 103 * S, "4"),  # that nanosecond alone, twice the limit
        (sm, T0 + 103 * S + 1, "2"),
        ('{job="ufm"}', w0, "2"),  # the second selector: its own query
    ]


def test_a_long_anchor_list_is_split_to_fit_max_query_bytes(fake_http):
    loki = served()
    loki.install(fake_http)
    src = client(fake_http.url, cluster_selectors=['job="ufm"'], max_query_bytes=1024)
    batch = src.fetch_logs(ctx(), ANCHORS, WINDOW)
    qs = cluster_queries(loki)
    assert len(qs) > 1 and all(len(quote_plus(q["query"])) <= 1024 for q in qs)
    assert [r.text for r in batch.records if r.node == CLUSTER_NODE] == [
        UFM_DOWN.format(m=1, n=901)
    ]


def test_without_pushdown_the_client_filters_cluster_lines(fake_http):
    loki = served()
    loki.install(fake_http)
    src = client(fake_http.url, cluster_selectors=['job="ufm"'], pushdown=False, liveness=False)
    batch = src.fetch_logs(ctx(), ANCHORS, WINDOW)
    (q,) = cluster_queries(loki)
    assert q["query"] == '{job="ufm"}'  # no line filter: both UFM lines travel
    assert [r.text for r in batch.records if r.node == CLUSTER_NODE] == [
        UFM_DOWN.format(m=1, n=901)
    ]


# -- failures: partial, never a traceback ----------------------------------------------------
def failing_cluster(fake_http, loki: FakeLoki, answer) -> None:
    """The fake Loki, except that cluster-level queries get `answer(req)`."""

    def route(req):
        if req.arg("query", "").startswith('{job="ufm"}'):
            return answer(req)
        return loki.query_range(req)

    loki.install(fake_http)
    fake_http.route("GET", "/loki/api/v1/query_range", route)


def test_cluster_query_500_leaves_the_nodes_lines_and_liveness(fake_http):
    loki = served()
    failing_cluster(fake_http, loki, lambda req: (500, "internal error: ring unhealthy"))
    sleeps = Sleeps()
    src = client(fake_http.url, sleeps, cluster_selectors=['job="ufm"'], retries=2)
    batch = src.fetch_logs(ctx(), ANCHORS, WINDOW)
    cov = batch.coverage
    assert cov.status == "partial" and cov.retryable is True
    (err,) = [e for e in cov.errors if "cluster-level" in e]
    assert err.startswith('cluster-level streams {job="ufm"}: loki at ')
    assert err.endswith("answered 500: internal error: ring unhealthy (after 3 attempts)")
    assert len(sleeps) == 2
    assert [r.node for r in batch.records] == ["node-a"]  # the nodes' lines, still there
    assert {t.node for t in batch.tails} == {"node-a", "node-b"}  # liveness still ran
    # and the analysis goes on: the result carries the partial coverage
    result = pipeline.analyze_context(ctx(), sources=_sources(src))
    assert result.coverage[0].status == "partial"


def test_cluster_query_timeout_is_partial_and_retryable(fake_http):
    loki = served()

    def slow(req):
        time.sleep(1.0)
        return loki.query_range(req)

    failing_cluster(fake_http, loki, slow)
    src = client(fake_http.url, cluster_selectors=['job="ufm"'], timeout_seconds=0.3, retries=1)
    batch = src.fetch_logs(ctx(), ANCHORS, WINDOW)
    cov = batch.coverage
    assert cov.status == "partial" and cov.retryable is True
    assert any(
        e.startswith('cluster-level streams {job="ufm"}') and "did not answer within 0.3s" in e
        for e in cov.errors
    )
    assert [r.node for r in batch.records] == ["node-a"]


def test_a_selector_loki_refuses_is_partial_not_retryable(fake_http):
    loki = served()
    failing_cluster(
        fake_http, loki, lambda req: (400, "parse error at line 1, col 6: syntax error")
    )
    batch = client(fake_http.url, cluster_selectors=['job="ufm"']).fetch_logs(
        ctx(), ANCHORS, WINDOW
    )
    cov = batch.coverage
    assert cov.status == "partial" and cov.retryable is False
    assert any("answered 400: parse error" in e for e in cov.errors)


def test_only_cluster_streams_is_partial_not_empty(fake_http):
    loki = FakeLoki()
    loki.add(UFM, T0 + 60 * S, UFM_DOWN.format(m=1, n=1))
    loki.install(fake_http)
    batch = client(fake_http.url, cluster_selectors=['job="ufm"']).fetch_logs(
        ctx(), ANCHORS, WINDOW
    )
    assert batch.coverage.status == "partial" and batch.coverage.nodes_missing == [
        "node-a",
        "node-b",
    ]
    assert [r.node for r in batch.records] == [CLUSTER_NODE]


def _sources(src):
    from attribution_dagster.connectors.clusters import EvidenceSources

    return EvidenceSources(logs=(src,))
