"""Who fell first, from Kubernetes pod logs: where each container log stops and its last
training-progress line (connectors/pod_logs.py -> LogBatch tails / progress), read
by the engine exactly like the files connector's.

A Kubernetes API server cannot run here. The connector runs its real code path (the
`kubernetes` client, urllib3, HTTP) against `fake_http` through the FakeKube of
tests/test_pod_logs.py, which answers in the shapes of the Kubernetes API reference (v1.31,
core/v1): `GET /api/v1/namespaces/{ns}/pods/{name}/log` returns text/plain lines each
prefixed by kubelet's RFC 3339 timestamp (`timestamps=true`), honouring `sinceSeconds` and
`limitBytes`; `previous=true` for a container that never restarted is the BadRequest Status
`previous terminated container ... not found`; events come as an `EventList`. The Event
objects are written like `kubectl get events -o json` shows a real NodeNotReady from the node
controller (tests/fixtures/k8s/podlogs-events-node-notready.json).

Each case is written twice from the same lines: as case files (`logs/<node>/<pod>.log`, what
`kubectl logs --timestamps` saves, and `logs/<node>/events.json`) and served by the fake API;
both verdicts must agree, as tests/test_loki_liveness.py does for Loki. The context is the
one the Kueue connector builds for a JobSet whose first failed pod lost its node
(`DisruptionTarget` / `DeletionByTaintManager` -> NODE_FAIL, connectors/kueue.py).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fake_pod_logs import FakeKube

from attribution_dagster.connectors.clusters import EvidenceSources
from attribution_dagster.connectors.pod_logs.client import PodLogsClient, PodLogsConfig
from attribution_dagster.core.context import ExecutionContext, JobState, PodRef
from attribution_dagster.core.evidence import LogBatch
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.pipeline import analyze_case, analyze_context, catalog

pytestmark = pytest.mark.k8s

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
NS = "team-llm"
JOB = "llama-70b-r8k2w"
NODES = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
# JobSet pod names: <jobset>-<replicated job>-<job index>-<completion index>-<random>
PODS = {
    n: f"{JOB}-worker-{i}-0-{sfx}"
    for i, (n, sfx) in enumerate(zip(NODES, ("9ffrc", "5hq8v", "q7w2n", "x7k2p"), strict=True))
}


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def kubelet(lines: list[tuple[datetime, str]]) -> bytes:
    return "".join(f"{stamp(t)} {text}\n" for t, text in lines).encode()


def megatron(t: datetime, it: int) -> str:
    return (
        f" [{t:%Y-%m-%d %H:%M:%S}] iteration {it:>8}/  500000 | consumed samples: {it * 1024:>12} "
        "| elapsed time per iteration (ms): 1843.2 | learning rate: 2.999E-04 | global batch "
        "size:  1024 | lm loss: 2.894400E+00 |"
    )


def timeout_line(t: datetime, rank: int) -> str:
    return (
        f"[rank{rank}]:[E1102 {t:%H:%M:%S}.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4123, OpType=ALLREDUCE, "
        "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600000 milliseconds "
        "before timing out."
    )


def node_not_ready(node: str, t: datetime) -> dict[str, Any]:
    """An Event the node controller writes when a kubelet stops posting status (the shape of
    tests/fixtures/k8s/podlogs-events-node-notready.json)."""
    return {
        "metadata": {"name": f"{node}.187a3c1f2b9e0d44", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": "NodeNotReady",
        "message": f"Node {node} status is now: NodeNotReady",
        "source": {"component": "node-controller"},
        "firstTimestamp": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lastTimestamp": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "node-controller",
        "reportingInstance": "",
    }


def context(end: datetime, state: JobState = JobState.NODE_FAIL) -> ExecutionContext:
    return ExecutionContext(
        job_id=f"{NS}/{JOB}",
        scheduler="kueue",
        cluster="gke-a3",
        state=state,
        exit_code=None if state is JobState.NODE_FAIL else 1,
        start=START,
        end=end,
        nodes=NODES,
        gpu_model="H100",
        job_name=JOB,
        pods=[PodRef(namespace=NS, name=PODS[n], node=n, containers=["trainer"]) for n in NODES],
    )


def write_case(
    root: Path,
    ctx: ExecutionContext,
    logs: dict[str, bytes],
    events: list[dict[str, Any]] = (),  # type: ignore[assignment]
    previous: dict[str, bytes] | None = None,
) -> Path:
    """The case files: each pod's log as `kubectl logs --timestamps` saves it (the previous
    container's as `<pod>.previous.log`), the Events as `kubectl get events -o json`."""
    case = root / "case"
    for node, body in logs.items():
        d = case / "logs" / node
        d.mkdir(parents=True)
        (d / f"{PODS[node]}.log").write_bytes(body)
        if previous and node in previous:
            (d / f"{PODS[node]}.previous.log").write_bytes(previous[node])
    for ev in events:
        node = ev["involvedObject"]["name"]
        items = {"apiVersion": "v1", "kind": "List",
                 "items": [{"apiVersion": "v1", "kind": "Event", **ev}]}
        text = json.dumps(items, indent=4, sort_keys=True)  # kubectl's key order
        (case / "logs" / node / "events.json").write_text(text)
    (case / "context.json").write_text(ctx.model_dump_json(exclude={"case_dir"}))
    return case


def serve(
    fake_http: Any,
    ctx: ExecutionContext,
    logs: dict[str, bytes],
    events: list[dict[str, Any]] = (),  # type: ignore[assignment]
    previous: dict[str, bytes] | None = None,
    **cfg: Any,
) -> PodLogsClient:
    """The same lines served by the fake API; the client that reads them."""
    now = ctx.end + timedelta(minutes=10)
    kube = FakeKube(fake_http, now=now)
    for node, body in logs.items():
        kube.logs[(NS, PODS[node], "trainer", False)] = body
    for node, body in (previous or {}).items():
        kube.logs[(NS, PODS[node], "trainer", True)] = body
    kube.events += list(events)
    config = PodLogsConfig(api_url=fake_http.url, timeout_seconds=5, **cfg)
    return PodLogsClient(config, cluster="gke-a3", now=lambda: now)


def verdict(r):  # type: ignore[no-untyped-def]
    return (r.status, r.category, r.suspect_nodes)


class Blind:
    """The pod_logs source as it was before: no tails, no progress (the counterfactual)."""

    def __init__(self, src: PodLogsClient) -> None:
        self.src, self.name = src, src.name

    def fetch_logs(self, ctx, anchors, window, limits=None):  # type: ignore[no-untyped-def]
        batch = self.src.fetch_logs(ctx, anchors, window, limits)
        return batch.model_copy(update={"tails": [], "progress": []})


def fetch(src: PodLogsClient, ctx: ExecutionContext) -> LogBatch:
    return src.fetch_logs(ctx, catalog().anchors(last_only=True), AnalysisSettings().window(ctx))


# --- one node falls silent -----------------------------------------------------------------------

DIED = START + timedelta(minutes=10)  # gpu-c's kubelet and its pod go with the node
TIMEOUT = START + timedelta(minutes=20)  # the others' NCCL watchdogs, ten minutes later
END = START + timedelta(minutes=21)


def silent_logs(chatty: str | None = None) -> dict[str, bytes]:
    """4 pods training (a Megatron iteration line every 30 s); gpu-c's log stops at 10:09:30,
    the others stall in the collective and time out at 10:20. `chatty`: that pod also writes
    a debug line every second (a big log)."""
    logs = {}
    for k, node in enumerate(NODES):
        lines: list[tuple[datetime, str]] = []
        t, it = START, 0
        while t < DIED:
            lines.append((t, megatron(t, it)))
            if node == chatty:
                lines += [(t + timedelta(seconds=s), f"DEBUG dataloader prefetch {s} " + "x" * 80)
                          for s in range(1, 30)]
            t += timedelta(seconds=30)
            it += 10
        if node != "gpu-c":
            lines.append((TIMEOUT, timeout_line(TIMEOUT, 8 * k)))
            lines.append((TIMEOUT + timedelta(seconds=2), f"[rank{8 * k}] exiting: watchdog"))
        logs[node] = kubelet(sorted(lines))
    return logs


@pytest.mark.parametrize("with_event", [False, True], ids=["node_fail", "node_not_ready"])
def test_silent_pod_from_the_api_equals_files(fake_http, tmp_path, with_event):
    """gpu-c's pod log stops ten minutes before the others' NCCL timeouts; the job ended
    NODE_FAIL (Kueue: its pod lost the node) and, in one variant, the node controller's
    NodeNotReady also names gpu-c. From case files and from the API: node.down on gpu-c, the
    silence (its last line, 10:09:30) first in the chain, its evidence a reopenable locator."""
    ctx = context(END)
    logs = silent_logs()
    events = [node_not_ready("gpu-c", DIED + timedelta(seconds=45))] if with_event else []
    want = analyze_case(write_case(tmp_path, ctx, logs, events))
    assert verdict(want) == ("attributed", "node.down", ["gpu-c"])
    src = serve(fake_http, ctx, logs, events)
    got = analyze_context(ctx, sources=EvidenceSources(logs=(src,)))
    assert verdict(got) == verdict(want)
    assert got.rule == want.rule
    last = DIED - timedelta(seconds=30)
    for r in (got, want):
        roots = [c for c in r.symptom_chain if c.role == "root_cause"]
        assert roots[0].kind == "node_silent" and roots[0].node == "gpu-c"
        assert roots[0].time == last and roots[0].time_latest is None
        assert "iteration" in roots[0].evidence.excerpt
        assert any(n.startswith("gpu-c stopped writing at 10:09:30Z") for n in r.notes)
    silent = next(c for c in got.symptom_chain if c.kind == "node_silent")
    assert silent.evidence.locator == (
        f"pod {NS}/{PODS['gpu-c']} container trainer @ {stamp(last)}"
    )
    # the same reads as before: one request per container log (previous, current) and the
    # events; nothing extra for liveness
    asks = [r for r in fake_http.requests if r.path.endswith("/log")]
    assert len(asks) == 2 * len(NODES)
    # without the tails, nothing but the NodeNotReady names gpu-c: the NODE_FAIL job has
    # no cause at all, and with the event, gpu-c's silence is not in the chain
    before = analyze_context(ctx, sources=EvidenceSources(logs=(Blind(src),)))
    assert not any(c.kind == "node_silent" for c in before.symptom_chain)
    if not with_event:
        assert verdict(before) != verdict(want)


def test_tails_and_progress_have_the_files_shape(fake_http):
    """One tail per container log, exact kubelet times, `stream` the container (pod names
    differ across nodes, their containers do not), the pod's node, a locator to reopen;
    the last progress line of each log in progress."""
    ctx = context(END)
    batch = fetch(serve(fake_http, ctx, silent_logs()), ctx)
    assert batch.coverage.status == "ok" and not batch.coverage.errors
    tails = {t.node: t for t in batch.tails}
    assert sorted(tails) == NODES and len(batch.tails) == len(NODES)
    for node, t in tails.items():
        assert t.last_of_file and t.time_quality == "exact" and t.time_latest is None
        assert t.stream == "trainer" and t.source == "pod_logs"
        assert str(t.locator) == f"pod {NS}/{PODS[node]} container trainer @ {stamp(t.time)}"
    assert tails["gpu-c"].time == DIED - timedelta(seconds=30)
    assert tails["gpu-a"].time == TIMEOUT + timedelta(seconds=2)
    assert tails["gpu-a"].text == "[rank0] exiting: watchdog"  # the body, not the stamp
    progress = {p.node: p for p in batch.progress}
    assert sorted(progress) == NODES
    assert all(p.time == DIED - timedelta(seconds=30) and "iteration      190/" in p.text
               for p in progress.values())
    assert all(p.time_quality == "exact" and not p.last_of_file for p in progress.values())


# --- a fault, then 30 minutes of progress ------------------------------------------------------


def hf_logs() -> dict[str, bytes]:
    """HF Trainer on 4 pods: a loss dict every minute. At 10:05 gpu-a's trainer hits a CUDA
    OOM (auto_find_batch_size catches it and halves the batch) and goes on logging progress
    for 30 minutes; at 10:40 gpu-b's data collator raises and the job fails."""
    fault = START + timedelta(minutes=5)
    crash = START + timedelta(minutes=40)
    logs = {}
    for node in NODES:
        lines: list[tuple[datetime, str]] = []
        for m in range(40):
            t = START + timedelta(minutes=m, seconds=1)
            lines.append((t, f"{{'loss': {2.5 - m / 40:.4f}, 'grad_norm': 0.91, "
                             f"'learning_rate': 4.9e-05, 'epoch': {m / 100:.2f}}}"))
        if node == "gpu-a":
            lines.append((fault, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                 "2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which "
                                 "1.02 GiB is free."))
        if node == "gpu-b":
            lines += [
                (crash, "Traceback (most recent call last):"),
                (crash, '  File "/app/train.py", line 212, in <module>'),
                (crash, "ValueError: Unable to create tensor, you should probably activate "
                        "truncation and/or padding with 'padding=True' 'truncation=True'"),
            ]
        logs[node] = kubelet(sorted(lines))
    return logs


def test_a_fault_followed_by_progress_is_not_blamed_from_pod_logs(fake_http, tmp_path):
    """A CUDA OOM on gpu-a followed by 30 minutes of HF Trainer loss lines on the same pod is
    not the cause: the same verdict from the API as from the files (the app error on gpu-b);
    without the progress lines from the API it would be."""
    ctx = context(START + timedelta(minutes=41), JobState.FAILED)
    logs = hf_logs()
    want = analyze_case(write_case(tmp_path, ctx, logs))
    src = serve(fake_http, ctx, logs)
    got = analyze_context(ctx, sources=EvidenceSources(logs=(src,)))
    assert verdict(want) == ("attributed", "app.error", ["gpu-b"]), want.summary
    assert verdict(got) == verdict(want) and got.rule == want.rule
    assert any("training went on" in n for n in got.notes), got.notes
    blind = analyze_context(ctx, sources=EvidenceSources(logs=(Blind(src),)))
    assert verdict(blind) != verdict(want)
    assert "gpu-a" in blind.suspect_nodes
    batch = fetch(serve(fake_http, ctx, logs), ctx)
    last = {p.node: p for p in batch.progress}
    assert last["gpu-a"].time == START + timedelta(minutes=39, seconds=1)
    assert last["gpu-a"].text.startswith("{'loss': 1.5250")


# --- a log cut at max_bytes_per_pod does not stop there ------------------------------------------


def test_a_log_cut_at_max_bytes_has_no_tail(fake_http, tmp_path):
    """gpu-b's pod writes a debug line every second: at max_bytes_per_pod (32 KiB) its log
    is cut around 10:03. That is not where it stopped: no tail and no last progress line for
    it (a tail there would make gpu-b a second silent node, and the NODE_FAIL job would lose
    its one silent node); the coverage says so; gpu-c is still found."""
    ctx = context(END)
    logs = silent_logs(chatty="gpu-b")
    assert len(logs["gpu-b"]) > 64 * 1024 > 32 * 1024 > max(
        len(b) for n, b in logs.items() if n != "gpu-b"
    )
    src = serve(fake_http, ctx, logs, max_bytes_per_pod=32 * 1024)
    batch = fetch(src, ctx)
    assert sorted(t.node for t in batch.tails) == ["gpu-a", "gpu-c", "gpu-d"]
    assert "gpu-b" not in {p.node for p in batch.progress}
    cut = [e for e in batch.coverage.errors if "max_bytes_per_pod" in e]
    assert cut and PODS["gpu-b"] in cut[0] and "where it stops is not known" in cut[0]
    assert batch.coverage.status == "partial"
    got = analyze_context(ctx, sources=EvidenceSources(logs=(src,)))
    assert verdict(got) == ("attributed", "node.down", ["gpu-c"])
    assert not any(c.kind == "node_silent" and c.node == "gpu-b" for c in got.symptom_chain)


# --- a restarted container ----------------------------------------------------------------------


def test_previous_container_tail_is_where_it_stopped(fake_http):
    """gpu-d's first container crashed at 10:04 and the restarted one logs to the end: the
    previous log's tail is where that container stopped, the current one's where the pod is
    now; each is its own entry. When the current log cannot be read to its end, neither is
    kept (the previous tail would pass for where gpu-d stopped)."""
    ctx = context(END)
    logs = silent_logs()
    crashed = START + timedelta(minutes=4)
    previous = {"gpu-d": kubelet([(START, megatron(START, 0)),
                                  (crashed, "RuntimeError: CUDA error: an illegal memory access "
                                            "was encountered")])}
    batch = fetch(serve(fake_http, ctx, logs, previous=previous), ctx)
    d = sorted((t for t in batch.tails if t.node == "gpu-d"), key=lambda t: t.time)
    assert [t.time for t in d] == [crashed, TIMEOUT + timedelta(seconds=2)]
    want = f"pod {NS}/{PODS['gpu-d']} container trainer previous @ {stamp(crashed)}"
    assert str(d[0].locator) == want
    assert " previous @ " not in str(d[1].locator)
    # the current log answers 500: the previous log's tail is not kept either
    kube_src = serve(fake_http, ctx, logs, previous=previous)
    fake_http.route_prefix(
        "GET", f"/api/v1/namespaces/{NS}/pods/{PODS['gpu-d']}/log",
        lambda req: (500, {"kind": "Status", "code": 500, "message": "proxy error"})
        if (req.arg("previous") or "").lower() != "true"
        else (200, previous["gpu-d"], {"Content-Type": "text/plain"}),
    )
    batch = fetch(kube_src, ctx)
    assert "gpu-d" not in {t.node for t in batch.tails}
    assert batch.coverage.status == "partial" and batch.coverage.retryable


# --- the engine's two general changes -----------------------------------------------------------


def test_stream_key_folds_a_generated_pod_suffix_only():
    from attribution_dagster.core.locators import FileLine
    from attribution_dagster.rules.engine.liveness import stream_key

    def key(path: str, line: int) -> str:
        return stream_key(FileLine(path=path, line=line))

    a = key(f"logs/gpu-a/{PODS['gpu-a']}.log", 12)
    assert a == key(f"logs/gpu-c/{PODS['gpu-c']}.log", 40) == ("llama-#b-r#k#w-worker-#-#-*.log")
    assert key("logs/n/slurm-4812.out", 1) == "slurm-#.out"
    for name in ("app.log", "kern.log", "train-stdout.log", "nccl-debug.txt"):
        assert key(f"logs/n/{name}", 3) == name  # words keep their vowels


def test_a_kubernetes_event_is_not_the_node_writing():
    """NodeNotReady is written by the node controller after the node is gone: it does not
    move the node's last line later (else the silence would be dated by the event)."""
    from attribution_dagster.core.observation import Observation
    from attribution_dagster.rules.engine.liveness import last_seen

    tail = Observation(kind="log_last_line", node="gpu-c", time=DIED, excerpt="x",
                       source="pod_logs", locator="pod a/b container trainer @ x",
                       parser="file_tail", attrs={"stream": "trainer"})
    event = Observation(kind="node_unreachable", node="gpu-c", time=DIED + timedelta(minutes=5),
                        excerpt="NodeNotReady", source="pod_logs", locator="event default/c.1",
                        parser="k8s_event_node_down", attrs={"event_reason": "NodeNotReady"})
    seen = last_seen([tail, event], NODES)
    assert list(seen["gpu-c"].values()) == [tail]
