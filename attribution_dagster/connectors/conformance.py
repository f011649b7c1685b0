"""The source contract (connectors/base.py), checked: every connector over the same lines.

A log or metric source is only as good as what the engine can rely on from it. The engine
reads, from every source alike: records holding anchors, with a typed locator that reopens
them; where each file / stream / container log stops (`tails`, the silence test); the last
training-progress line of each (`progress`); and a coverage that says what was and was not
read. Those are written in `LogSource` / `MetricSource`; this module checks them.

How a connector is checked (tests/test_conformance.py runs it in `make test`):

1. `recorded_job()` is one job's recorded lines: per node one log of timestamped lines
   (progress every 30 s, a CUDA error on one node, one node that stops writing early, one
   line longer than the cap), one Kubernetes Event (node-problem-detector's OOMKilling, the
   kernel line as message), and per node a few DCGM samples.
2. The test serves those lines through the connector's back-end (files written to a case
   directory or a shared root, a fake Loki, the fake Kubernetes API, Prometheus text files,
   a fake Prometheus HTTP API) and calls the connector through the protocol.
3. `check_log_batch` / `check_samples` check one source's answer on its own: the contract.
4. `compare_log_batches` / `compare_samples` check that all sources tell the engine the same
   thing: the same observations (kind, node, time, code), the same nodes with tails, each
   node's stop at the same instant (an interval tail, Loki's count bucket, must contain it),
   and the same last progress per node.

Topology sources (the `topology` role) are checked the same way: `recorded_topology()` is
one fabric written in every form a source reads (topology.conf, `scontrol show topology`,
topology.yaml, a Kubernetes NodeList with Topograph labels); `check_topology` checks one
source's snapshots, `compare_topologies` that every source gives the same model.

A new connector passes it or does not ship. No Dagster and no test fakes are imported here;
the module is plain data and checks, so a connector's own tests can call it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import TypeAdapter

from attribution_dagster.connectors.base import SourceLimits
from attribution_dagster.core.context import ExecutionContext, JobState, PodRef
from attribution_dagster.core.evidence import (
    Anchor,
    LogBatch,
    MetricFamily,
    MetricSample,
    RawEvidence,
    SourceCoverage,
)
from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.core.locators import Locator, Note
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.settings import Window
from attribution_dagster.core.topology import Topology, TopologySnapshots

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
NODES = ("gpu-a", "gpu-b", "gpu-c")
SILENT = "gpu-c"  # stops writing at 10:10; the others go on to 10:20
CAP = 1024  # the line cap every source is asked to honour (SourceLimits)
NAMESPACE, CONTAINER = "team-llm", "trainer"
PODS = {n: f"train-worker-{i}-0-x9c4w" for i, n in enumerate(NODES)}  # node -> its pod
LIVENESS_KINDS = frozenset({"log_last_line", "progress", "node_silent"})


class ConformanceError(AssertionError):
    """A source broke its contract; the message lists every problem found, one a line."""


@dataclass(frozen=True)
class RecordedJob:
    """One job's evidence as recorded lines, which every back-end is made to serve."""

    ctx: ExecutionContext
    window: Window
    limits: SourceLimits
    logs: Mapping[str, Sequence[tuple[datetime, str]]]  # node -> its log, in order
    events: Sequence[Mapping[str, Any]]  # Kubernetes Event objects, the API's JSON shape
    samples: Sequence[tuple[str, str, Mapping[str, str], datetime, float]] = ()
    # node, metric name, labels, time, value
    anchors: Sequence[Anchor] = field(default_factory=tuple)
    families: Sequence[MetricFamily] = field(default_factory=tuple)  # for metric sources

    def log_text(self, node: str) -> str:
        """The node's log as a file holds it (each line carries its own time)."""
        return "".join(f"{text}\n" for _, text in self.logs[node])


def _progress(t: datetime, it: int) -> str:
    return (
        f"{t:%Y-%m-%dT%H:%M:%S}.000Z [default0]: iteration {it:>8}/  500000 | consumed samples:"
        f" {it * 1024:>12} | elapsed time per iteration (ms): 1843.2 | lm loss: 2.894400E+00 |"
    )


def recorded_job(
    anchors: Sequence[Anchor] = (), families: Sequence[MetricFamily] = ()
) -> RecordedJob:
    """The shared lines. `anchors` and `families`: the parser catalog's
    (pipeline.catalog().anchors(last_only=True), .metric_families()); the module does not
    import the rules, a connector's test passes them."""
    died, timeout, end = (START + timedelta(minutes=m) for m in (10, 20, 21))
    logs: dict[str, list[tuple[datetime, str]]] = {}
    for k, node in enumerate(NODES):
        lines: list[tuple[datetime, str]] = []
        stop = died if node == SILENT else timeout
        t, it = START + timedelta(seconds=5), 0
        while t < stop:
            lines.append((t, _progress(t, it)))
            t += timedelta(seconds=30)
            it += 10
        if node == "gpu-b":
            at = START + timedelta(minutes=3, seconds=1)
            lines.append((at, f"{at:%Y-%m-%dT%H:%M:%S}.000Z [rank8]: RuntimeError: CUDA error: "
                              "an illegal memory access was encountered"))  # fmt: skip
            at = START + timedelta(minutes=3, seconds=2)
            lines.append((at, f"{at:%Y-%m-%dT%H:%M:%S}.000Z NCCL WARN " + "x" * (2 * CAP)))
        if node != SILENT:
            lines.append((timeout, f"{timeout:%Y-%m-%dT%H:%M:%S}.000Z [rank{8 * k}]: Watchdog "
                                   "caught collective operation timeout: WorkNCCL(SeqNum=4123, "
                                   "OpType=ALLREDUCE) ran for 600000 milliseconds before timing "
                                   "out."))  # fmt: skip
        lines.sort(key=lambda x: x[0])
        logs[node] = lines
    oom_at = died - timedelta(seconds=20)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{SILENT}.187a3c4e0f1d2a77", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": SILENT, "uid": SILENT},
        "reason": "OOMKilling",
        "message": "Memory cgroup out of memory: Killed process 48211 (pt_main_thread) "
        "total-vm:98123456kB, anon-rss:66012340kB, file-rss:120400kB, shmem-rss:0kB, UID:0 "
        "pgtables:131072kB oom_score_adj:-997",
        "source": {"component": "kernel-monitor", "host": SILENT},
        "firstTimestamp": f"{oom_at:%Y-%m-%dT%H:%M:%SZ}",
        "lastTimestamp": f"{oom_at:%Y-%m-%dT%H:%M:%SZ}",
        "count": 1,
        "type": "Warning",
        "eventTime": None,
        "reportingComponent": "kernel-monitor",
        "reportingInstance": SILENT,
    }
    samples = [
        (node, "DCGM_FI_DEV_XID_ERRORS", {"Hostname": node, "gpu": "0"},
         START + timedelta(minutes=m), float(79 if (node == "gpu-b" and m >= 3) else 0))
        for node in NODES for m in (1, 2, 3, 4)
    ]  # fmt: skip
    ctx = ExecutionContext(
        job_id="conformance-1",
        scheduler="kueue",
        cluster="conformance",
        state=JobState.NODE_FAIL,
        start=START,
        end=end,
        nodes=list(NODES),
        gpu_model="H100",
        pods=[PodRef(namespace=NAMESPACE, name=pod, node=node, containers=[CONTAINER])
              for node, pod in PODS.items()],
    )  # fmt: skip
    window = Window(start=START - timedelta(minutes=2), end=end + timedelta(minutes=1))
    return RecordedJob(
        ctx=ctx, window=window, limits=SourceLimits(max_line_bytes=CAP), logs=logs,
        events=[event], samples=samples, anchors=tuple(anchors), families=tuple(families),
    )  # fmt: skip


def event_list(job: RecordedJob) -> str:
    """The Events as `kubectl get events -o json` saves them (kubectl's key order)."""
    items = {"apiVersion": "v1", "kind": "List", "items": list(job.events)}
    return json.dumps(items, indent=4, sort_keys=True) + "\n"


# --- one source's answer: the contract -----------------------------------------------------------

_LOCATOR: TypeAdapter[Any] = TypeAdapter(Locator)


def check_log_batch(name: str, batch: object, job: RecordedJob) -> list[str]:
    """What `LogSource.fetch_logs` promises, checked on one answer; [] when it conforms."""
    if not isinstance(batch, LogBatch):
        return [f"{name}: fetch_logs returned {type(batch).__name__}, not a LogBatch"]
    problems: list[str] = []
    cov = batch.coverage
    nodes = set(job.ctx.nodes)
    problems += _check_coverage(name, cov, job, records=len(batch.records))
    cap = job.limits.max_line_bytes
    for what, recs in (("record", batch.records), ("tail", batch.tails),
                       ("progress", batch.progress)):  # fmt: skip
        for r in recs:
            where = f"{name}: {what} {r.locator}"
            problems += _check_locator(where, r.locator)
            if r.node not in nodes and r.node != CLUSTER_NODE:
                problems.append(f"{where}: node {r.node!r} is neither a job node nor cluster")
            if what != "record" and r.node == CLUSTER_NODE:
                problems.append(f"{where}: a cluster-level line cannot say where a node stops")
            if r.time is not None and r.time.tzinfo is None:
                problems.append(f"{where}: naive time {r.time}")
            if r.time_latest is not None and r.time is not None and r.time_latest < r.time:
                problems.append(f"{where}: time_latest before time")
            if cap is not None and any(
                len(part.encode("utf-8", "surrogatepass")) > cap for part in r.text.split("\n")
            ):
                problems.append(f"{where}: a line over the {cap}-byte cap (SourceLimits)")
        if what == "tail" and any(not r.last_of_file for r in recs):
            problems.append(f"{name}: a tail without last_of_file")
        if what != "tail" and any(r.last_of_file for r in recs):
            problems.append(f"{name}: a {what} marked last_of_file (tails go in `tails`)")
    if not batch.tails:
        problems.append(f"{name}: no tails: the engine cannot tell where a node stopped")
    if cov.overlong_lines < 1:
        problems.append(f"{name}: the over-cap line was not counted in overlong_lines")
    if LogBatch.model_validate_json(batch.model_dump_json()) != batch:
        problems.append(f"{name}: the batch does not survive JSON (asset boundary)")
    return problems


def check_samples(
    name: str, samples: Sequence[MetricSample], cov: SourceCoverage | None, job: RecordedJob
) -> list[str]:
    """What `MetricSource.fetch_metrics` promises, checked on one answer."""
    if cov is None:
        return [f"{name}: no coverage"]
    problems = _check_coverage(name, cov, job, records=len(samples))
    for s in samples:
        problems += _check_locator(f"{name}: sample {s.locator}", s.locator)
        if s.node not in job.ctx.nodes:
            problems.append(f"{name}: sample of {s.node!r}, not a job node")
        if not job.window.contains(s.time):
            problems.append(f"{name}: sample at {s.time} outside the window")
    return problems


def _check_coverage(name: str, cov: SourceCoverage, job: RecordedJob, records: int) -> list[str]:
    problems = []
    if cov.status != "ok" or cov.errors:
        problems.append(f"{name}: coverage {cov.status} {cov.errors} for a source that read all")
    if sorted(cov.nodes_read) != sorted(job.ctx.nodes) or cov.nodes_missing:
        problems.append(
            f"{name}: nodes_read {sorted(cov.nodes_read)} missing {cov.nodes_missing}, "
            f"not every job node"
        )
    if cov.records != records:
        problems.append(f"{name}: coverage.records {cov.records} but {records} returned")
    if SourceCoverage.model_validate_json(cov.model_dump_json()) != cov:
        problems.append(f"{name}: coverage does not survive JSON")
    return problems


def _check_locator(where: str, loc: object) -> list[str]:
    if isinstance(loc, Note):
        return [f"{where}: a text-only Note locator; a source gives a file, query or object"]
    if not str(loc):
        return [f"{where}: empty locator"]
    if _LOCATOR.validate_python(_LOCATOR.dump_python(loc, mode="json")) != loc:
        return [f"{where}: the locator does not survive JSON"]
    return []


# --- all sources agree: the engine hears the same thing ---------------------------------------


def observed(obs: Sequence[Observation]) -> set[tuple[Any, ...]]:
    """What a source's lines say, comparable across sources: events (not liveness), by kind,
    node, time, code, and whether the line was the node writing (no Event tag, not logged
    elsewhere) — the test liveness uses."""
    return {
        (o.kind, o.node, o.time, o.code,
         "event_reason" in o.attrs or "logged_on" in o.attrs)
        for o in obs
        if o.kind not in LIVENESS_KINDS
    }  # fmt: skip


def stops(batch: LogBatch | RawEvidence) -> dict[str, tuple[datetime, datetime]]:
    """Per node, the interval its writing stops in: max over its tails of (time, time_latest)."""
    out: dict[str, tuple[datetime, datetime]] = {}
    for t in batch.tails:
        if t.time is None:
            continue
        lo, hi = t.time, t.time_latest or t.time
        cur = out.get(t.node)
        if cur is None or hi > cur[1]:
            out[t.node] = (lo, hi)
    return out


def last_progress(batch: LogBatch | RawEvidence) -> dict[str, datetime | None]:
    out: dict[str, datetime | None] = {}
    for r in batch.progress:
        if r.node not in out or (r.time and (out[r.node] is None or r.time > out[r.node])):  # type: ignore[operator]
            out[r.node] = r.time
    return out


def compare_log_batches(
    answers: Mapping[str, tuple[LogBatch, Sequence[Observation]]], job: RecordedJob
) -> list[str]:
    """Each source's batch and the observations the catalog made of it (pipeline.normalize
    over a RawEvidence holding only that batch), against the first source's (the reference:
    the files connector, which reads every line)."""
    problems: list[str] = []
    (ref_name, (ref, ref_obs)), *others = answers.items()
    want_obs, want_stops, want_prog = observed(ref_obs), stops(ref), last_progress(ref)
    for name, (batch, obs) in others:
        got = observed(obs)
        for o in sorted(want_obs - got, key=str):
            problems.append(f"{name}: lacks {o} that {ref_name} gives")
        for o in sorted(got - want_obs, key=str):
            problems.append(f"{name}: gives {o} that {ref_name} does not")
        got_stops = stops(batch)
        if set(got_stops) != set(want_stops):
            problems.append(
                f"{name}: tails for {sorted(got_stops)}, {ref_name}: {sorted(want_stops)}"
            )
        for node, (lo, hi) in got_stops.items():
            exact = want_stops.get(node, (None, None))[0]
            if exact is not None and not (lo <= exact <= hi):
                problems.append(f"{name}: {node} stops in [{lo}, {hi}], {ref_name} at {exact}")
        got_prog = last_progress(batch)
        if got_prog != want_prog:
            problems.append(f"{name}: last progress {got_prog}, {ref_name}: {want_prog}")
    return problems


def compare_samples(answers: Mapping[str, Sequence[MetricSample]]) -> list[str]:
    """Every metric source returns the same samples (node, name, the job's labels, time, value)."""

    def key(s: MetricSample) -> tuple[Any, ...]:
        return (s.node, s.name, s.labels.get("gpu"), s.time, s.value)

    (ref_name, ref), *others = answers.items()
    want = sorted(map(key, ref))
    problems = []
    for name, samples in others:
        got = sorted(map(key, samples))
        if got != want:
            problems.append(f"{name}: samples {got[:3]}... differ from {ref_name}'s {want[:3]}...")
    return problems


# --------------------------------------------------------------------------- topology

LEAVES = {"gpu-a": "leaf-1", "gpu-b": "leaf-1", "gpu-c": "leaf-2"}  # under spine-1
NVLINK_DOMAIN = "50000000-0000-0000-0000-000000000005.4000000004"


@dataclass(frozen=True)
class RecordedTopology:
    """One fabric (NODES on two leaves under one spine, one NVLink domain) in each form."""

    topology_conf: str
    scontrol: str  # `scontrol show topology` as Slurm 22.05 prints it
    topology_yaml: str
    nodes: Mapping[str, Any]  # a v1 NodeList, the API's JSON shape (kubectl get nodes -o json)


def recorded_topology() -> RecordedTopology:
    a_b = ",".join(n for n, leaf in LEAVES.items() if leaf == "leaf-1")
    c = ",".join(n for n, leaf in LEAVES.items() if leaf == "leaf-2")
    p = "network.topology.nvidia.com/"
    nodes = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": n,
                    "labels": {
                        "kubernetes.io/hostname": n,
                        p + "accelerator": NVLINK_DOMAIN,
                        p + "leaf": leaf,
                        p + "spine": "spine-1",
                    },
                },
                "spec": {},
                "status": {"addresses": [{"type": "Hostname", "address": n}]},
            }
            for n, leaf in LEAVES.items()
        ],
    }
    return RecordedTopology(
        topology_conf=f"# two leaves, one spine\nSwitchName=leaf-1 Nodes={a_b}\n"
        f"SwitchName=leaf-2 Nodes={c}\nSwitchName=spine-1 Switches=leaf-[1-2]\n",
        scontrol=f"SwitchName=leaf-1 Level=0 LinkSpeed=1 Nodes={a_b}\n"
        f"SwitchName=leaf-2 Level=0 LinkSpeed=1 Nodes={c}\n"
        f"SwitchName=spine-1 Level=1 LinkSpeed=1 Nodes={a_b},{c} Switches=leaf-[1-2]\n",
        topology_yaml="- topology: main\n  cluster_default: true\n  tree:\n    switches:\n"
        "    - switch: spine-1\n      children: leaf-[1-2]\n"
        f"    - switch: leaf-1\n      nodes: {a_b}\n    - switch: leaf-2\n      nodes: {c}\n",
        nodes=nodes,
    )


def check_topology(name: str, snaps: object) -> list[str]:
    """One topology source's answer: snapshots, each dated (aware), named by its sources,
    with no errors on the recorded fabric, and self-consistent (every leaf, parent and
    cable end a known switch)."""
    if not isinstance(snaps, TopologySnapshots):
        return [f"{name}: returned {type(snaps).__name__}, not TopologySnapshots"]
    if not snaps.snapshots:
        return [f"{name}: no snapshot"]
    problems = [f"{name}: {e}" for e in snaps.errors]
    for i, t in enumerate(snaps.snapshots):
        where = f"{name} snapshot {i}"
        if t.taken_at is None or t.taken_at.tzinfo is None:
            problems.append(f"{where}: taken_at {t.taken_at} is not an aware time")
        if not t.sources:
            problems.append(f"{where}: names no source")
        problems += [f"{where}: {e}" for e in t.errors]
        known = set(t.switches)
        named = set(t.leaf_of.values()) | {c.switch for c in t.cables}
        named |= {s.parent for s in t.switches.values() if s.parent}
        problems += [f"{where}: switch {sw} is not in switches" for sw in sorted(named - known)]
    return problems


def compare_topologies(answers: Mapping[str, Topology]) -> list[str]:
    """Every source tells the engine the same thing about the job's nodes: each node's
    leaf, the switches above it, and (where a source reads them) its NVLink domain."""

    def shape(t: Topology) -> dict[str, Any]:
        return {
            n: (t.leaf(n), tuple(t.ancestors(t.leaf(n) or "")), t.switches.get(t.leaf(n) or ""))
            for n in NODES
        }

    (ref_name, ref), *others = answers.items()
    want = shape(ref)
    problems = []
    for name, t in others:
        got = shape(t)
        for n in NODES:
            if got[n][:2] != want[n][:2]:
                problems.append(f"{name}: {n} under {got[n][:2]}, {ref_name} says {want[n][:2]}")
            elif (got[n][2] and got[n][2].tier) != (want[n][2] and want[n][2].tier):
                problems.append(f"{name}: {n}'s leaf tier differs from {ref_name}'s")
    domains = {k: t.nvlink_domain_of for k, t in answers.items() if t.nvlink_domain_of}
    if len({json.dumps(d, sort_keys=True) for d in domains.values()}) > 1:
        problems.append(f"NVLink domains differ: {domains}")
    return problems


def assert_conforms(problems: Sequence[str]) -> None:
    """Raise ConformanceError listing every problem (one a line), if any."""
    if problems:
        raise ConformanceError("\n".join(problems))


__all__ = [
    "LEAVES",
    "RecordedTopology",
    "check_topology",
    "compare_topologies",
    "recorded_topology",
    "CAP",
    "NODES",
    "SILENT",
    "ConformanceError",
    "RecordedJob",
    "assert_conforms",
    "check_log_batch",
    "check_samples",
    "compare_log_batches",
    "compare_samples",
    "event_list",
    "last_progress",
    "observed",
    "recorded_job",
    "stops",
]
