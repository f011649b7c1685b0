"""A synthetic week of small finished jobs for the fleet path (`make bench-week`, tests).

Writes a scheduler answer, `jobs.jsonl` (one execution context per line, as a `static`
scheduler reads it, each with its `case_dir`), and one tiny case per job:
`cases/<shard>/<job>/{context.json,logs/<node>/{kern.log,app.log}}` (shards of 1,000 jobs,
so `cases/00` is a case tree the per-job path can run). Every category of the catalog occurs, plus
completed, ambiguous and unattributed jobs; node counts follow a realistic mix (mostly
1-8 nodes, a few 16-32). A few repeat offenders are planted:

- PLANTED_GPU:    node gpu-0666's GPU 0000:ab:00 falls off the bus (XID 79) in 5 jobs;
- PLANTED_PORT:   node gpu-0777's port mlx5_3 goes down in 4 jobs;
- PLANTED_SWITCH: one leaf switch drops ibp94s0 on gpu-0900..0903 at once in 3 jobs.

Deterministic for a given seed. Generate into /tmp; never commit the output.

    python bench/week_data.py --out /tmp/attr-week --jobs 10000
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

WEEK_START = datetime(2026, 11, 9, tzinfo=timezone.utc)  # Monday of ISO week 2026-W46
CLUSTER = "atlas"
POOL = 2000  # nodes in the cluster
PCIS = ["0000:1b:00", "0000:43:00", "0000:52:00", "0000:61:00",
        "0000:9d:00", "0000:ab:00", "0000:c3:00", "0000:d1:00"]
PORTS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]

PLANTED_GPU = ("gpu-0666", "0000:ab:00", 5)
PLANTED_PORT = ("gpu-0777", "mlx5_3", 4)
PLANTED_SWITCH = (["gpu-0900", "gpu-0901", "gpu-0902", "gpu-0903"], "ibp94s0", 3)
PLANTED_NODES = {"gpu-0666", "gpu-0777", *PLANTED_SWITCH[0]}

# (kind, weight): what happened to the job. Weights roughly like a real week: most jobs
# complete, app errors and cancellations lead the failures, hardware is a few percent.
MIX = [
    ("completed", 52), ("app.error", 10), ("scheduler.cancelled", 8),
    ("scheduler.time_limit", 6), ("app.gpu_oom", 5), ("gpu.lost", 3), ("network.fabric", 3),
    ("node.host_oom", 2), ("storage", 2), ("gpu.nvlink", 2), ("gpu.memory", 1),
    ("gpu.driver", 1), ("node.down", 2), ("ambiguous", 1), ("unattributed", 2),
]
NODE_COUNTS = [(1, 40), (2, 20), (4, 20), (8, 12), (16, 6), (32, 2)]


@dataclass
class Planned:
    kind: str
    nodes: list[str]
    culprit: str
    pci: str
    port: str


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"


def _kern(t: datetime, host: str, msg: str) -> str:
    return f"{_iso(t)} {host} kernel: [{int(t.timestamp()) % 9_000_000}.{t.microsecond:06d}] {msg}"


def _app(t: datetime, level: str, msg: str) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} {level} train.py:212 {msg}"


def _cause_lines(
    p: Planned, t: datetime, job: str
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(kernel lines by node, app lines by node) for the job's cause at time t."""
    kern: dict[str, list[str]] = {}
    app: dict[str, list[str]] = {}
    c = p.culprit

    def k(node: str, msg: str, dt: float = 0) -> None:
        kern.setdefault(node, []).append(_kern(t + timedelta(seconds=dt), node, msg))

    def a(node: str, line: str) -> None:
        app.setdefault(node, []).append(line)

    xid = "NVRM: Xid (PCI:{pci}): {code}, pid='<unknown>', name=<unknown>, {text}"
    if p.kind == "gpu.lost":
        k(c, xid.format(pci=p.pci, code=79, text="GPU has fallen off the bus."))
    elif p.kind == "gpu.nvlink":
        k(c, xid.format(pci=p.pci, code=74, text="NVLink: fatal error detected on link 5"
                        "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"))
    elif p.kind == "gpu.memory":
        k(c, xid.format(pci=p.pci, code=48, text="An uncorrectable double bit error (DBE) has "
                        "been detected on GPU in the framebuffer at partition 6, subpartition 0."))
    elif p.kind == "gpu.driver":
        k(c, f"NVRM: Xid (PCI:{p.pci}): 119, pid=273299, name=python3, Timeout after 6s of "
             "waiting for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL).")
    elif p.kind == "network.fabric":
        k(c, f"mlx5_core 0000:5e:00.0 {p.port}: Link down")
    elif p.kind == "switch":
        for i, n in enumerate(p.nodes):
            k(n, f"mlx5_core 0000:5e:00.0 {p.port}: Link down", dt=0.2 * i)
    elif p.kind == "node.host_oom":
        k(c, "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=985")
    elif p.kind == "node.down":
        a(p.nodes[0], f"srun: error: Node failure on {c}")
    elif p.kind == "storage":
        a(c, _app(t, "ERROR", "checkpoint save failed"))
        a(c, "OSError: [Errno 28] No space left on device")
    elif p.kind == "app.gpu_oom":
        a(c, "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. "
             "GPU 1 has a total capacity of 79.10 GiB of which 2.12 GiB is free.")
    elif p.kind == "app.error":
        a(c, "[rank0]: Traceback (most recent call last):")
        a(c, '[rank0]:   File "/workspace/train.py", line 618, in <module>')
        a(c, "[rank0]: KeyError: 'input_ids'")
    elif p.kind == "scheduler.time_limit":
        a(p.nodes[0], f"slurmstepd: error: *** STEP {job}.0 ON {p.nodes[0]} CANCELLED AT "
                      f"{t:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***")
    elif p.kind == "scheduler.cancelled":
        a(p.nodes[0], f"slurmstepd: error: *** STEP {job}.0 ON {p.nodes[0]} CANCELLED AT "
                      f"{t:%Y-%m-%dT%H:%M:%S} ***")
    elif p.kind == "ambiguous":
        other = next((n for n in p.nodes if n != c), c)
        k(c, xid.format(pci=p.pci, code=79, text="GPU has fallen off the bus."))
        k(other, "mlx5_core 0000:5e:00.0 mlx5_2: Link down")
    return kern, app


STATE = {
    "completed": ("COMPLETED", 0), "scheduler.time_limit": ("TIMEOUT", 0),
    "scheduler.cancelled": ("CANCELLED", 0), "node.down": ("NODE_FAIL", 1),
}


def generate(out: Path, jobs: int = 10_000, seed: int = 46, week_start: datetime = WEEK_START,
             cluster: str = CLUSTER, first_id: int | None = None) -> Path:
    """Write `out/jobs.jsonl` and `out/cases/`; return the JSONL path."""
    rng = random.Random(seed)
    # job ids differ between weeks, so several generated weeks share one warehouse
    first = first_id if first_id is not None else 7_000_000 + 100_000 * (
        (week_start - WEEK_START).days // 7)
    out.mkdir(parents=True, exist_ok=True)
    cases = out / "cases"
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    counts = [n for n, _ in NODE_COUNTS]
    cweights = [w for _, w in NODE_COUNTS]
    pool = [f"gpu-{i:04d}" for i in range(1, POOL + 1) if f"gpu-{i:04d}" not in PLANTED_NODES]
    planted: list[Planned] = []
    node, pci, _ = PLANTED_GPU
    planted += [Planned("gpu.lost", [], node, pci, "") for _ in range(PLANTED_GPU[2])]
    node, port, _ = PLANTED_PORT
    planted += [Planned("network.fabric", [], node, "", port) for _ in range(PLANTED_PORT[2])]
    sw_nodes, sw_port, n_sw = PLANTED_SWITCH
    planted += [Planned("switch", list(sw_nodes), sw_nodes[0], "", sw_port) for _ in range(n_sw)]
    plant_at = dict(zip(rng.sample(range(jobs), len(planted)), planted, strict=True))
    path = out / "jobs.jsonl"
    week = timedelta(days=7)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(jobs):
            job = str(first + i)
            p = plant_at.get(i)
            if p is None:
                kind = rng.choices(kinds, weights)[0]
                n = rng.choices(counts, cweights)[0]
                if kind == "ambiguous" and n == 1:
                    n = 2
                nodes = sorted(rng.sample(pool, n))
                p = Planned(kind, nodes, rng.choice(nodes), rng.choice(PCIS), rng.choice(PORTS))
            elif not p.nodes:
                extra = rng.choices(counts[:4], cweights[:4])[0] - 1
                p.nodes = sorted([p.culprit, *rng.sample(pool, extra)])
            duration = timedelta(seconds=rng.randint(300, 6 * 3600))
            end = week_start + timedelta(seconds=rng.uniform(60, week.total_seconds() - 60))
            start = end - duration
            fail_at = end - timedelta(seconds=rng.randint(20, 90))
            state, exit_code = STATE.get(p.kind, ("FAILED", 1))
            kern, app = ({}, {}) if p.kind == "completed" else _cause_lines(p, fail_at, job)
            case = cases / f"{i // 1000:02d}" / job  # shards of 1,000: cases/00 feeds run
            for nd in p.nodes:
                d = case / "logs" / nd
                d.mkdir(parents=True, exist_ok=True)
                t0 = start + timedelta(seconds=5)
                klines = [_kern(t0, nd, "nvidia-peermem: registering peer memory client"),
                          *kern.get(nd, [])]
                (d / "kern.log").write_text("\n".join(klines) + "\n", encoding="utf-8")
                alines = [_app(t0, "INFO", f"step=1 loss=2.31 host={nd}"),
                          _app(fail_at - timedelta(seconds=30), "INFO", "step=900 loss=1.87"),
                          *app.get(nd, [])]
                (d / "app.log").write_text("\n".join(alines) + "\n", encoding="utf-8")
            ctx = {
                "job_id": job, "scheduler": "slurm", "cluster": cluster, "state": state,
                "exit_code": exit_code,
                "start": start.isoformat().replace("+00:00", "Z"),
                "end": end.isoformat().replace("+00:00", "Z"),
                "nodes": p.nodes, "gpu_model": "H100", "gpus_per_node": 8,
                "case_dir": str(case), "job_name": p.kind,
            }
            fh.write(json.dumps(ctx) + "\n")
            own = {k: v for k, v in ctx.items() if k != "case_dir"}
            (case / "context.json").write_text(json.dumps(own), encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/attr-week"))
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=46)
    args = ap.parse_args()
    print(generate(args.out, args.jobs, args.seed))


if __name__ == "__main__":
    main()
