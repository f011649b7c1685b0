"""Kueue / JobSet scheduler connector and the pod placement recorder.

Every test drives the real `kubernetes` client over HTTP against `fake_http` (through
tests/fake_k8s.py), which answers with API objects under tests/fixtures/k8s/. Those objects
are recorded from the documented shapes of Kueue `Workload` v1beta1 (conditions
QuotaReserved / Admitted / PodsReady / Evicted / Preempted / Requeued / Finished, reasons
and messages as the Kueue controller writes them), JobSet v1alpha2 (`FailedJobs`,
`restarts`, `terminalState`) and Kubernetes batch/v1 Job and core/v1 Pod (`state.terminated`
with `OOMKilled` / exit 137, `DisruptionTarget`, `hostIP`, `podIPs`), as `kubectl get -o json`
prints them.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from fake_k8s import FakeKubeAPI, load_items, status

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import (
    JobNotFound,
    JobQuery,
    SchedulerClient,
    SchedulerError,
)
from attribution_dagster.connectors.clusters import Cluster
from attribution_dagster.connectors.kueue.client import KueueClient, KueueConfig
from attribution_dagster.connectors.kueue.objects import classify, first_failure, workload_end
from attribution_dagster.connectors.kueue.placements import PlacementStore, PodPlacement
from attribution_dagster.core.config import ClusterConfig
from attribution_dagster.core.context import JobState

pytestmark = pytest.mark.kueue

SINCE = datetime(2026, 12, 1, tzinfo=timezone.utc)
FINISHED = ("jobset-failed-oom.json", "job-succeeded.json", "job-deadline.json")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def kube(fake_http):
    return FakeKubeAPI(fake_http)


def client(kube: FakeKubeAPI, **kw) -> KueueClient:
    placements = kw.pop("placements", None)
    return KueueConfig(api_url=kube.url, **kw).client("atlas", placements=placements)


def by_id(contexts):
    return {c.job_id: c for c in contexts}


def test_failed_jobset_with_oom_pod_and_pagination(kube, fake_http):
    """A JobSet whose first failed container was OOMKilled (exit 137) while the other
    workers were torn down with exit 143 afterwards -> OUT_OF_MEMORY, the OOM pod is the
    failing step. Workloads come in pages of 1 (`limit` / `continue`), as kube-apiserver
    pages lists. Shapes: Kueue Workload v1beta1, JobSet v1alpha2, batch/v1 Job, core/v1 Pod."""
    kube.load(*FINISHED)
    c = client(kube, page_size=1)
    got = by_id(c.finished_jobs(JobQuery(since=SINCE)))
    assert set(got) == {
        "team-a/jobset-llama-70b-3f2a1",
        "team-b/job-resnet-eval-7c9d1",
        "team-b/job-data-prep-91ab2",
    }
    ctx = got["team-a/jobset-llama-70b-3f2a1"]
    assert ctx.scheduler == "kueue" and ctx.cluster == "atlas"
    assert ctx.state is JobState.OUT_OF_MEMORY and ctx.exit_code == 137
    assert ctx.failing_step == "llama-70b-workers-0-0-x7k2p"
    assert ctx.nodes == ["gpu-node-017", "gpu-node-018", "gpu-node-019", "gpu-node-020"]
    assert ctx.node_addresses["gpu-node-017"] == ["10.20.1.17", "192.168.17.4"]
    assert ctx.start == utc("2026-12-01T10:00:00Z")  # admission
    assert ctx.end == utc("2026-12-01T12:14:10Z")  # Finished condition
    assert ctx.reason.startswith("jobset failed due to one or more job failures")
    assert "BackoffLimitExceeded" in ctx.reason and "FailedJobs" in ctx.reason
    assert ctx.job_name == "llama-70b" and ctx.partition == "gpu-cluster-queue"
    assert ctx.gpus_per_node == 8 and ctx.gpu_model == "NVIDIA-H100-80GB-HBM3"
    assert [p.node for p in ctx.pods] == ctx.nodes and ctx.pods[0].containers == ["trainer"]
    # sorted by end time
    assert list(got) == [
        "team-b/job-data-prep-91ab2",
        "team-b/job-resnet-eval-7c9d1",
        "team-a/jobset-llama-70b-3f2a1",
    ]
    wl_requests = [r for r in fake_http.requests if r.path.endswith("/workloads")]
    assert [r.arg("continue") for r in wl_requests] == [None, "1", "2"]
    assert all(r.arg("limit") == "1" for r in wl_requests)
    pod_requests = [r for r in fake_http.requests if r.path.endswith("/pods")]
    assert "jobset.sigs.k8s.io/jobset-name=llama-70b" in {
        r.arg("labelSelector") for r in pod_requests
    }
    # The window is on the END time, the state filter and limit apply.
    late = c.finished_jobs(JobQuery(since=utc("2026-12-01T12:00:00Z")))
    assert [x.job_id for x in late] == ["team-a/jobset-llama-70b-3f2a1"]
    only_ok = c.finished_jobs(JobQuery(since=SINCE, states=(JobState.COMPLETED,)))
    assert [x.job_id for x in only_ok] == ["team-b/job-resnet-eval-7c9d1"]
    assert len(c.finished_jobs(JobQuery(since=SINCE, limit=2))) == 2


def test_succeeded_job_and_an_oom_that_did_not_end_the_job(kube):
    """A batch Job whose container was OOMKilled once (lastState), restarted and succeeded
    is COMPLETED with exit 0, its restart counted. Shapes: Kueue Workload `Finished`
    reason `Succeeded`, batch/v1 Job `Complete`, core/v1 Pod `lastState.terminated`."""
    kube.load("job-succeeded.json")
    ctx = client(kube).get_job("team-b/job-resnet-eval-7c9d1")
    assert ctx.state is JobState.COMPLETED and ctx.exit_code == 0 and not ctx.failed
    assert ctx.failing_step is None and ctx.reason == "Job finished successfully"
    assert ctx.nodes == ["gpu-node-101"] and ctx.pods[0].restarts == 1
    pod = next(i for i in load_items("job-succeeded.json") if i["kind"] == "Pod")
    assert first_failure([pod]) is None  # the survived OOM (lastState) is no failure
    looping = copy.deepcopy(pod)  # ... unless the container was crash-looping at the end
    looping["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    assert first_failure([looping]).oom


def test_oom_after_the_first_failure_is_not_out_of_memory():
    """The same recorded JobSet with a worker that exited 1 two seconds BEFORE the OOM kill:
    the OOM no longer explains the failure -> FAILED with that worker's exit code. Shapes:
    tests/fixtures/k8s/jobset-failed-oom.json (Kueue Workload, JobSet, Job, Pod)."""
    items = load_items("jobset-failed-oom.json")
    wl = next(i for i in items if i["kind"] == "Workload")
    owner = next(i for i in items if i["kind"] == "JobSet")
    jobs = [i for i in items if i["kind"] == "Job"]
    pods = copy.deepcopy([i for i in items if i["kind"] == "Pod"])
    term = pods[2]["status"]["containerStatuses"][0]["state"]["terminated"]
    term.update(exitCode=1, reason="Error", finishedAt="2026-12-01T12:14:00Z")
    state, exit_code, reason, step = classify(wl, "finished", owner, jobs, pods)
    assert (state, exit_code, step) == (JobState.FAILED, 1, pods[2]["metadata"]["name"])
    # Unchanged, the OOM came first.
    original = [i for i in items if i["kind"] == "Pod"]
    assert classify(wl, "finished", owner, jobs, original)[0] is JobState.OUT_OF_MEMORY


def test_deadline_exceeded_job_is_timeout(kube):
    """A Job past activeDeadlineSeconds: the Job's `Failed` condition reason
    `DeadlineExceeded` (message "Job was active longer than specified deadline", which Kueue
    copies into `Finished`) -> TIMEOUT, even though the pod's own exit was 143.
    Shapes: batch/v1 Job status conditions, Kueue Workload v1beta1."""
    kube.load("job-deadline.json")
    ctx = client(kube).get_job("team-b/job-data-prep-91ab2")
    assert ctx.state is JobState.TIMEOUT
    assert ctx.reason == "Job was active longer than specified deadline (DeadlineExceeded)"
    assert ctx.exit_code == 143 and ctx.failing_step == "data-prep-m2v7t"
    assert ctx.start == utc("2026-12-01T06:00:01Z") and ctx.end == utc("2026-12-01T08:00:03Z")


def test_preempted_workload_falls_back_to_recorded_placements(kube, tmp_path):
    """A Workload evicted by preemption (`Evicted` reason `Preempted`, `Preempted` reason
    `InClusterQueue`, quota released) whose Job was suspended and pods deleted: without a
    placement record it cannot be placed; with one, its nodes come from the record.
    Shapes: Kueue Workload v1beta1 eviction conditions, batch/v1 Job `Suspended`."""
    kube.load("job-preempted.json")
    bare = client(kube)
    assert bare.finished_jobs(JobQuery(since=SINCE)) == []
    assert bare.unplaced == ["team-a/job-bert-ft-2b8e4"]
    with pytest.raises(SchedulerError, match="no placement was recorded"):
        bare.get_job("team-a/job-bert-ft-2b8e4")

    store = PlacementStore(f"sqlite:///{tmp_path}/results.db")
    store.record(
        [
            PodPlacement(
                cluster="atlas",
                namespace="team-a",
                workload="job-bert-ft-2b8e4",
                pod="bert-ft-p8w2k",
                node="gpu-node-061",
                host_ip="10.20.4.61",
                pod_ip="192.168.61.12",
                started=utc("2026-12-01T08:02:15Z"),
                restarts=2,
            ),
            PodPlacement(  # another cluster's pod of the same name must not leak in
                cluster="west",
                namespace="team-a",
                workload="job-bert-ft-2b8e4",
                pod="bert-ft-zzzzz",
                node="w-1",
            ),
        ]
    )
    c = client(kube, placements=store.pods_for)
    [ctx] = c.finished_jobs(JobQuery(since=SINCE))
    assert ctx.job_id == "team-a/job-bert-ft-2b8e4"
    assert ctx.state is JobState.PREEMPTED
    assert ctx.reason.startswith("Preempted to accommodate a workload")
    assert ctx.nodes == ["gpu-node-061"]
    assert ctx.node_addresses == {"gpu-node-061": ["10.20.4.61", "192.168.61.12"]}
    assert ctx.pods[0].restarts == 2
    assert ctx.end == utc("2026-12-01T09:30:58Z")  # the eviction
    # the pods are gone: the GPU count is what the Workload's pod set asked for
    assert ctx.gpus_per_node == 8
    assert ctx.start == utc("2026-12-01T08:02:10Z")  # the Job's startTime (not admitted now)
    # The config's `placements_url` builds the same reader.
    cfg = KueueConfig(api_url=kube.url, placements_url=f"sqlite:///{tmp_path}/results.db")
    assert cfg.client("atlas").get_job("team-a/job-bert-ft-2b8e4").nodes == ["gpu-node-061"]


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_api_errors_are_one_line_with_the_right_transience(kube):
    """kube-apiserver `Status` answers (401, 403 naming the verb/resource, 404 on the
    Kueue group, 500), a read timeout and a refused connection, through the real client."""
    kube.load(*FINISHED)
    q = JobQuery(since=SINCE)

    kube.failures = [("/apis/kueue.x-k8s.io", 401, status(401, "Unauthorized", "Unauthorized"))]
    with pytest.raises(SchedulerError) as e:
        client(kube).finished_jobs(q)
    assert e.value.transient is False and "401" in _one_line(e.value)

    forbidden = (
        'workloads.kueue.x-k8s.io is forbidden: User "system:serviceaccount:obs:attribution"'
        ' cannot list resource "workloads" in API group "kueue.x-k8s.io" at the cluster scope'
    )
    kube.failures = [("/apis/kueue.x-k8s.io", 403, status(403, "Forbidden", forbidden))]
    with pytest.raises(SchedulerError) as e:
        client(kube).finished_jobs(q)
    msg = _one_line(e.value)
    assert e.value.transient is False
    assert "403" in msg and "'list'" in msg and "workloads.kueue.x-k8s.io" in msg

    kube.failures = [("/api/v1", 500, status(500, "InternalError", "etcdserver: leader changed"))]
    with pytest.raises(SchedulerError) as e:
        client(kube).finished_jobs(q)
    assert e.value.transient is True and "etcdserver: leader changed" in _one_line(e.value)

    kube.failures = []
    kube.sleep("/apis/kueue.x-k8s.io", 2.0)
    with pytest.raises(SchedulerError) as e:
        client(kube, timeout_seconds=0.3).finished_jobs(q)
    assert e.value.transient is True and "did not answer within 0.3s" in _one_line(e.value)
    kube.delay = None

    refused = KueueConfig(api_url="http://127.0.0.1:9", timeout_seconds=2).client("atlas")
    with pytest.raises(SchedulerError) as e:
        refused.finished_jobs(q)
    assert e.value.transient is True and "Connection refused" in _one_line(e.value)

    with pytest.raises(JobNotFound):
        client(kube).get_job("team-a/no-such-workload")


def test_kueue_not_installed(kube):
    """The API server 404s the whole `kueue.x-k8s.io` group when the CRD is missing
    (kube-apiserver's "the server could not find the requested resource")."""
    kube.load("running-workloads.json")
    kube.objects = [o for o in kube.objects if o["kind"] != "Workload"]
    with pytest.raises(SchedulerError) as e:
        client(kube).finished_jobs(JobQuery(since=SINCE))
    assert "Kueue is not installed on cluster atlas" in _one_line(e.value)
    assert e.value.transient is False


def test_kubeconfig_contexts_build_separate_api_clients(tmp_path, fake_http):
    """Two contexts of one kubeconfig file (the documented kubeconfig v1 shape) give two
    clients that talk to their own API servers with their own bearer tokens."""
    from fake_http import start_fake_http

    other = start_fake_http()
    try:
        FakeKubeAPI(fake_http).load("job-succeeded.json")
        FakeKubeAPI(other).load("job-deadline.json")
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "east",
            "clusters": [
                {"name": "east", "cluster": {"server": fake_http.url}},
                {"name": "west", "cluster": {"server": other.url}},
            ],
            "users": [
                {"name": "east-user", "user": {"token": "tok-east"}},
                {"name": "west-user", "user": {"token": "tok-west"}},
            ],
            "contexts": [
                {"name": "east", "context": {"cluster": "east", "user": "east-user"}},
                {"name": "west", "context": {"cluster": "west", "user": "west-user"}},
            ],
        }
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(kubeconfig))  # JSON is valid YAML
        east = KueueConfig(kubeconfig=str(path)).client("east")
        west = KueueConfig(kubeconfig=str(path), context="west").client("west")
        assert [c.job_id for c in east.finished_jobs(JobQuery(since=SINCE))] == [
            "team-b/job-resnet-eval-7c9d1"
        ]
        assert [c.job_id for c in west.finished_jobs(JobQuery(since=SINCE))] == [
            "team-b/job-data-prep-91ab2"
        ]
        assert {r.headers.get("authorization") for r in fake_http.requests} == {"Bearer tok-east"}
        assert {r.headers.get("authorization") for r in other.requests} == {"Bearer tok-west"}

        bad = KueueConfig(kubeconfig=str(path), context="nope").client("x")
        with pytest.raises(SchedulerError) as e:
            bad.finished_jobs(JobQuery(since=SINCE))
        assert "cannot load kubeconfig" in _one_line(e.value) and "nope" in str(e.value)
    finally:
        other.server.shutdown()
        other.server.server_close()


def test_registered_kind_and_cluster_wiring(kube):
    """`scheduler: {kind: kueue}` in attribution.yaml builds a KueueClient that satisfies
    SchedulerClient; unknown keys are refused."""
    cfg = parse_config("scheduler", {"kind": "kueue", "api_url": kube.url, "namespaces": ["a"]})
    assert isinstance(cfg, KueueConfig) and cfg.namespaces == ("a",)
    cluster = Cluster("atlas", ClusterConfig(scheduler={"kind": "kueue", "api_url": kube.url}))
    assert isinstance(cluster.scheduler, KueueClient)
    assert isinstance(cluster.scheduler, SchedulerClient)
    with pytest.raises(ValueError):
        parse_config("scheduler", {"kind": "kueue", "kubeconfg": "/x"})


def test_namespaces_are_listed_one_by_one(kube, fake_http):
    """Configured namespaces use the namespaced Workload list; others are not read."""
    kube.load(*FINISHED)
    got = client(kube, namespaces=("team-b",)).finished_jobs(JobQuery(since=SINCE))
    assert {c.job_id.split("/")[0] for c in got} == {"team-b"} and len(got) == 2
    paths = {r.path for r in fake_http.requests if r.path.endswith("/workloads")}
    assert paths == {"/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/workloads"}


def test_running_placements_and_sensor_record_idempotently(kube, tmp_path, instance):
    """Admitted, unfinished Workloads (a JobSet and a Job) and their running pods; a
    pending Workload and a pod of a JobSet Kueue does not manage are left out. The sensor
    writes them to the results database and a second tick updates, not duplicates.
    Shapes: Kueue Workload v1beta1, core/v1 Pod lists by label selector."""
    from dagster import SkipReason, build_sensor_context

    from attribution_dagster.resources.kueue import KueuePlacementResource
    from attribution_dagster.sensors.kueue import (
        build_pod_placement_sensor,
        placement_resource_key,
    )

    kube.load("running-workloads.json")
    placements = client(kube).running_placements()
    assert sorted((p.workload, p.pod, p.node) for p in placements) == [
        ("job-sd-finetune-4e7f0", "sd-finetune-w8j4d", "gpu-node-040"),
        ("jobset-gpt-moe-5d0c3", "gpt-moe-workers-0-0-r0x9z", "gpu-node-030"),
        ("jobset-gpt-moe-5d0c3", "gpt-moe-workers-0-1-r1x9z", "gpu-node-031"),
    ]

    url = f"sqlite:///{tmp_path}/results.db"
    resource = KueuePlacementResource.for_cluster("atlas", KueueConfig(api_url=kube.url), url=url)
    sensor = build_pod_placement_sensor("atlas")
    resources = {placement_resource_key("atlas"): resource}
    for _ in range(2):
        ctx = build_sensor_context(instance=instance, resources=resources)
        result = sensor(ctx)
        assert isinstance(result, SkipReason)
        assert "recorded 3 pod placements of 2 running workloads" in result.skip_message
    store = PlacementStore(url)
    assert store.count("atlas") == 3
    [moe1] = [
        p
        for p in store.pods_for("atlas", "team-a", "jobset-gpt-moe-5d0c3")
        if p.node == "gpu-node-031"
    ]
    assert moe1.restarts == 1 and moe1.host_ip == "10.20.2.31"
    assert moe1.started == utc("2026-12-01T13:00:45Z")

    # A transient API failure skips the tick; a permission problem fails it.
    kube.failures = [("/apis/kueue.x-k8s.io", 503, status(503, "ServiceUnavailable", "x"))]
    result = sensor(build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, SkipReason) and "retry" in result.skip_message
    kube.failures = [("/apis/kueue.x-k8s.io", 403, status(403, "Forbidden", "nope"))]
    with pytest.raises(Exception, match="403"):
        sensor(build_sensor_context(instance=instance, resources=resources))

    # Retention: rows not seen for longer than retention_days go.
    assert store.prune(datetime.now(timezone.utc) + timedelta(days=1)) == 3


def test_placement_record_size_per_thousand_jobs(tmp_path):
    """1,000 jobs x 8 pods recorded in SQLite (realistic names and addresses): the file
    stays small enough to keep months of placements. The measured size is in
    docs/kubernetes.md; this guards it from growing by accident."""
    db = tmp_path / "size.db"
    store = PlacementStore(f"sqlite:///{db}")
    start = datetime(2026, 12, 1, tzinfo=timezone.utc)
    for j in range(1000):
        wl = f"jobset-train-llama-{j:05d}-{j * 7919 % 99991:05x}"
        store.record(
            PodPlacement(
                cluster="atlas",
                namespace=f"team-{j % 12}",
                workload=wl,
                pod=f"train-llama-{j:05d}-workers-0-{i}-{(j * 31 + i) % 99991:05x}",
                node=f"gpu-node-{(j * 8 + i) % 1024:04d}",
                host_ip=f"10.20.{(j * 8 + i) % 1024 // 256}.{(j * 8 + i) % 256}",
                pod_ip=f"192.168.{(j * 8 + i) % 256}.{i + 2}",
                started=start + timedelta(minutes=j),
                restarts=i % 3,
                owner=f"JobSet/train-llama-{j:05d}",
            )
            for i in range(8)
        )
    assert store.count() == 8000
    store.engine.dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    size = os.path.getsize(db)
    print(f"placement record: {size} bytes for 1000 jobs x 8 pods ({size / 8000:.0f} B/pod)")
    assert 300_000 < size < 3_500_000


def test_workload_end_ignores_running_and_requeued_workloads():
    """A running Workload has no end; an evicted one that got quota back is running again.
    Shapes: tests/fixtures/k8s/running-workloads.json (Kueue Workload v1beta1)."""
    wl = next(i for i in load_items("running-workloads.json") if i["kind"] == "Workload")
    assert workload_end(wl) is None
    requeued = copy.deepcopy(wl)
    requeued["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "PodsReadyTimeout",
            "message": "Exceeded the PodsReady timeout team-a/jobset-gpt-moe-5d0c3",
            "lastTransitionTime": "2026-12-01T12:59:00Z",
        }
    )
    assert workload_end(requeued) is None  # QuotaReserved is True again
    for c in requeued["status"]["conditions"]:
        if c["type"] in ("QuotaReserved", "Admitted"):
            c["status"] = "False"
    end, how = workload_end(requeued)
    assert how == "evicted" and end == utc("2026-12-01T12:59:00Z")
    state, *_ = classify(requeued, how, None, [], [])
    assert state is JobState.PREEMPTED


def test_placements_url_refuses_a_password():
    """Secrets are only named (placements_password_env), never written in the config."""
    with pytest.raises(ValueError, match="placements_password_env"):
        KueueConfig(placements_url="postgresql+psycopg://u:secret@db/attribution")
    ok = KueueConfig(
        placements_url="postgresql+psycopg://u@db/attribution", placements_password_env="PW"
    )
    assert ok.placements_password_env == "PW"


def test_pod_lost_with_its_node_is_node_fail_and_restarts_are_named():
    """The recorded JobSet where the first pod to die was deleted by the taint manager
    (`DisruptionTarget` reason `DeletionByTaintManager`, the Kubernetes pod-disruption
    condition of a NotReady node) after 2 JobSet restarts -> NODE_FAIL, restarts in reason.
    Shapes: tests/fixtures/k8s/jobset-failed-oom.json, core/v1 Pod conditions."""
    items = load_items("jobset-failed-oom.json")
    wl = next(i for i in items if i["kind"] == "Workload")
    owner = copy.deepcopy(next(i for i in items if i["kind"] == "JobSet"))
    owner["status"]["restarts"] = 2
    jobs = [i for i in items if i["kind"] == "Job"]
    pods = copy.deepcopy([i for i in items if i["kind"] == "Pod"])
    lost = pods[3]
    lost["status"]["containerStatuses"][0]["state"]["terminated"].update(
        exitCode=137, reason="Error", finishedAt="2026-12-01T12:13:40Z"
    )
    lost["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": "2026-12-01T12:13:39Z",
        }
    )
    state, exit_code, reason, step = classify(wl, "finished", owner, jobs, pods)
    assert state is JobState.NODE_FAIL and step == lost["metadata"]["name"]
    assert exit_code == 137 and "2 JobSet restarts" in reason


def test_kueue_job_flows_through_analyze_job(kube):
    """A configured kueue cluster feeds `pipeline.analyze_job` (the CLI's and the assets'
    path): the recorded DeadlineExceeded Job (batch/v1 Job, Kueue Workload v1beta1 shapes)
    becomes a result for `<namespace>/<workload>` that carries the scheduler's state."""
    from attribution_dagster.pipeline import analyze_job

    kube.load("job-deadline.json")
    cluster = Cluster("atlas", ClusterConfig(scheduler={"kind": "kueue", "api_url": kube.url}))
    result = analyze_job(cluster, "team-b/job-data-prep-91ab2")
    assert result.job_id == "team-b/job-data-prep-91ab2" and result.cluster == "atlas"
    assert result.failed and result.state == "TIMEOUT"
    assert result.category == "scheduler.time_limit"


PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param(
            "postgresql",
            id="postgresql",
            marks=[
                pytest.mark.postgres,
                pytest.mark.skipif(
                    not PG_URL and os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") != "1",
                    reason="ATTRIBUTION_TEST_PG_URL is not set",
                ),
            ],
        ),
    ]
)
def placement_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/results.db"
    assert PG_URL, "ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set"
    from attribution_dagster.connectors.kueue.placements import metadata
    from attribution_dagster.core.database import shared_engine

    metadata.drop_all(shared_engine(PG_URL))
    return PG_URL


def test_placement_store_upserts_reads_and_prunes(placement_url):
    """The record on SQLite and PostgreSQL: created on first use, keyed on (cluster,
    namespace, pod) so re-recording updates, read back per workload as PodRefs, pruned
    by last-seen time. Names hostile to SQL are data, bound as parameters."""
    store = PlacementStore(placement_url)
    t0 = datetime(2026, 12, 1, 13, 0, tzinfo=timezone.utc)

    def placement(pod: str, node: str, restarts: int = 0, workload: str = "wl-a"):
        return PodPlacement(
            cluster="atlas",
            namespace="team-a",
            workload=workload,
            pod=pod,
            node=node,
            host_ip="10.0.0.1",
            pod_ip="192.168.0.1",
            started=t0,
            restarts=restarts,
        )

    hostile = "p'); DROP TABLE attribution_pod_placements; --"
    assert store.record([placement("p0", "n0"), placement(hostile, "n1")], now=t0) == 2
    later = t0 + timedelta(hours=1)
    store.record([placement("p0", "n0", restarts=3)], now=later)
    store.record([placement("p9", "n9", workload="wl-b")], now=later)
    assert store.count("atlas") == 3 and store.count("west") == 0
    pods = {p.name: p for p in store.pods_for("atlas", "team-a", "wl-a")}
    assert {(p.name, p.node, p.restarts) for p in pods.values()} == {
        ("p0", "n0", 3),
        (hostile, "n1", 0),
    }
    assert pods["p0"].started == t0 and pods["p0"].host_ip == "10.0.0.1"
    assert store.prune(t0 + timedelta(minutes=30)) == 1  # the hostile pod, unseen since t0
    assert [p.name for p in store.pods_for("atlas", "team-a", "wl-a")] == ["p0"]
    # A second store on the same database finds the table and its rows.
    assert PlacementStore(placement_url).count() == 2


def test_sensor_wiring_as_documented_loads_in_definitions(monkeypatch, tmp_path):
    """The wiring docs/kubernetes.md gives the lead: one resource and one sensor per kueue
    cluster, the database URL from the environment (EnvVar), loads as Definitions."""
    from dagster import Definitions, EnvVar

    from attribution_dagster.resources import KueuePlacementResource
    from attribution_dagster.sensors import build_pod_placement_sensor, placement_resource_key

    monkeypatch.setenv("ATTRIBUTION_SINK_URL", f"sqlite:///{tmp_path}/r.db")
    clusters = {
        "h100-east": ClusterConfig(scheduler={"kind": "kueue", "context": "east"}),
        "static-lab": ClusterConfig(scheduler={"kind": "static", "path": str(tmp_path)}),
    }
    resources, sensors = {}, []
    for name, cluster in clusters.items():
        if cluster.scheduler is not None and cluster.scheduler.kind == "kueue":
            resources[placement_resource_key(name)] = KueuePlacementResource.for_cluster(
                name, cluster.scheduler, url=EnvVar("ATTRIBUTION_SINK_URL")
            )
            sensors.append(build_pod_placement_sensor(name))
    defs = Definitions(sensors=sensors, resources=resources)
    Definitions.validate_loadable(defs)
    assert [s.name for s in defs.sensors] == ["h100_east_pod_placement_sensor"]
    assert list(resources) == ["kueue_placements_h100_east"]


def test_workload_gpus_from_admission_then_pod_sets():
    """`nvidia.com/gpu` of a Workload whose pods are gone: the admitted resourceUsage (a pod
    set's total), else count x the template's request, else None (unknown, never 0).
    Shapes: tests/fixtures/k8s/jobset-failed-oom.json (Kueue Workload v1beta1)."""
    import copy

    from attribution_dagster.connectors.kueue.objects import workload_gpus

    wl = next(i for i in load_items("jobset-failed-oom.json") if i["kind"] == "Workload")
    assert workload_gpus(wl) == 32  # resourceUsage: 4 pods x 8
    no_admission = copy.deepcopy(wl)
    no_admission["status"].pop("admission")
    no_admission["spec"]["podSets"][0]["count"] = 2
    assert workload_gpus(no_admission) == 16  # 2 x the template's 8
    for ps in no_admission["spec"]["podSets"]:
        ps["template"]["spec"]["containers"][0]["resources"] = {}
    assert workload_gpus(no_admission) is None
