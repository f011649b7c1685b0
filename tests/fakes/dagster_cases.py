"""Small job cases written into tmp directories for the Dagster tests (spec: case-format.md)."""

from __future__ import annotations

import json
from pathlib import Path

XID79 = (
    "2026-11-02T10:03:11.000000+00:00 {node} kernel: NVRM: Xid (PCI:0000:91:00): 79, "
    "pid=4242, name=python, GPU has fallen off the bus."
)
NCCL_TIMEOUT = (
    "[rank3]:[E1102 10:03:40.000000 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
)


def write_case(
    root: Path,
    name: str,
    *,
    job_id: str,
    cluster: str | None = "c1",
    nodes: tuple[str, ...] = ("node-a", "node-b"),
    state: str = "FAILED",
    with_logs: bool = True,
    bad_node: str | None = "node-b",
) -> Path:
    """A two-node failed job: XID 79 on `bad_node`, an NCCL timeout on the other nodes."""
    case = root / name
    (case / "logs").mkdir(parents=True, exist_ok=True)
    context = {
        "job_id": job_id,
        "scheduler": "slurm",
        "state": state,
        "exit_code": 1 if state != "COMPLETED" else 0,
        "start": "2026-11-02T10:00:00Z",
        "end": "2026-11-02T10:15:00Z",
        "nodes": list(nodes),
        "gpu_model": "H100",
    }
    if cluster is not None:
        context["cluster"] = cluster
    if with_logs:
        for node in nodes:
            d = case / "logs" / node
            d.mkdir(parents=True, exist_ok=True)
            if node == bad_node:
                (d / "kern.log").write_text(XID79.format(node=node) + "\n", encoding="utf-8")
            else:
                (d / "app.log").write_text(
                    "2026-11-02T10:03:39.000000+00:00 training step 100\n" + NCCL_TIMEOUT + "\n",
                    encoding="utf-8",
                )
    (case / "context.json").write_text(json.dumps(context), encoding="utf-8")
    return case
