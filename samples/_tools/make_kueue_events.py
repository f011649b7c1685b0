# ruff: noqa: E501, E731  (a data generator: long literal log lines)
"""Generator of samples/kueue-node-notready-events (deterministic: the same bytes on every run).

A Kueue/JobSet job whose cause only the Kubernetes API shows: pod logs as `kubectl logs
--timestamps` writes them and `kubectl get events -A -o json` listings per node. The same
files are served by a fake Kubernetes API in tests/test_pod_logs.py (pod_logs source).

    python samples/_tools/make_kueue_events.py
"""
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

random.seed(2111)
root = Path(__file__).resolve().parents[1] / "kueue-node-notready-events"
UTC = timezone.utc
def T(s):  # noqa: N802
    return datetime.fromisoformat(s).replace(tzinfo=UTC)
start, end = T("2026-11-21T08:00:00"), T("2026-11-21T08:42:31")
ns, job = "team-llm", "pretrain-7b-q4m2x"
pods = {
    "gpu-node-21": f"{job}-worker-0-0-7kq2d",
    "gpu-node-22": f"{job}-worker-1-0-x9c4w",
}
ips = {"gpu-node-21": "10.128.0.21", "gpu-node-22": "10.128.0.22"}

def kts(t):  # kubelet --timestamps prefix (RFC3339Nano, fixed 9 digits)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}000Z"

def pylog(t):
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"

def glog(t, sev="E"):
    return f"{sev}{t.strftime('%m%d %H:%M:%S.')}{t.microsecond:06d}{random.randint(100,999)}"

def worker_log(node, rank0, pid0, hang_at, last_step_t):
    L = []
    t = start + timedelta(seconds=21 + rank0 // 8)
    L.append((t, f"{pylog(t)} INFO [pretrain.py:74] starting pretrain.py on {node} (node_rank={rank0 // 8}, nproc_per_node=8, world_size=16)"))
    L.append((t, f"[W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}000 Utils.hpp:135] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())"))
    for i in range(8):
        L.append((t, f"{node}:{pid0 + i}:{pid0 + 90 + i} [{i}] NCCL INFO ncclCommInitRank comm 0x{random.getrandbits(44):011x} rank {rank0 + i} nranks 16 cudaDev {i} nvmlDev {i} busId {['18000','2a000','3a000','5d000','9a000','ab000','ba000','db000'][i]} commId 0x5e21c0ffee7b9a41 localSize 184 used 1344 bytes - Init COMPLETE"))
    t = t + timedelta(seconds=31.4)
    L.append((t, f"{pylog(t)} INFO [pretrain.py:131] model initialised: 7.24B parameters, activation checkpointing on, bf16"))
    t = t + timedelta(seconds=3.1)
    L.append((t, f"{pylog(t)} INFO [data.py:61] loaded 4096 shards from /lustre/datasets/redpajama-v2, 2,711,520,000 tokens"))
    step, loss = 10, 3.412
    t = t + timedelta(seconds=44.2)
    while t <= last_step_t:
        loss -= random.uniform(0.001, 0.009)
        L.append((t, f"{pylog(t)} INFO [pretrain.py:402] step {step} | loss {loss:.4f} | lr {step * 1.5e-7:.3e} | grad_norm {random.uniform(0.6, 1.1):.3f} | tokens/s {random.randint(395000, 419000)} | mem {random.uniform(60.8, 61.6):.1f}GB"))
        step += 10
        t = t + timedelta(seconds=random.uniform(43.6, 44.6))
    return L

out = {}
# worker-1 on gpu-node-22: its node freezes at 08:31:50; the log just stops
out["gpu-node-22"] = worker_log("gpu-node-22", 8, 71204, None, T("2026-11-21T08:31:45"))
# worker-0 on gpu-node-21: last step, then ten minutes of nothing, then the watchdog
w0 = worker_log("gpu-node-21", 0, 98310, None, T("2026-11-21T08:31:45"))
t = T("2026-11-21T08:41:52.114233")
for r in range(8):
    tr = t + timedelta(milliseconds=37 * r)
    w0.append((tr, f"[rank{r}]:[{glog(tr)} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=23105, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for {600071 + 37 * r} milliseconds before timing out."))
    w0.append((tr, f"[rank{r}]:[{glog(tr)} ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  failure detected by watchdog at work sequence id: 23105 PG status: last enqueued work: 23105, last completed work: 23104"))
    w0.append((tr, f"[rank{r}]:[{glog(tr)} ProcessGroupNCCL.cpp:684] [Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."))
    w0.append((tr, f"[rank{r}]:[{glog(tr)} ProcessGroupNCCL.cpp:698] [Rank {r}] To avoid data inconsistency, we are taking the entire process down."))
    w0.append((tr, f"[rank{r}]:[{glog(tr)} ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=23105, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for {600071 + 37 * r} milliseconds before timing out."))
t = T("2026-11-21T08:41:53.902118")
for i in range(1, 8):
    w0.append((t, f"W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d} 98301 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {98310 + i} closing signal SIGTERM"))
t2 = T("2026-11-21T08:42:24.406551")
w0.append((t2, f"E{t2.strftime('%m%d %H:%M:%S')}.{t2.microsecond:06d} 98301 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 0 (pid: 98310) of binary: /usr/bin/python3"))
for line in [
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 919, in main',
    "    run(args)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent',
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "pretrain.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-11-21_08:42:24",
    "  host      : gpu-node-21",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -6 (pid: 98310)",
    "  error_file: <N/A>",
    "  traceback : Signal 6 (SIGABRT) received by PID 98310",
    "============================================================",
]:
    w0.append((t2, line))
out["gpu-node-21"] = w0

for node, lines in out.items():
    d = root / "logs" / node
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{pods[node]}.log").write_text("".join(f"{kts(t)} {s}\n" for t, s in lines))

# --- events, as `kubectl get events -A -o json --field-selector ...` prints them --------
def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")

def micro(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}Z"

rv = [70211400]
def meta(name, namespace, t):
    rv[0] += random.randint(3, 90)
    return {"creationTimestamp": iso(t), "name": name, "namespace": namespace,
            "resourceVersion": str(rv[0]), "uid": f"{random.getrandbits(32):08x}-{random.getrandbits(16):04x}-4{random.getrandbits(12):03x}-a{random.getrandbits(12):03x}-{random.getrandbits(48):012x}"}

def legacy(namespace, obj, reason, etype, msg, t, component, host=None, field_path=None, suffix=None):
    ev = {"apiVersion": "v1", "count": 1, "eventTime": None, "firstTimestamp": iso(t),
          "involvedObject": obj, "kind": "Event", "lastTimestamp": iso(t), "message": msg,
          "metadata": meta(f"{obj['name']}.{suffix or format(random.getrandbits(60), '016x')[:16]}", namespace, t),
          "reason": reason, "reportingComponent": component, "reportingInstance": host or "",
          "source": {"component": component, **({"host": host} if host else {})}, "type": etype}
    if field_path:
        ev["involvedObject"] = {**obj, "fieldPath": field_path}
    return ev

def scheduled(pod, node, t):
    obj = {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": ns,
           "resourceVersion": str(rv[0]), "uid": f"{random.getrandbits(32):08x}-77aa-4c1d-9e0f-{random.getrandbits(48):012x}"}
    return {"action": "Binding", "apiVersion": "v1", "eventTime": micro(t), "firstTimestamp": None,
            "involvedObject": obj, "kind": "Event", "lastTimestamp": None,
            "message": f"Successfully assigned {ns}/{pod} to {node}",
            "metadata": meta(f"{pod}.{format(random.getrandbits(60), '016x')[:16]}", ns, t),
            "reason": "Scheduled", "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-kcp-2", "source": {}, "type": "Normal"}, obj

def node_obj(node):
    return {"kind": "Node", "name": node, "uid": node}

events = {}
for node, pod in pods.items():
    t0 = T("2026-11-21T07:59:58.412345") + timedelta(milliseconds=300 if node.endswith("22") else 0)
    sch, obj = scheduled(pod, node, t0)
    evs = [sch]
    for reason, msg, dt in [
        ("Pulled", 'Container image "registry.internal/llm/pretrain:2026.11-cu124" already present on machine', 6),
        ("Created", "Created container: trainer", 6),
        ("Started", "Started container trainer", 7),
    ]:
        evs.append(legacy(ns, obj, reason, "Normal", msg, t0 + timedelta(seconds=dt), "kubelet", node, "spec.containers{trainer}"))
    events[node] = evs

# gpu-node-22 froze at 08:31:50; the node controller notices after node-monitor-grace-period
t_nr = T("2026-11-21T08:32:33")
events["gpu-node-22"] += [
    legacy("default", node_obj("gpu-node-22"), "NodeNotReady", "Normal",
           "Node gpu-node-22 status is now: NodeNotReady", t_nr, "node-controller"),
    legacy(ns, events["gpu-node-22"][1]["involvedObject"] | {}, "NodeNotReady", "Warning",
           "Node is not ready", t_nr, "node-controller"),
    legacy(ns, events["gpu-node-22"][1]["involvedObject"] | {}, "TaintManagerEviction", "Normal",
           f"Marking for deletion Pod {ns}/{pods['gpu-node-22']}", T("2026-11-21T08:37:38"),
           "taint-eviction-controller"),
    # the node came back after the job had ended: outside the analysis window
    legacy("default", node_obj("gpu-node-22"), "Rebooted", "Warning",
           "Node gpu-node-22 has been rebooted, boot id: 6f0b2c1e-4d3a-4b8e-9a71-2e5c8d9f0a13",
           T("2026-11-21T08:58:12"), "kubelet", "gpu-node-22"),
]
# the pod-level NodeNotReady / TaintManagerEviction events carry no fieldPath
for ev in events["gpu-node-22"][5:7]:
    ev["involvedObject"].pop("fieldPath", None)

for node, evs in events.items():
    doc = {"apiVersion": "v1", "items": evs, "kind": "List", "metadata": {"resourceVersion": ""}}
    (root / "logs" / node / "events.json").write_text(json.dumps(doc, indent=4, sort_keys=True) + "\n")

ctx = {
    "job_id": f"{ns}/{job}",
    "scheduler": "kueue",
    "cluster": "gke-a3-mega-usc1",
    "state": "FAILED",
    "exit_code": 1,
    "start": iso(start),
    "end": iso(end),
    "nodes": ["gpu-node-21", "gpu-node-22"],
    "gpu_model": "H100",
    "job_name": job,
    "node_addresses": {n: [ip] for n, ip in ips.items()},
    "pods": [{"namespace": ns, "name": pod, "node": node, "host_ip": ips[node], "containers": ["trainer"]}
             for node, pod in pods.items()],
}
(root / "context.json").write_text(json.dumps(ctx, indent=2) + "\n")
expected = {
    "failed": True,
    "status": "attributed",
    "category": "node.down",
    "suspect_nodes": ["gpu-node-22"],
    "root_cause_kinds": ["node_unreachable"],
    "candidate_categories": [],
    "why": "gpu-node-22 froze at 08:31:50 (its pod log just stops); the node controller marked it NodeNotReady at 08:32:33 and the taint manager deleted its pod; ten minutes later worker-0 on gpu-node-21 hit the NCCL watchdog's collective timeout. Only the Kubernetes events say which node went away.",
}
(root / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
