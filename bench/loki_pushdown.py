"""What pushing the anchors down into LogQL saves: queries and bytes for one large job.

A 64-node job (default) whose nodes each logged 200k lines in the job's hour, almost all
noise, plus a few candidate lines per node. The fake Loki of the tests (tests/fake_loki.py,
over real local HTTP) evaluates the selector, the `|~` filter, start/end/limit/direction
itself, so both runs page exactly as against a real Loki with max_entries_limit_per_query
= 5000:

- pushdown: the connector as configured by default (one `{host=~...} |~ "<anchors>"` query);
- unfiltered: `pushdown: false`, the same selector without the line filter, every line
  transferred and filtered in the client.

Both runs must return the same records (checked). Lines are generated on demand, never
stored, so the job fits in memory.

Where logs and training progress stop (liveness, for the engine's silence and progress
tests): every node also logs a Megatron iteration line every `--progress-seconds`, and
`--silent-nodes` nodes stop logging altogether at minute 40. The pushdown run above is
"before" (`liveness: false`, candidate lines only); two more pushdown runs:

- liveness: the default, + two `count_over_time` metric queries and the backward reads of
  the last progress lines (checked: every node's tail and last progress line found, the
  silent nodes' at minute 40);
- progress-filter: the alternative, the progress anchors added to the pushed-down `|~`
  filter (every progress line transferred).

    python bench/loki_pushdown.py [--nodes 64] [--lines-per-node 200000]
        [--candidates-per-node 5] [--progress-seconds 10] [--silent-nodes 1]
        [--skip-unfiltered] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fakes"))

from fake_http import start_fake_http  # noqa: E402
from fake_loki import FakeLoki  # noqa: E402

from attribution_dagster.connectors.loki.client import LokiClient, LokiConfig  # noqa: E402
from attribution_dagster.connectors.loki.query import to_ns  # noqa: E402
from attribution_dagster.core.context import ExecutionContext  # noqa: E402
from attribution_dagster.core.settings import Window  # noqa: E402
from attribution_dagster.pipeline import catalog  # noqa: E402

START = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
HOUR = 3600 * 1_000_000_000
SILENT_AT = 40 / 60  # silent nodes stop logging at minute 40

NOISE = [
    "{sys} {node} systemd[1]: Started Session {n} of user root.",
    "{sys} {node} kernel: [UFW BLOCK] IN=eth0 OUT= SRC=10.0.{a}.{b} DST=10.0.0.2 LEN=60 "
    "PROTO=TCP SPT={n} DPT=22",
    "{node}:{n}:{a} [{b}] NCCL INFO Channel {b:02d}/0 : {b}[{b}] -> {a}[{a}] via P2P/IPC",
    "2026-11-02 10:{m:02d}:{s:02d},123 INFO train.py: step {n} loss 2.{a}{b} lr 3e-4 "
    "grad_norm 1.{b} tokens/s 41{a}{b}",
    "{sys} {node} chronyd[812]: Selected source 10.0.{a}.{b}",
    "{sys} {node} dcgm-exporter[2211]: collected {a}{b} metrics in {b}ms",
    # not `launch task ...`: that is an anchor now (the Slurm step launch, a clock anchor)
    "{sys} {node} slurmd[1433]: debug:  _rpc_acct_gather_update: sent {n} bytes",
    # without `; OOB <if>`: that is an anchor now (node_address, the job's own NCCL lines)
    "{node}:{n}:{a} [{b}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB",
]
CANDIDATES = [
    "{sys} {node} kernel: NVRM: Xid (PCI:0000:91:00): 79, pid={n}, name=python, "
    "GPU has fallen off the bus.",
    "{node}:{n}:{a} [{b}] NCCL WARN NET/IB : Got completion from peer 10.0.{a}.{b}<{n}> "
    "with status=12 opcode=0 len=0 vendor err 129 (Recv)",
    "[rank{b}]:[E1102 10:{m:02d}:{s:02d}.123456 ProcessGroupNCCL.cpp:632] [Rank {b}] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE) "
    "ran for 600000 milliseconds before timing out.",
    "{sys} {node} kernel: mlx5_core 0000:0c:00.0: Port module event[error]: module 0, "
    "Cable error, Power budget exceeded",
    "{sys} {node} kernel: Out of memory: Killed process {n} (python) total-vm:1234kB",
]


PROGRESS = (
    " [2026-11-02 10:{m:02d}:{s:02d}] iteration {it:>8}/  500000 | consumed samples: "
    "{smp:>12} | elapsed time per iteration (ms): 1843.2 | learning rate: 2.999E-04 | global "
    "batch size:  1024 | lm loss: 2.894400E+00 |"
)


class SynthStream:
    """One node's syslog stream: line i at START + i*step (+ node offset ns), generated on
    demand; `candidates` evenly spread lines hold an anchor, a Megatron iteration line every
    `progress_every` lines (0: none), the rest is noise. `stop` < 1 ends the stream early
    (a node that went silent at that fraction of the hour)."""

    def __init__(
        self,
        node: str,
        index: int,
        lines: int,
        candidates: int,
        progress_every: int = 0,
        stop: float = 1.0,
    ) -> None:
        self.labels = {"host": node, "filename": "/var/log/syslog", "job": "syslog"}
        self.node = node
        self.step = HOUR // lines
        self.n = int(lines * stop)
        self.offset = index  # distinct ns per node: a deterministic global order
        every = max(1, lines // max(1, candidates))
        self.candidate_at = {
            every // 2 + k * every: k for k in range(candidates) if every // 2 + k * every < self.n
        }
        self.progress_every = progress_every

    def ts(self, i: int) -> int:
        return to_ns(START) + i * self.step + self.offset

    def bounds(self, start: int, end: int) -> tuple[int, int]:
        def first_at_or_after(t: int) -> int:
            k = -(-(t - to_ns(START) - self.offset) // self.step)
            return min(self.n, max(0, k))

        return first_at_or_after(start), first_at_or_after(end)

    def line(self, i: int) -> str:
        secs = i * self.step // 1_000_000_000
        m, s = secs // 60 % 60, secs % 60
        fields = {
            "sys": f"Nov  2 10:{m:02d}:{s:02d}",
            "node": self.node,
            "n": 1000 + i % 9000,
            "a": i % 7,
            "b": i % 8,
            "m": m,
            "s": s,
        }
        k = self.candidate_at.get(i)
        if k is not None:
            return CANDIDATES[k % len(CANDIDATES)].format(**fields)
        if self.progress_every and i % self.progress_every == self.progress_every - 1:
            it = i // self.progress_every
            return PROGRESS.format(m=m, s=s, it=it, smp=it * 1024)
        return NOISE[i % len(NOISE)].format(**fields)

    def lines(self, lo: int, hi: int) -> list[str]:
        return [self.line(i) for i in range(lo, hi)]


def run(
    nodes: int,
    per_node: int,
    candidates: int,
    pushdown: bool,
    mode: str = "",
    progress_every: int = 0,
    silent: int = 0,
) -> dict:
    """One fetch. `mode`: liveness, progress-filter (progress anchors pushed down as ordinary
    anchors, liveness off); "" is the original pushdown / unfiltered comparison (liveness
    off: what the connector did before the liveness queries)."""
    names = [f"gpu-node-{i:03d}" for i in range(nodes)]
    loki = FakeLoki(max_entries=5000)
    loki.streams = [
        SynthStream(n, i, per_node, candidates, progress_every, SILENT_AT if i < silent else 1.0)
        for i, n in enumerate(names)
    ]
    anchors = catalog().anchors(last_only=mode == "liveness")
    if mode == "progress-filter":
        anchors = [a.model_copy(update={"last_only": False}) for a in catalog().anchors(True)]
    fake = start_fake_http()
    try:
        loki.install(fake)
        ctx = ExecutionContext(
            job_id="bench",
            scheduler="slurm",
            state="FAILED",
            start=START,
            end=START + timedelta(hours=1),
            nodes=names,
        )
        window = Window(start=ctx.start, end=ctx.end)
        cfg = LokiConfig(
            url=fake.url,
            pushdown=pushdown,
            max_context_queries=0,
            timeout_seconds=1800,
            liveness=mode == "liveness",
        )
        t0 = time.perf_counter()
        batch = LokiClient(cfg).fetch_logs(ctx, anchors, window)
        records, cov = batch.pair()
        seconds = time.perf_counter() - t0
    finally:
        fake.server.shutdown()
        fake.server.server_close()
    tails: dict[str, datetime] = {}
    for t in batch.tails:
        end = t.time_latest or t.time  # an exact tail: a silent node's last line, read exactly
        tails[t.node] = max(tails.get(t.node, end), end)  # type: ignore[type-var,arg-type]
    last_progress: dict[str, datetime] = {}
    for r in batch.progress:
        last_progress[r.node] = max(last_progress.get(r.node, r.time), r.time)  # type: ignore[type-var,arg-type]
    return {
        "mode": mode or ("pushdown" if pushdown else "unfiltered"),
        "tails": len(tails),
        "silent_tails": sorted(n for n, t in tails.items() if t <= START + timedelta(minutes=41)),
        "last_progress": len(last_progress),
        "progress_records": sum(1 for r in records if "iteration" in r.text),
        "queries": cov.queries,
        "query_range_requests": len(loki.queries),
        "bytes_received": cov.bytes,
        "lines_received": cov.lines,
        "records": cov.records,
        "status": cov.status,
        "seconds": round(seconds, 1),
        "_records": sorted((r.node, r.locator.render(), r.text) for r in records),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--lines-per-node", type=int, default=200_000)
    ap.add_argument("--candidates-per-node", type=int, default=5)
    ap.add_argument("--progress-seconds", type=float, default=10.0)
    ap.add_argument("--silent-nodes", type=int, default=1)
    ap.add_argument("--skip-unfiltered", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    progress_every = (
        max(1, int(args.lines_per_node * args.progress_seconds / 3600))
        if args.progress_seconds > 0
        else 0
    )
    anchors = [a.literal for a in catalog().anchors()]
    rx = re.compile("|".join(map(re.escape, anchors)))
    probe = SynthStream("gpu-node-000", 0, len(NOISE) * 10, 0)
    bad = [ln for ln in probe.lines(0, len(NOISE) * 10) if rx.search(ln)]
    assert not bad, f"a noise line holds an anchor: {bad[0]}"
    rows = []
    plan = [(True, "")] + ([] if args.skip_unfiltered else [(False, "")])
    plan += [(True, "liveness"), (True, "progress-filter")]
    for pushdown, mode in plan:
        row = run(
            args.nodes,
            args.lines_per_node,
            args.candidates_per_node,
            pushdown,
            mode,
            progress_every,
            args.silent_nodes,
        )
        rows.append(row)
        print(
            f"{row['mode']:>15}: {row['queries']} requests ({row['query_range_requests']} "
            f"query_range), {row['bytes_received'] / 1e6:.3f} MB received, "
            f"{row['lines_received']} lines, {row['records']} records, "
            f"tails of {row['tails']} nodes (silent: {len(row['silent_tails'])}), last progress "
            f"of {row['last_progress']} nodes, status {row['status']}, {row['seconds']} s",
            flush=True,
        )
    by = {r["mode"]: r for r in rows}
    records = {m: r.pop("_records") for m, r in by.items()}
    same = all(records[m] == records["pushdown"] for m in records if m != "progress-filter")
    expected = sum(
        len(SynthStream("x", 0, args.lines_per_node, args.candidates_per_node, 0, s).candidate_at)
        for s in [SILENT_AT] * min(args.silent_nodes, args.nodes)
        + [1.0] * max(0, args.nodes - args.silent_nodes)
    )
    live = by["liveness"]
    live_ok = (
        live["tails"] == args.nodes
        and live["last_progress"] == (args.nodes if progress_every else 0)
        and len(live["silent_tails"]) == min(args.silent_nodes, args.nodes)
    )
    print(
        f"job: {args.nodes} nodes x {args.lines_per_node} lines, {expected} candidate lines, "
        f"a progress line every {progress_every} lines, {args.silent_nodes} node(s) silent from "
        f"minute {SILENT_AT * 60:.0f}; same records every way: {same}; liveness found every "
        f"tail and last progress line: {live_ok}"
    )
    if "unfiltered" in by:
        print(
            "bytes ratio unfiltered/pushdown: "
            f"{by['unfiltered']['bytes_received'] / max(1, by['pushdown']['bytes_received']):.0f}x"
        )
    print(
        "liveness cost: "
        f"+{live['queries'] - by['pushdown']['queries']} requests, "
        f"+{(live['bytes_received'] - by['pushdown']['bytes_received']) / 1e3:.0f} KB; "
        "progress in the line filter instead: "
        f"+{by['progress-filter']['queries'] - by['pushdown']['queries']} requests, "
        f"+{(by['progress-filter']['bytes_received'] - by['pushdown']['bytes_received']) / 1e6:.1f}"
        " MB"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": None}, "runs": rows}, indent=2, default=str)
        )
    return 0 if same and live_ok and by["pushdown"]["records"] == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
