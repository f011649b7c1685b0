"""Kubernetes pod logs and Events as evidence (connectors/pod_logs.py, kind `pod_logs`), and
Kubernetes Events in the parser catalog in every form they are written in.

The connector runs its real code path (the `kubernetes` client, urllib3, HTTP) against the
`fake_http` server. The fake answers in the shapes of the Kubernetes API reference (v1.31,
core/v1): `GET /api/v1/namespaces/{ns}/pods/{name}/log` returns text/plain lines, each
prefixed by kubelet's RFC 3339 timestamp when `timestamps=true`, honouring `sinceSeconds`
and `limitBytes`; `GET .../events` and `GET /api/v1/events` return an `EventList` (items
without kind/apiVersion, as list responses carry them) filtered by `fieldSelector`;
failures are `Status` objects (tests/fixtures/k8s/podlogs-status-*.json: NotFound for a
deleted pod, BadRequest `previous terminated container ... not found`, Forbidden with the
RBAC wording, InternalError from the apiserver's kubelet proxy). Event fixtures
(podlogs-events-*.json) are written like `kubectl get events -o json` shows real
NodeNotReady (node controller), SystemOOM (kubelet OOM watcher), BackOff and Evicted
(kubelet, an events.k8s.io `series`) events.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fake_pod_logs import FakeKube

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import LogSource, SourceError, failed_coverage
from attribution_dagster.connectors.clusters import EvidenceSources
from attribution_dagster.connectors.pod_logs.client import PodLogsClient, PodLogsConfig
from attribution_dagster.core.config import ClusterConfig
from attribution_dagster.core.context import ExecutionContext, PodRef
from attribution_dagster.core.evidence import RawEvidence, RawRecord
from attribution_dagster.core.formats.kube_events import (
    render_event,
    view_of,
    view_of_json_text,
)
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.pipeline import (
    analyze_case,
    analyze_context,
    catalog,
    collect_evidence,
    load_context,
)

pytestmark = pytest.mark.k8s

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "k8s"
SAMPLES = Path(__file__).resolve().parents[3] / "samples"
UTC = timezone.utc
NOW = datetime(2026, 11, 20, 10, 40, tzinfo=UTC)
NS = "team-llm"
W0, W1, W2 = (
    "sft-llama-8b-x7k2p-worker-0-0-9ffrc",
    "sft-llama-8b-x7k2p-worker-1-0-5hq8v",
    "sft-llama-8b-x7k2p-worker-2-0-q7w2n",
)


def fixture(name: str) -> Any:
    return json.loads((FIX / name).read_text())


def ctx_oom(**kw: Any) -> ExecutionContext:
    """The kueue-oomkilled job: worker-0 on gpu-node-07 (the API names the node by its FQDN),
    worker-1 on gpu-node-12 (restarted once), worker-2 deleted since."""
    data: dict[str, Any] = dict(
        job_id=f"{NS}/sft-llama-8b-x7k2p",
        scheduler="kueue",
        cluster="gke-a3",
        state="FAILED",
        exit_code=137,
        start=datetime(2026, 11, 20, 10, 0, tzinfo=UTC),
        end=datetime(2026, 11, 20, 10, 31, 40, tzinfo=UTC),
        nodes=["gpu-node-07", "gpu-node-12"],
        job_name="sft-llama-8b-x7k2p",
        pods=[
            PodRef(namespace=NS, name=W0, node="gpu-node-07.us-central1-c.c.proj.internal",
                   containers=["trainer"]),
            PodRef(namespace=NS, name=W1, node="gpu-node-12", containers=["trainer"]),
            PodRef(namespace=NS, name=W2, node="gpu-node-12", containers=["trainer"]),
        ],
    )
    data.update(kw)
    return ExecutionContext(**data)


WINDOW = AnalysisSettings().window(ctx_oom())


def oom_cluster(fake_http: Any) -> FakeKube:
    kube = FakeKube(fake_http)
    kube.logs[(NS, W0, "trainer", False)] = (FIX / "podlogs-trainer-current.log").read_bytes()
    kube.logs[(NS, W1, "trainer", True)] = (FIX / "podlogs-trainer-previous.log").read_bytes()
    kube.logs[(NS, W1, "trainer", False)] = (
        b"2026-11-20T10:31:40.000000000Z 2026-11-20 10:31:40,000 INFO [sft.py:88] starting\n"
    )
    for name in ("podlogs-events-node-notready.json", "podlogs-events-node-oom.json",
                 "podlogs-events-pod-oomkilled.json"):
        kube.events += fixture(name)["items"]
    return kube


def client(fake_http: Any, **kw: Any) -> PodLogsClient:
    cfg = PodLogsConfig(api_url=fake_http.url, timeout_seconds=kw.pop("timeout_seconds", 5), **kw)
    return PodLogsClient(cfg, cluster="gke-a3", now=lambda: NOW)


def fetch(src: PodLogsClient, ctx: ExecutionContext | None = None):
    return src.fetch_logs(ctx or ctx_oom(), catalog().anchors(), WINDOW).pair()


# --- configuration ---------------------------------------------------------------------------


def test_config_is_registered_and_strict() -> None:
    cfg = parse_config("logs", {"kind": "pod_logs", "context": "gke-a3", "namespaces": [NS],
                                "pod_selector": "jobset.sigs.k8s.io/jobset-name={job_name}"})
    assert isinstance(cfg, PodLogsConfig)
    assert cfg.max_bytes_per_pod == 8 * 1024 * 1024 and cfg.previous and cfg.events
    assert cfg.source_name == "pod_logs"
    assert isinstance(cfg.client("gke-a3"), LogSource)
    with pytest.raises(ValueError):
        parse_config("logs", {"kind": "pod_logs", "kubeconfg": "/tmp/x"})
    cluster = ClusterConfig.model_validate({"logs": [{"kind": "pod_logs", "name": "gke"}]})
    assert cluster.logs[0].source_name == "pod_logs:gke"


def test_a_kubeconfig_that_cannot_load_is_one_line_not_retryable(tmp_path: Path) -> None:
    src = PodLogsConfig(kubeconfig=str(tmp_path / "missing"), context="nope").client("c")
    with pytest.raises(SourceError) as err:
        src.fetch_logs(ctx_oom(), catalog().anchors(), WINDOW)
    assert "kubeconfig" in str(err.value) and "\n" not in str(err.value)
    assert err.value.transient is False
    cov = failed_coverage(src.name, err.value)
    assert cov.status == "failed" and not cov.retryable


def test_kubeconfig_path_reaches_the_api_with_its_token(fake_http: Any, tmp_path: Path) -> None:
    """The kubeconfig code path of the real client: server, context and bearer token."""
    kube = oom_cluster(fake_http)
    kcfg = tmp_path / "kubeconfig"
    kcfg.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "other",
        "clusters": [{"name": "gke", "cluster": {"server": fake_http.url}}],
        "users": [{"name": "reader", "user": {"token": "t0k3n"}}],
        "contexts": [{"name": "gke-a3", "context": {"cluster": "gke", "user": "reader"}},
                     {"name": "other", "context": {"cluster": "nowhere", "user": "reader"}}],
    }))
    cfg = PodLogsConfig(kubeconfig=str(kcfg), context="gke-a3", events=False)
    records, cov = PodLogsClient(cfg, now=lambda: NOW).fetch_logs(
        ctx_oom(), catalog().anchors(), WINDOW
    ).pair()
    assert records and cov.status == "partial"  # worker-2 is gone
    assert all(r.headers.get("authorization") == "Bearer t0k3n" for r in fake_http.requests)
    assert kube.logs  # the fake served them


# --- logs --------------------------------------------------------------------------------------


def test_current_and_previous_logs_with_kubelet_timestamps(fake_http: Any) -> None:
    oom_cluster(fake_http)
    records, cov = fetch(client(fake_http, events=False))
    by_loc = {str(r.locator): r for r in records}
    warn = by_loc[f"pod {NS}/{W0} container trainer @ 2026-11-20T10:31:10.381234042Z"]
    assert warn.text.startswith("gpu-node-07:115538:115749 [0] transport/net_ib.cc:1696 NCCL WARN")
    assert warn.time == datetime(2026, 11, 20, 10, 31, 10, 381234, tzinfo=UTC)
    assert warn.time_quality == "exact" and warn.stream == "trainer"
    assert warn.node == "gpu-node-07"  # the pod's FQDN node name resolved to the job node
    assert warn.source == "pod_logs"
    # ChildFailedError asks for its summary block: the following lines, without their stamps
    child = next(r for r in records if "ChildFailedError" in r.text)
    assert "host      : gpu-node-07" in child.text and "\n2026-11-20T" not in child.text
    # the previous container of worker-1 (restarted): inside the window only
    prev = [r for r in records if " previous @ " in str(r.locator)]
    assert [str(r.locator) for r in prev] == [
        f"pod {NS}/{W1} container trainer previous @ 2026-11-20T10:00:09.903112000Z"
    ]
    assert prev[0].node == "gpu-node-12"
    firsts = [r.text.split("\n", 1)[0] for r in records]  # continuation lines may run on
    assert not any("earlier attempt" in f or "after the window" in f for f in firsts)
    assert cov.out_of_window >= 1
    # what was asked: timestamps, the window as sinceSeconds from now, a byte limit
    asks = [r for r in fake_http.requests if r.path.endswith("/log")]
    assert {r.arg("timestamps").lower() for r in asks} == {"true"}
    assert {r.arg("sinceSeconds") for r in asks} == {str(int((NOW - WINDOW.start).total_seconds()))}
    assert {r.arg("limitBytes") for r in asks if r.arg("container") == "trainer"} >= {
        str(8 * 1024 * 1024)
    }
    assert {(r.path.split("/")[6], r.arg("previous").lower()) for r in asks} >= {
        (W0, "true"), (W0, "false"), (W1, "true"), (W1, "false"), (W2, "true")
    }


def test_a_pod_that_no_longer_exists_is_stated_not_fatal(fake_http: Any) -> None:
    oom_cluster(fake_http)
    records, cov = fetch(client(fake_http, events=False))
    assert records
    assert cov.pods_missing == [f"{NS}/{W2}"]
    assert cov.pods_read == [f"{NS}/{W0}", f"{NS}/{W1}"]
    assert any("no longer exists (404)" in e and W2 in e for e in cov.errors)
    assert cov.status == "partial" and cov.retryable is False
    assert cov.nodes_read == ["gpu-node-07", "gpu-node-12"] and cov.nodes_missing == []
    assert cov.queries == 5 and cov.bytes > 1000 and cov.records == len(records)


def test_a_limit_hit_is_stated_in_coverage(fake_http: Any) -> None:
    oom_cluster(fake_http)
    records, cov = fetch(client(fake_http, events=False, max_bytes_per_pod=1024))
    hit = [e for e in cov.errors if "max_bytes_per_pod" in e]
    assert hit and any(f"pod {NS}/{W0} container trainer" in e for e in hit), cov.errors
    assert cov.status == "partial"
    # the first KiB of worker-0 holds the NCCL WARN line, not the end of the summary block
    texts = "\n".join(r.text for r in records if r.node == "gpu-node-07")
    assert "NCCL WARN" in texts and "traceback : Signal 6" not in texts
    w0 = [r for r in fake_http.requests if r.path.endswith(f"{W0}/log")]
    assert [r.arg("limitBytes") for r in w0][0] == "1024"


def test_a_500_and_a_timeout_give_partial_retryable_coverage(fake_http: Any) -> None:
    kube = oom_cluster(fake_http)
    kube.fail.append((f"/api/v1/namespaces/{NS}/pods/{W1}/log",
                      (500, fixture("podlogs-status-500.json"))))

    def slow(req: Any) -> tuple:
        time.sleep(1.5)
        return 200, {"kind": "EventList", "items": []}

    kube.fail.append(("/api/v1/events", slow))
    records, cov = fetch(client(fake_http, timeout_seconds=0.5))
    assert cov.status == "partial" and cov.retryable is True
    assert any("answered 500" in e and "connection refused" in e for e in cov.errors), cov.errors
    assert any("timed out" in e for e in cov.errors), cov.errors
    assert all("\n" not in e for e in cov.errors)
    assert any(r.node == "gpu-node-07" for r in records)  # worker-0 still read


def test_a_403_fails_the_source_and_is_not_retryable(fake_http: Any) -> None:
    kube = oom_cluster(fake_http)
    kube.fail.append(("/api/v1/", (403, fixture("podlogs-status-403.json"))))
    records, cov = fetch(client(fake_http))
    assert records == []
    assert cov.status == "failed" and cov.retryable is False
    assert any("answered 403" in e and "pods/log" in e and "RBAC" in e for e in cov.errors)
    assert set(cov.pods_missing) == {f"{NS}/{W0}", f"{NS}/{W1}", f"{NS}/{W2}"}


def test_pods_found_by_selector_on_the_job_nodes(fake_http: Any) -> None:
    kube = oom_cluster(fake_http)
    label = {"jobset.sigs.k8s.io/jobset-name": "sft-llama-8b-x7k2p"}
    kube.pod(NS, W0, "gpu-node-07", ["trainer"], label)
    kube.pod(NS, "sft-llama-8b-x7k2p-worker-9-0-elsewhere", "gpu-node-99", ["trainer"], label)
    kube.pod(NS, "unrelated", "gpu-node-07", ["main"], {"app": "x"})
    src = client(fake_http, events=False, namespaces=[NS],
                 pod_selector="jobset.sigs.k8s.io/jobset-name={job_name}")
    records, cov = fetch(src, ctx_oom(pods=[]))
    assert cov.pods_read == [f"{NS}/{W0}"] and cov.status == "ok"
    lists = [r for r in fake_http.requests if r.path == f"/api/v1/namespaces/{NS}/pods"]
    assert lists[0].arg("labelSelector") == "jobset.sigs.k8s.io/jobset-name=sft-llama-8b-x7k2p"
    assert {r.node for r in records} == {"gpu-node-07"}


def test_no_pods_and_no_selector_says_so(fake_http: Any) -> None:
    oom_cluster(fake_http)
    records, cov = fetch(client(fake_http, events=False), ctx_oom(pods=[]))
    assert records == [] and cov.status == "failed"
    assert any("pod_selector" in e for e in cov.errors)


# --- events ------------------------------------------------------------------------------------


def test_events_of_the_pods_and_nodes_become_rows(fake_http: Any) -> None:
    oom_cluster(fake_http)
    records, cov = fetch(client(fake_http))
    events = {str(r.locator): r for r in records if r.stream == "events"}
    nr = events["event default/gpu-node-07.187a3c1f2b9e0d44"]
    # an Event is a cluster-level record, as in a case's cluster-level events file; the
    # catalog names its node (below)
    assert {r.node for r in events.values()} == {"*cluster*"}
    assert nr.time == datetime(2026, 11, 20, 10, 31, 30, tzinfo=UTC)
    assert nr.text == (
        "default   2026-11-20T10:31:30Z   Normal   NodeNotReady   node/gpu-node-07      "
        "node-controller   Node gpu-node-07 status is now: NodeNotReady   2026-11-20T10:31:30Z"
        "   1   gpu-node-07.187a3c1f2b9e0d44"
    )
    oom = events["event default/gpu-node-12.187a3c4e0f1d2a77"]
    assert "SystemOOM" in oom.text
    ev = events[f"event {NS}/{W1}.187a3c4f9e8d7c6b"]  # a series: eventTime, lastObservedTime
    assert ev.time == datetime(2026, 11, 20, 10, 31, 40, 118231,
                                                            tzinfo=UTC)
    assert "   2026-11-20T10:32:10.441902Z   Warning   Evicted   pod/" in ev.text
    # BackOff holds no anchor; RegisteredNode is a day old: neither is kept
    assert not any("BackOff" in r.text or "RegisteredNode" in r.text for r in records)
    assert cov.out_of_window >= 1
    sels = {r.arg("fieldSelector") for r in fake_http.requests if r.path.endswith("/events")}
    assert f"involvedObject.name={W1}" in sels
    assert "involvedObject.kind=Node,involvedObject.name=gpu-node-12" in sels
    fqdn = "gpu-node-07.us-central1-c.c.proj.internal"  # the node's Kubernetes name
    assert f"involvedObject.kind=Node,involvedObject.name={fqdn}" in sels
    # and the catalog reads them: the node that went NotReady, the OOM, the eviction
    obs = catalog().normalize(RawEvidence(job_id="x", records=records), ctx_oom())
    got = {(o.kind, o.node, o.parser) for o in obs if o.source == "pod_logs" and
           o.parser.startswith("k8s_event")}
    assert got == {
        ("node_unreachable", "gpu-node-07", "k8s_event_node_down"),
        ("host_oom_kill", "gpu-node-12", "k8s_event_host_oom"),
        ("k8s_evicted", "gpu-node-12", "k8s_event_evicted"),
    }


def test_the_pipeline_reads_a_configured_pod_logs_source(fake_http: Any) -> None:
    oom_cluster(fake_http)
    raw = collect_evidence(None, ctx_oom(), sources=EvidenceSources(logs=(client(fake_http),)))
    assert raw.records and raw.coverage[0].source == "pod_logs"
    result = analyze_context(ctx_oom(), sources=EvidenceSources(logs=(client(fake_http),)))
    assert (result.category, result.suspect_nodes) == ("node.host_oom", ["gpu-node-12"])
    # gpu-node-07 went NotReady after its NCCL errors: a consequence, not the cause
    assert any(c.kind == "node_unreachable" and c.node == "gpu-node-07" and c.role == "symptom"
               for c in result.symptom_chain)
    assert any(e.locator == "event default/gpu-node-12.187a3c4e0f1d2a77" for e in result.evidence)
    assert result.coverage[0].status == "partial"  # worker-2 is gone


# --- the parser catalog: every form of an Event reads the same ----------------------------------

NOTREADY = fixture("podlogs-events-node-notready.json")["items"][1]
PCTX = ExecutionContext(
    job_id="x", scheduler="kueue", state="FAILED",
    start=datetime(2026, 11, 20, 10, tzinfo=UTC), end=datetime(2026, 11, 20, 11, tzinfo=UTC),
    nodes=["gpu-node-07", "gpu-node-12"],
    pods=[PodRef(namespace=NS, name=W1, node="gpu-node-12", containers=["trainer"])],
)


def parse(text: str, node: str = "*cluster*", t: datetime | None = None, ctx=PCTX):
    rec = RawRecord(source="files", node=node, locator="f:1", time=t,
                    time_quality="exact" if t else "unknown", text=text)
    return catalog().parse_record(rec, ctx)


def key(obs):
    return sorted((o.kind, o.node, o.time, o.attrs.get("what"), o.attrs.get("event_reason"))
                  for o in obs)


def test_every_event_form_gives_the_same_observation(tmp_path: Path) -> None:
    when = datetime(2026, 11, 20, 10, 31, 30, tzinfo=UTC)
    want = [("node_unreachable", "gpu-node-07", when, "not_ready", "NodeNotReady")]
    rendered = render_event(NOTREADY)
    assert key(parse(rendered)) == want
    assert key(parse(json.dumps(NOTREADY))) == want  # jq -c '.items[]'
    # kubectl get events (-A) (-o wide): ages instead of times, so the time comes from the file
    plain = ("2m          Normal    NodeNotReady              node/gpu-node-07"
             "                        Node gpu-node-07 status is now: NodeNotReady")
    wide = ("team-llm    2m          Normal    NodeNotReady   node/gpu-node-07            "
            "node-controller   Node gpu-node-07 status is now: NodeNotReady   2m   1   "
            "gpu-node-07.187a3c1f2b9e0d44")
    single = "2026-11-20T10:31:30Z Normal NodeNotReady node/gpu-node-07 Node gpu-node-07 ..."
    for row in (plain, "default     " + plain, wide, single):
        assert key(parse(row, t=when)) == want, row
    # kubectl get events -o json, pretty-printed, read through the file scanner (the record
    # starts at the item's "eventTime" line and takes its continuation lines)
    listing = {"apiVersion": "v1", "items": fixture("podlogs-events-node-notready.json")["items"]
               + fixture("podlogs-events-node-oom.json")["items"], "kind": "List",
               "metadata": {"resourceVersion": ""}}
    data = (json.dumps(listing, indent=4, sort_keys=True) + "\n").encode()
    anchors = catalog().anchors()
    scanner = FileScanner(ScanSpec(
        literals=tuple(a.literal for a in anchors),
        context_after=tuple(a.context_after for a in anchors),
        window_start=WINDOW.start - timedelta(days=2), window_end=WINDOW.end,
        reference=PCTX.start, block_size=4096,  # items cross block ends
    ))
    scan = scanner.scan_bytes(data)
    obs: list = []
    for lineno, t, quality, text in scan.records:
        rec = RawRecord(source="files", node="*cluster*", locator=f"events.json:{lineno}",
                        time=t, time_quality=quality, text=text)
        # (the item's `"message": "System OOM encountered, ..."` line is also a kernel_oom_kill
        # line on its own; the event parsers are the ones that know the node and time)
        obs += [o for o in catalog().parse_record(rec, PCTX) if o.parser.startswith("k8s_event")]
    got = key(obs)
    assert ("node_unreachable", "gpu-node-07", when, "not_ready", "NodeNotReady") in got
    assert [k[0] for k in got] == ["host_oom_kill", "node_unreachable"], got
    assert all(o.excerpt.split("\n")[0].strip() == '"eventTime": null,' for o in obs)


def test_a_cluster_level_event_lands_on_the_node_it_names() -> None:
    """A `kubectl get events -A` listing kept outside the node directories: the Node object,
    a pod of the job (ctx.pods) or the reporting kubelet's host names the node."""
    node_row = ("default     4m          Warning   SystemOOM                 node/gpu-node-12   "
                "        System OOM encountered, victim process: python, pid: 94476")
    (o,) = parse(node_row)
    assert (o.kind, o.node, o.attrs["victim_pid"]) == ("host_oom_kill", "gpu-node-12", 94476)
    assert o.attrs["logged_on"] == "*cluster*"
    pod_row = (f"{NS}    3m          Warning   NodeNotReady              pod/{W1}       "
               "Node is not ready")
    (o,) = parse(pod_row)
    assert (o.kind, o.node, o.attrs["pod"]) == ("node_unreachable", "gpu-node-12", W1)
    # without the pod in the context the row cannot say where it was: on no job node
    alone = parse(pod_row, ctx=PCTX.model_copy(update={"pods": []}))
    assert not any(o.node in PCTX.nodes for o in alone)
    # a wide row names the kubelet that reported it
    wide = (f"{NS}   2m   Warning   Evicted   pod/other-pod-0   kubelet, gpu-node-07   The node "
            "was low on resource: memory. Threshold quantity: 100Mi, available: 51232Ki.   2m   1"
            "   other-pod-0.187a")
    (o,) = parse(wide)
    assert (o.kind, o.node, o.attrs["reason"], o.attrs["resource"]) == (
        "k8s_evicted", "gpu-node-07", "node_pressure", "memory")
    # a controller's host is not the event's node
    sched = (f"{NS}   2m   Normal   Preempted   pod/{W1}   default-scheduler, "
             "default-scheduler-kcp-2   Preempted by pod 8f1c on node gpu-node-12   2m   1   x.1")
    (o,) = parse(sched)
    assert (o.node, o.attrs["reason"]) == ("gpu-node-12", "preempted")


def test_event_views_agree_across_forms() -> None:
    ev = fixture("podlogs-events-pod-oomkilled.json")["items"][1]
    v = view_of(ev)
    assert (v.first_seen, v.last_seen, v.count) == (
        "2026-11-20T10:31:40.118231Z", "2026-11-20T10:32:10.441902Z", 2)
    assert view_of_json_text(json.dumps(ev)) == v
    pretty = json.dumps({**ev, "apiVersion": "v1", "kind": "Event"}, indent=4, sort_keys=True)
    fragment = pretty[pretty.index('"eventTime"') :]
    got = view_of_json_text(fragment)
    assert got is not None and got.reason == "Evicted" and got.first_seen == v.first_seen
    # cut short (more keys than continuation lines): the keys that came are still read
    cut = view_of_json_text("\n".join(fragment.split("\n")[:25]))
    assert cut is not None and cut.object_name == W1


# --- end to end: a sample read from the API equals the sample read from files --------------------


def test_sample_served_by_the_api_equals_the_sample_read_from_files(fake_http: Any) -> None:
    case = SAMPLES / "kueue-node-notready-events"
    ctx = load_context(case)
    assert ctx.pods, "the sample lists its pods"
    kube = FakeKube(fake_http, now=ctx.end + timedelta(minutes=10))
    for pod in ctx.pods:
        for c in pod.containers:
            kube.logs[(pod.namespace, pod.name, c, False)] = (
                case / "logs" / str(pod.node) / f"{pod.name}.log"
            ).read_bytes()
    for f in sorted((case / "logs").glob("*/events.json")):
        for item in json.loads(f.read_text())["items"]:
            item = {k: v for k, v in item.items() if k not in ("apiVersion", "kind")}
            kube.events.append(item)
    src = PodLogsClient(PodLogsConfig(api_url=fake_http.url), cluster=ctx.cluster,
                        now=lambda: ctx.end + timedelta(minutes=10))
    api_ctx = ctx.model_copy(update={"case_dir": None})
    from_api = analyze_context(api_ctx, sources=EvidenceSources(logs=(src,)))
    from_files = analyze_case(case)
    expected = json.loads((case / "expected.json").read_text())
    for r in (from_api, from_files):
        assert (r.status, r.category, sorted(r.suspect_nodes)) == (
            expected["status"], expected["category"], sorted(expected["suspect_nodes"]))
    assert (from_api.status, from_api.category, from_api.suspect_nodes, from_api.rule) == (
        from_files.status, from_files.category, from_files.suspect_nodes, from_files.rule)
    (cov,) = from_api.coverage
    assert cov.source == "pod_logs" and cov.status == "ok", cov
    assert cov.pods_read == [f"{p.namespace}/{p.name}" for p in ctx.pods]
    # the observations agree too: same kinds on the same nodes at the same times
    def obs_key(result):
        return sorted({(c.kind, c.node, c.time, c.role) for c in result.symptom_chain})

    assert obs_key(from_api) == obs_key(from_files)
    root = {c.kind: c for c in from_api.symptom_chain if c.role == "root_cause"}
    assert root["node_unreachable"].evidence.locator.startswith("event default/gpu-node-22.")
    # and who fell first: gpu-node-22's pod log stops at 08:31:04, its last line the evidence
    silent = root["node_silent"]
    assert silent.node == "gpu-node-22" and silent.evidence.locator == (
        "pod team-llm/pretrain-7b-q4m2x-worker-1-0-x9c4w container trainer @ "
        "2026-11-21T08:31:04.415916000Z"
    )


def test_a_pod_listed_without_containers_is_described_first(fake_http: Any) -> None:
    kube = oom_cluster(fake_http)
    kube.pod(NS, W0, "gpu-node-07", ["trainer", "sidecar"])
    kube.logs[(NS, W0, "sidecar", False)] = (
        b"2026-11-20T10:31:09.000000000Z sidecar: NCCL WARN not from the trainer\n"
    )
    ctx = ctx_oom(pods=[PodRef(namespace=NS, name=W0), PodRef(namespace=NS, name=W2)])
    records, cov = fetch(client(fake_http, events=False, previous=False), ctx)
    assert {r.stream for r in records} == {"trainer", "sidecar"}
    assert {r.node for r in records} == {"gpu-node-07"}  # spec.nodeName of the pod
    assert cov.pods_read == [f"{NS}/{W0}"] and cov.pods_missing == [f"{NS}/{W2}"]
    assert any(r.path == f"/api/v1/namespaces/{NS}/pods/{W0}" for r in fake_http.requests)
    assert not any(r.arg("previous", "").lower() == "true" for r in fake_http.requests)


def test_a_401_stops_every_further_request(fake_http: Any) -> None:
    kube = oom_cluster(fake_http)
    kube.fail.append(("/api/v1/", (401, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                         "status": "Failure", "message": "Unauthorized",
                                         "reason": "Unauthorized", "code": 401})))
    records, cov = fetch(client(fake_http))
    assert records == [] and cov.status == "failed" and not cov.retryable
    assert len(fake_http.requests) == 1
    assert "answered 401" in cov.errors[0] and "credentials" in cov.errors[0]


def test_an_events_k8s_io_item_reads_like_a_core_event() -> None:
    """`kubectl get events.events.k8s.io -o json`: regarding / note / deprecated* fields
    (events.k8s.io/v1 Event in the API reference)."""
    item = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "gpu-node-07.187a3c1f2b9e0d44", "namespace": "default"},
        "eventTime": None, "reason": "NodeNotReady", "type": "Normal",
        "regarding": {"kind": "Node", "name": "gpu-node-07", "uid": "gpu-node-07"},
        "note": "Node gpu-node-07 status is now: NodeNotReady",
        "deprecatedFirstTimestamp": "2026-11-20T10:31:30Z",
        "deprecatedLastTimestamp": "2026-11-20T10:31:30Z", "deprecatedCount": 1,
        "deprecatedSource": {"component": "node-controller"},
        "reportingController": "node-controller", "reportingInstance": "",
    }
    assert view_of(item) == view_of(NOTREADY)
    assert key(parse(json.dumps(item))) == key(parse(render_event(NOTREADY)))
