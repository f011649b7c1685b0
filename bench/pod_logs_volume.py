"""Requests and bytes the `pod_logs` source moves for one 64-node job.

    python bench/pod_logs_volume.py [--nodes 64] [--lines 20000]

The Kubernetes API cannot filter log lines on the server, so unlike Loki and Prometheus
there is no pushed-down query to compare with: every byte of a pod's log since the window
start travels, up to `max_bytes_per_pod`, and the connector keeps only candidate lines.
This measures that cost against a local server answering in the API's shapes (one pod per
node, kubelet-timestamped lines, one XID line per pod, no previous containers, no events):
requests, bytes received, lines kept, the CPU time of the client (`time.thread_time` of the
calling thread: the fake server answers from its own threads and is not counted), and the
effect of the per-pod byte cap. The anchors are the ones the pipeline passes
(`catalog().anchors(last_only=True)`: with the training-progress literals, so remembering
each log's last line and last progress line is in the numbers). Every 10th line is a
Megatron iteration line.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fakes"))

from fake_http import start_fake_http  # noqa: E402

from attribution_dagster.connectors.pod_logs.client import PodLogsConfig  # noqa: E402
from attribution_dagster.core.context import ExecutionContext, PodRef
from attribution_dagster.pipeline import catalog  # noqa: E402

START = datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc)


def log_body(pod: str, lines: int) -> bytes:
    out = []
    for i in range(lines):
        t = START + timedelta(seconds=i * 3600 / lines)
        text = (
            f"step {i} loss 2.{i % 97:02d} rank {pod}"
            if i % 10
            else f" iteration {i:>8}/  500000 | elapsed time per iteration (ms): 1843.2 | "
            f"lm loss: 2.{i % 97:02d}E+00 |"
        )
        text = (
            text
            if i != lines // 2
            else (
                "NVRM: Xid (PCI:0000:91:00): 79, pid=4242, name=python, GPU has fallen off the bus."
            )
        )
        out.append(f"{t.isoformat().replace('+00:00', '.000000000Z')} {text}")
    return ("\n".join(out) + "\n").encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--lines", type=int, default=20000)
    args = ap.parse_args()
    fake = start_fake_http()
    bodies = {f"job-w{i}": log_body(f"job-w{i}", args.lines) for i in range(args.nodes)}

    def pod_log(req):
        pod = req.path.split("/")[-2]
        if (req.arg("previous") or "").lower() == "true":
            return 400, {
                "kind": "Status",
                "status": "Failure",
                "reason": "BadRequest",
                "message": f'previous terminated container "main" in pod "{pod}" not found',
                "code": 400,
            }
        body = bodies[pod]
        limit = req.arg("limitBytes")
        return 200, body[: int(limit)] if limit else body

    fake.route_prefix("GET", "/api/v1/namespaces/team/pods/", pod_log)
    fake.route_prefix(
        "GET", "/api/v1/namespaces/team/events", lambda r: (200, {"kind": "EventList", "items": []})
    )
    fake.route_prefix("GET", "/api/v1/events", lambda r: (200, {"kind": "EventList", "items": []}))
    nodes = [f"gpu-{i:03d}" for i in range(args.nodes)]
    ctx = ExecutionContext(
        job_id="team/job",
        scheduler="kueue",
        state="FAILED",
        start=START,
        end=START + timedelta(hours=1),
        nodes=nodes,
        pods=[
            PodRef(namespace="team", name=f"job-w{i}", node=n, containers=["main"])
            for i, n in enumerate(nodes)
        ],
    )
    from attribution_dagster.core.settings import AnalysisSettings

    window = AnalysisSettings().window(ctx)
    total = sum(len(b) for b in bodies.values())
    for cap in (None, 1 << 20):
        cfg = {"kind": "pod_logs", "api_url": fake.url, "verify_tls": False}
        if cap:
            cfg["max_bytes_per_pod"] = cap
        client = PodLogsConfig.model_validate(cfg).client("bench")
        t0, c0 = time.perf_counter(), time.thread_time()
        batch = client.fetch_logs(ctx, catalog().anchors(last_only=True), window)
        records, cov = batch.pair()
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
        print(
            f"pod_logs, {args.nodes} pods x {args.lines} lines ({total / 1e6:.0f} MB of logs), "
            f"max_bytes_per_pod={cap or cfg.get('max_bytes_per_pod', 'default')}: "
            f"{cov.queries} requests, {cov.bytes / 1e6:.1f} MB received, {cov.lines} lines, "
            f"{len(records)} kept, {len(batch.tails)} tails, {len(batch.progress)} "
            f"progress, {dt:.2f} s wall, {cpu:.2f} s CPU; {'; '.join(cov.errors[:1])}"
        )
    fake.server.shutdown()


if __name__ == "__main__":
    main()
