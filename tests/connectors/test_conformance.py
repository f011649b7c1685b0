"""Every connector through the conformance suite (attribution_dagster/connectors/conformance.py)
over the SAME recorded lines: the source contract of connectors/base.py, enforced.

The lines (conformance.recorded_job) are served by each back-end:

- files: a case directory (LocalFilesClient: `logs/<node>/app.log`, the Events as
  `logs/k8s/events.json`, DCGM samples as `metrics/dcgm.prom`) — the reference, it reads
  every line; and a shared root (FilesSource, `{node}/app.log`);
- loki: tests/fake_loki.py, which evaluates the LogQL the client sends and answers in the
  shapes of the Loki HTTP API reference;
- pod_logs: the real `kubernetes` client against tests/test_pod_logs.py's FakeKube (API
  reference shapes: kubelet-timestamped log lines, EventList), container logs and Events;
- elasticsearch: the official `elasticsearch` client against tests/fakes/fake_elasticsearch.py,
  which answers point-in-time and search requests with the recorded Elasticsearch REST API
  response shapes of tests/fixtures/elasticsearch/ (`_pit`, `_search` with `search_after`),
  each line one ECS document (`@timestamp`, `host.name`, `log.file.path`, `message`);
- opensearch: the `opensearch-py` client against tests/fakes/fake_opensearch.py, the same
  documents behind OpenSearch 2.x's point-in-time API and answer shapes
  (tests/fixtures/opensearch/: `_search/point_in_time`, `pit_id`, `_id` tiebreaker);
- Prometheus: the `.prom` text files and the Prometheus HTTP API (a fake in the documented
  `{"status": "success", "data": {"resultType": ...}}` shapes, as tests/test_prometheus.py).

What is recorded from real systems and what is not: the Event is node-problem-detector's
OOMKilling as a real cluster reports it (kube-eventer #131 / NPD #766 wording, the shape of
`kubectl get events -o json`, as in tests/heldout/h87-*); the Loki, Kubernetes,
Elasticsearch, OpenSearch and Prometheus answers are NOT recorded from live servers: they are fakes
that answer in the documented API shapes. (Live servers: tests/test_prometheus.py's
`prometheus` marker and scripts/ci-*.sh.)
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_elasticsearch import FakeElasticsearch
from fake_loki import FakeLoki
from fake_opensearch import FakeOpenSearch
from fake_pod_logs import FakeKube

from attribution_dagster import pipeline
from attribution_dagster.connectors import config_model
from attribution_dagster.connectors import conformance as cf
from attribution_dagster.connectors.base import LogSource, MetricSource
from attribution_dagster.connectors.elasticsearch.client import (
    ElasticsearchConfig,
    ElasticsearchSource,
)
from attribution_dagster.connectors.files.case import LocalFilesClient
from attribution_dagster.connectors.files.tree import FilesSource, FilesSourceConfig
from attribution_dagster.connectors.loki.client import LokiClient, LokiConfig
from attribution_dagster.connectors.loki.query import to_ns
from attribution_dagster.connectors.opensearch.client import OpenSearchConfig, OpenSearchSource
from attribution_dagster.connectors.pod_logs.client import PodLogsClient, PodLogsConfig
from attribution_dagster.connectors.prometheus.client import PrometheusClient, PrometheusConfig
from attribution_dagster.core.evidence import LogBatch, RawEvidence, RawRecord
from attribution_dagster.core.hosts import CLUSTER_NODE

XID = "DCGM_FI_DEV_XID_ERRORS"


@pytest.fixture(scope="module")
def job() -> cf.RecordedJob:
    return cf.recorded_job(
        pipeline.catalog().anchors(last_only=True), pipeline.catalog().metric_families()
    )


def stamp(t: Any) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def write_case(root: Path, job: cf.RecordedJob, events: bool) -> Path:
    case = root / ("case-events" if events else "case")
    for node in job.ctx.nodes:
        d = case / "logs" / node
        d.mkdir(parents=True)
        (d / "app.log").write_text(job.log_text(node))
    if events:  # a cluster-level directory: the control plane's Events
        (case / "logs" / "k8s").mkdir()
        (case / "logs" / "k8s" / "events.json").write_text(cf.event_list(job))
    (case / "metrics").mkdir()
    rows = []
    for _, name, labels, t, value in job.samples:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        rows.append(f"{name}{{{body}}} {value:g} {int(t.timestamp() * 1000)}")
    (case / "metrics" / "dcgm.prom").write_text(f"# TYPE {XID} gauge\n" + "\n".join(rows) + "\n")
    (case / "context.json").write_text(job.ctx.model_dump_json())
    return case


def observations(batch: LogBatch, job: cf.RecordedJob) -> list[Any]:
    raw = RawEvidence(
        job_id=job.ctx.job_id, records=batch.records, tails=batch.tails,
        progress=batch.progress, coverage=[batch.coverage],
    )  # fmt: skip
    return pipeline.normalize(raw, job.ctx)


def files_batch(tmp_path: Path, job: cf.RecordedJob, events: bool = False) -> LogBatch:
    case = write_case(tmp_path, job, events)
    client = LocalFilesClient(max_line_bytes=cf.CAP)
    return client.fetch_logs(case, job.ctx, job.anchors, job.window)


def shared_root_source(tmp_path: Path, job: cf.RecordedJob) -> FilesSource:
    root = tmp_path / "shared"
    for node in job.ctx.nodes:
        (root / node).mkdir(parents=True)
        (root / node / "app.log").write_text(job.log_text(node))
    return FilesSource(FilesSourceConfig(kind="files", root=str(root), paths=["{node}/app.log"]))


def loki_source(fake_http: Any, job: cf.RecordedJob, events: bool = False) -> LokiClient:
    """The nodes' lines as streams; with `events`, the Events as an event exporter ships them
    (one JSON line per Event at its own time, on a stream of no job node), read as a
    cluster-level stream (`cluster_selectors`)."""
    loki = FakeLoki()
    for node, lines in job.logs.items():
        for t, text in lines:
            labels = {"host": node, "filename": "/var/log/app.log", "job": "varlogs"}
            loki.add(labels, to_ns(t), text)
    block: dict[str, Any] = {"kind": "loki", "url": fake_http.url}
    if events:
        for ev in job.events:
            when = ev.get("eventTime") or ev.get("lastTimestamp") or ev.get("firstTimestamp")
            stamp = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
            loki.add({"host": "event-exporter", "job": "k8s-events"}, to_ns(stamp), json.dumps(ev))
        block["cluster_selectors"] = ['job="k8s-events"']
    loki.install(fake_http)
    cfg = LokiConfig.model_validate(block)
    return LokiClient(cfg, sleep=lambda s: None, environ={})


def ecs_documents(fake: FakeElasticsearch, fake_http: Any, job: cf.RecordedJob) -> None:
    """The lines as ECS documents in a fake Elasticsearch or OpenSearch (recorded API
    response shapes), served on fake_http."""
    for node, lines in job.logs.items():
        for t, text in lines:
            fake.add({"@timestamp": stamp(t), "host": {"name": node},
                      "log": {"file": {"path": "/var/log/app.log"}}, "message": text})  # fmt: skip
    fake.install(fake_http)


def es_source(fake_http: Any, job: cf.RecordedJob) -> ElasticsearchSource:
    ecs_documents(FakeElasticsearch(), fake_http, job)
    cfg = ElasticsearchConfig(url=fake_http.url, index="logs-*", retries=0)
    return ElasticsearchSource(cfg, cluster="conformance", environ={})


@pytest.fixture
def os_http() -> Any:
    """A second fake server for OpenSearch: the Elasticsearch fake answers `POST /_search`
    on the first."""
    from fake_http import start_fake_http

    fake = start_fake_http()
    yield fake
    fake.server.shutdown()


def os_source(os_http: Any, job: cf.RecordedJob) -> OpenSearchSource:
    """OpenSearch 2.x shapes (tests/fakes/fake_opensearch.py) through opensearch-py."""
    ecs_documents(FakeOpenSearch(), os_http, job)
    cfg = OpenSearchConfig(url=os_http.url, index="logs-*", retries=0)
    return OpenSearchSource(cfg, cluster="conformance", environ={})


def pod_logs_source(fake_http: Any, job: cf.RecordedJob, events: bool) -> PodLogsClient:
    now = job.ctx.end + timedelta(minutes=10)
    kube = FakeKube(fake_http, now=now)
    for node, lines in job.logs.items():
        body = "".join(f"{stamp(t)} {text}\n" for t, text in lines).encode()
        kube.logs[(cf.NAMESPACE, cf.PODS[node], cf.CONTAINER, False)] = body
    kube.events += [dict(ev) for ev in job.events]
    config = PodLogsConfig(api_url=fake_http.url, timeout_seconds=5, events=events)
    return PodLogsClient(config, cluster="conformance", now=lambda: now)


def test_the_sources_satisfy_the_protocols(
    tmp_path: Path, fake_http: Any, os_http: Any, job
) -> None:
    """What `runtime_checkable` can see: a name and the method of the role."""
    assert isinstance(shared_root_source(tmp_path, job), LogSource)
    assert isinstance(loki_source(fake_http, job), LogSource)
    assert isinstance(pod_logs_source(fake_http, job, events=False), LogSource)
    assert isinstance(es_source(fake_http, job), LogSource)
    assert isinstance(os_source(os_http, job), LogSource)
    prom = PrometheusClient(PrometheusConfig(url="http://prom:9090"))
    assert isinstance(prom, MetricSource) and not isinstance(prom, LogSource)


def test_every_registered_kind_runs_through_the_suite(
    tmp_path: Path, fake_http: Any, os_http: Any, job
) -> None:
    """A new back-end passes the suite or does not ship: every `kind` of the registry's log
    and metric roles is one of the sources the tests below run (add it here with them)."""
    from attribution_dagster.connectors import LOG_KINDS, METRIC_KINDS

    log_sources = [
        shared_root_source(tmp_path, job),
        loki_source(fake_http, job),
        pod_logs_source(fake_http, job, events=False),
        es_source(fake_http, job),
        os_source(os_http, job),
    ]
    tested_logs = {type(src).__name__ for src in log_sources}
    registered_logs = {
        cls.model_validate({"kind": kind, **LOG_REQUIRED.get(kind, {})}).client("c")
        for kind, cls in ((k, config_model("logs", k)) for k in LOG_KINDS)
    }
    assert {type(src).__name__ for src in registered_logs} <= tested_logs
    assert set(METRIC_KINDS) == {"prometheus"}  # PrometheusClient: the last test below


LOG_REQUIRED: dict[str, dict[str, Any]] = {
    "files": {"root": "/nonexistent", "paths": ["{node}/app.log"]},
    "loki": {"url": "http://loki:3100"},
    "pod_logs": {"api_url": "http://kube:6443"},
    "elasticsearch": {"url": "http://es:9200", "index": "logs-*"},
    "opensearch": {"url": "http://opensearch:9200", "index": "logs-*"},
}
"""The least configuration each log kind needs to build its client (no request is made)."""


def test_every_log_source_conforms_and_all_agree(
    tmp_path: Path, fake_http: Any, os_http: Any, job
) -> None:
    """Files (case and shared root), Loki, pod logs, Elasticsearch and OpenSearch over the
    same lines:
    each keeps the contract (typed locators, tails, progress, coverage, the cap), and the
    engine hears the same observations, the same nodes stopping at the same instants, the
    same last progress."""
    answers: dict[str, tuple[LogBatch, Any]] = {}
    ref = files_batch(tmp_path, job)
    answers["files:case"] = (ref, observations(ref, job))
    sources: list[LogSource] = [
        shared_root_source(tmp_path, job),
        loki_source(fake_http, job),
        pod_logs_source(fake_http, job, events=False),
        es_source(fake_http, job),
        os_source(os_http, job),
    ]
    problems: list[str] = cf.check_log_batch("files:case", ref, job)
    for src in sources:
        batch = src.fetch_logs(job.ctx, job.anchors, job.window, job.limits)
        problems += cf.check_log_batch(src.name, batch, job)
        answers[src.name] = (batch, observations(batch, job))
    problems += cf.compare_log_batches(answers, job)
    cf.assert_conforms(problems)
    # and the lines said something: the suite compares real content, not empty answers
    kinds = {k for k, *_ in cf.observed(answers["files:case"][1])}
    assert {"cuda_error", "collective_timeout"} <= kinds
    assert set(cf.stops(ref)) == set(job.ctx.nodes)
    ends = cf.stops(ref)
    assert ends[cf.SILENT][0] < min(v[0] for n, v in ends.items() if n != cf.SILENT)


def test_kubernetes_events_read_the_same_through_the_api_and_from_files(
    tmp_path: Path, fake_http: Any, job
) -> None:
    """The OOMKilling Event of the silent node, from a case's cluster-level events file,
    through the API, and from Loki's cluster-level stream of an event exporter: the same
    observations (host_oom_kill and the cgroup_oom its kernel line is), each tagged as the
    control plane's (not the node writing: liveness skips it), so the node that died is
    silent through every door (issue 15, issue 23)."""
    ref = files_batch(tmp_path, job, events=True)
    api = pod_logs_source(fake_http, job, events=True).fetch_logs(
        job.ctx, job.anchors, job.window, job.limits
    )
    loki = loki_source(fake_http, job, events=True).fetch_logs(
        job.ctx, job.anchors, job.window, job.limits
    )
    answers = {"files:case+events": (ref, observations(ref, job)),
               "pod_logs+events": (api, observations(api, job)),
               "loki+events": (loki, observations(loki, job))}  # fmt: skip
    cf.assert_conforms(
        cf.check_log_batch("files:case+events", ref, job)
        + cf.check_log_batch("pod_logs+events", api, job)
        + cf.check_log_batch("loki+events", loki, job)
        + cf.compare_log_batches(answers, job)
    )
    assert [r.node for r in loki.records if r.text.startswith('{"apiVersion"')] == [CLUSTER_NODE]
    for name, (_, obs) in answers.items():
        oom = [o for o in obs if o.kind in ("host_oom_kill", "cgroup_oom")]
        assert {o.kind for o in oom} == {"host_oom_kill", "cgroup_oom"}, name
        assert all(o.node == cf.SILENT and "event_reason" in o.attrs for o in oom), name
    # the verdict follows: the same through both doors
    results = []
    for batch in (ref, api, loki):
        raw = RawEvidence(job_id="1", records=batch.records, tails=batch.tails,
                          progress=batch.progress, coverage=[batch.coverage])  # fmt: skip
        obs = pipeline.normalize(raw, job.ctx)
        r = pipeline.attribute(job.ctx, obs, raw.coverage)
        results.append((r.status, r.category, r.suspect_nodes))
    assert results[0] == results[1]


def test_a_broken_source_is_caught(tmp_path: Path, job) -> None:
    """The suite can fail: a source that drops its tails, ignores the cap, gives text-only
    locators and miscounts its records is named for each."""
    good = files_batch(tmp_path, job)
    text_only = RawRecord.model_validate(  # a bare string locator becomes an opaque Note
        {**good.records[0].model_dump(), "text": "y" * (2 * cf.CAP), "locator": "somewhere:1"}
    )
    bad = good.model_copy(update={"tails": [], "records": [text_only]})
    problems = cf.check_log_batch("broken", bad, job)
    text = "\n".join(problems)
    assert "no tails" in text and "cap" in text and "Note" in text and "coverage.records" in text
    with pytest.raises(cf.ConformanceError):
        cf.assert_conforms(problems + cf.compare_log_batches(
            {"files": (good, observations(good, job)), "broken": (bad, observations(bad, job))}, job
        ))  # fmt: skip
    assert cf.check_log_batch("not-a-batch", ([], good.coverage), job)


# --- metrics -----------------------------------------------------------------------------------


def fake_prometheus(fake: Any, job: cf.RecordedJob) -> None:
    """A Prometheus answering the connector's requests (labels, names, presence, screen, raw
    samples) from the recorded samples, in the HTTP API's documented shapes."""
    series: dict[tuple[str, str], list[list[Any]]] = {}
    for node, _name, labels, t, value in job.samples:
        series.setdefault((node, labels["gpu"]), []).append([t.timestamp(), f"{value:g}"])

    def ok(data: Any) -> tuple:
        return 200, {"status": "success", "data": data}

    def query(req: Any) -> tuple:
        q = req.arg("query") or ""
        asked = [n for n in job.ctx.nodes if re.search(rf"\b{re.escape(n)}\b", q)]
        if q.startswith("count by"):
            return ok({"resultType": "vector", "result": [
                {"metric": {"Hostname": n}, "value": [series[(n, "0")][0][0], "1"]}
                for n in job.ctx.nodes]})  # fmt: skip
        if q.startswith("label_replace(") and XID in q:  # screen: every series of the family
            return ok({"resultType": "vector", "result": [
                {"metric": {"__name__": XID, "Hostname": n, "gpu": g}, "value": [v[-1][0], "1"]}
                for (n, g), v in series.items()]})  # fmt: skip
        if q.startswith("label_replace("):
            return ok({"resultType": "vector", "result": []})
        if q.startswith("{__name__=~"):
            return ok({"resultType": "matrix", "result": [
                {"metric": {"__name__": XID, "Hostname": n, "gpu": g}, "values": v}
                for (n, g), v in series.items() if n in asked]})  # fmt: skip
        return 400, {"status": "error", "errorType": "bad_data", "error": f"unexpected {q}"}

    fake.route("POST", "/api/v1/labels", lambda req: ok(["Hostname", "__name__", "gpu"]))
    fake.route("GET", "/api/v1/label/__name__/values", lambda req: ok([XID]))
    fake.route("POST", "/api/v1/query", query)


def test_prometheus_text_files_and_http_api_give_the_same_samples(
    tmp_path: Path, fake_http: Any, job
) -> None:
    """The recorded DCGM samples as a `.prom` file of a case and through the HTTP API: both
    keep the contract, and give the same samples and the same observations."""
    case = write_case(tmp_path, job, events=False)
    file_samples, file_cov = LocalFilesClient().fetch_metrics(
        case, job.ctx, job.families, job.window
    )
    fake_prometheus(fake_http, job)
    prom = PrometheusClient(PrometheusConfig(url=fake_http.url))
    xid_family = [f for f in job.families if XID in f.names]  # what the fake serves
    assert xid_family, "the catalog has no DCGM XID family"
    samples, cov = prom.fetch_metrics(job.ctx, xid_family, job.window)
    cf.assert_conforms(
        cf.check_samples("files:metrics", file_samples, file_cov, job)
        + cf.check_samples(prom.name, samples, cov, job)
        + cf.compare_samples({"files:metrics": file_samples, prom.name: samples})
    )

    def obs(s):  # type: ignore[no-untyped-def]
        got = pipeline.normalize(RawEvidence(job_id="1", samples=s), job.ctx)
        return sorted((o.kind, o.node, o.time, o.code) for o in got)

    assert obs(file_samples) == obs(samples) and obs(samples)  # an XID 79 on gpu-b


# --------------------------------------------------------------------------- topology


def test_every_topology_source_conforms_and_all_agree(tmp_path: Path, fake_http: Any) -> None:
    """The same fabric read from topology.conf, topology.yaml and nodes.json (kind files),
    from `scontrol show topology` (kind slurm_scontrol, through the Slurm connector's runner
    with Slurm 22.05's recorded output) and from the node labels on the Kubernetes API
    (kind kubernetes_labels, recorded NodeList shape on the fake API): one model."""
    from fake_k8s import FakeKubeAPI

    from attribution_dagster.connectors import TOPOLOGY_KINDS
    from attribution_dagster.connectors.slurm.sacct import RunResult
    from attribution_dagster.connectors.topology.files import TopologyFilesConfig
    from attribution_dagster.connectors.topology.live import (
        KubeLabelsTopologyConfig,
        ScontrolTopologyConfig,
        ScontrolTopologySource,
    )
    from attribution_dagster.connectors.topology.source import TopologySource

    rec = cf.recorded_topology()
    forms = {"topology.conf": rec.topology_conf, "topology.yaml": rec.topology_yaml}
    forms["nodes.json"] = __import__("json").dumps(rec.nodes)
    sources: dict[str, TopologySource] = {}
    for name, text in forms.items():
        d = tmp_path / name.replace(".", "_")
        d.mkdir()
        (d / name).write_text(text)
        sources[f"files:{name}"] = TopologyFilesConfig(paths=[str(d)]).client("c")
    sources["slurm_scontrol"] = ScontrolTopologySource(
        ScontrolTopologyConfig(), "c", runner=lambda *a: RunResult(0, rec.scontrol, "")
    )
    api = FakeKubeAPI(fake_http)
    api.objects.extend(rec.nodes["items"])
    sources["kubernetes_labels"] = KubeLabelsTopologyConfig(api_url=api.url).client("c")
    # every registered topology kind is one of the sources run here
    least: dict[str, dict[str, Any]] = {"files": {"paths": ["/x"]}}
    registered = {
        type(
            config_model("topology", k).model_validate({"kind": k, **least.get(k, {})}).client("c")
        )
        for k in TOPOLOGY_KINDS
    }
    assert {t.__name__ for t in registered} <= {type(s).__name__ for s in sources.values()}
    problems: list[str] = []
    answers = {}
    for name, src in sources.items():
        assert isinstance(src, TopologySource)
        snaps = src.snapshots()
        problems += cf.check_topology(name, snaps)
        answers[name] = snaps.snapshot_at(None)
    problems += cf.compare_topologies(answers)
    cf.assert_conforms(problems)
    assert answers["kubernetes_labels"].leaf("gpu-c") == "leaf-2"


def test_a_wrong_topology_is_caught() -> None:
    """The checks can fail: a source that puts a node under another leaf, or names a
    switch it does not describe, is reported."""
    from attribution_dagster.core.formats.topology import read_topology_conf
    from attribution_dagster.core.topology import Topology, TopologySnapshots

    rec = cf.recorded_topology()
    good = read_topology_conf(rec.topology_conf)
    bad = read_topology_conf(rec.topology_conf.replace("Nodes=gpu-c", "Nodes=gpu-c2"))
    bad.leaf_of["gpu-c"] = "leaf-9"
    problems = cf.compare_topologies({"good": good, "bad": bad})
    assert any("gpu-c under ('leaf-9'" in p for p in problems)
    undated = TopologySnapshots(snapshots=[Topology(leaf_of={"gpu-a": "x"})])
    got = cf.check_topology("undated", undated)
    assert any("not an aware time" in p for p in got) and any("names no source" in p for p in got)
    assert any("switch x is not in switches" in p for p in got)
