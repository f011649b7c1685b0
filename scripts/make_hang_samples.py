#!/usr/bin/env python3
"""Write the hang samples of issue 18 (samples/hang-*), flight-recorder dumps included.

    python scripts/make_hang_samples.py [--out samples]

Deterministic: the same files every run. The dumps are real-format PyTorch flight-recorder
pickles of plain dicts (version, pg_config, pg_status, entries), as ProcessGroupNCCL writes
them with TORCH_NCCL_TRACE_BUFFER_SIZE>0 and TORCH_NCCL_DUMP_ON_TIMEOUT=1; the log lines follow
the formats PyTorch, torchfrtrace and NCCL RAS print (see the parsers' examples).

Samples:
  hang-watchdog-16node      watchdog lines only (current and older wordings, srun --label and
                            [rankN]: prefixes) on a 16-node job: rank 85 on node-11 is behind
  hang-watchdog-seqnum-only bare `Watchdog caught ... WorkNCCL(SeqNum=N ...)` lines only (no
                            `last enqueued` line): 31 of 32 ranks time out in SeqNum 9120;
                            rank 13 (node-b GPU 5) prints nothing: it never enqueued it
  hang-flight-recorder      dumps/nccl_trace_rank_{0..7}: rank 6 (node-d) never enqueued seq 58
  hang-torchfrtrace         torchfrtrace's report: `missing ranks: {6}` (node-b)
  hang-ncclras              `ncclras` status: process 48211 on node-c GPU 5 dead, rank 21
  hang-collective-mismatch  torchfrtrace: `Culprit rank 5; Error type: COLLECTIVE_TYPE_MISMATCH`
  hang-straggler-xid79      from ambiguous-xid-and-ib: XID 79 on node-b and an IB link down on
                            node-c; the straggler (rank 9, node-b GPU 1) breaks the tie
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUS = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]
HINT = (
    "This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
    "across ranks, the order of collectives is not same for all ranks or the scheduled "
    "collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock "
    "or other reasons such as network errors or bugs in the communications library (e.g. "
    "NCCL), etc."
)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"


def glog(t: datetime) -> str:
    return t.strftime("E%m%d %H:%M:%S.%f") + "000"


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def context(out: Path, job: str, nodes: list[str], start: datetime, end: datetime) -> None:
    ctx = {
        "job_id": job, "scheduler": "slurm", "cluster": "h100-hang", "state": "FAILED",
        "exit_code": 1, "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "end": end.strftime("%Y-%m-%dT%H:%M:%SZ"), "nodes": nodes, "gpu_model": "H100",
    }
    write(out / "context.json", [json.dumps(ctx, indent=2)])


def expected(out: Path, status: str, category: str | None, suspects: list[str], why: str,
             root_kinds: list[str] | None = None) -> None:
    exp = {"failed": True, "status": status, "category": category, "suspect_nodes": suspects,
           "candidate_categories": [], "why": why}
    if root_kinds:
        exp["root_cause_kinds"] = root_kinds
    write(out / "expected.json", [json.dumps(exp, indent=2)])


def init_lines(node: str, ranks: range, world: int, gpus: int, pid0: int) -> list[str]:
    """NCCL's two init lines per rank: the topology line (`comm 0x.. rank N nRanks M nNodes ..
    localRank g`) and `ncclCommInitRank ... cudaDev g busId .. - Init COMPLETE`."""
    out = []
    for r in ranks:
        head = f"{node}:{pid0 + r % gpus}:{pid0 + 140 + r % gpus} [{r % gpus}] NCCL INFO "
        comm = f"0x{0x7f2c4c003b10 + r * 4096:x}"
        out.append(f"{head}comm {comm} rank {r} nRanks {world} nNodes {world // gpus} "
                   f"localRanks {gpus} localRank {r % gpus} MNNVL 0")
        out.append(f"{head}ncclCommInitRank comm {comm} rank {r} nranks {world} "
                   f"cudaDev {r % gpus} nvmlDev {r % gpus} busId {BUS[r % gpus]} commId "
                   "0x5be1c0de77a1f00d localSize 184 used 1344 bytes - Init COMPLETE")
    return out


def timeout_line(r: int, seq: int, t: datetime, ran: int = 600046) -> str:
    return (
        f"[rank{r}]:[{glog(t)} ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        f" Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE,"
        f" NumelIn=52428800, NumelOut=52428800, Timeout(ms)=600000) ran for {ran} milliseconds "
        "before timing out."
    )


# ---- watchdog only, 16 nodes ----------------------------------------------------------------


def watchdog_16node(root: Path) -> None:
    out = root / "hang-watchdog-16node"
    start = datetime(2026, 11, 26, 2, 0, tzinfo=timezone.utc)
    nodes = [f"node-{i:02d}" for i in range(1, 17)]
    context(out, "73210", nodes, start, start + timedelta(minutes=86))
    seq, straggler = 412, 85
    fired = start + timedelta(minutes=74, seconds=7)
    for i, node in enumerate(nodes):
        ranks = range(8 * i, 8 * i + 8)
        t0 = start + timedelta(seconds=12 + i)
        lines = [f"{iso(t0)} INFO [train.py:88] starting train.py on {node} (node_rank={i}, "
                 "nproc_per_node=8, world_size=128)"]
        lines += [f"{iso(t0 + timedelta(seconds=19))} {x}"
                  for x in init_lines(node, ranks, 128, 8, 31000 + 97 * i)]
        lines.append(f"{iso(start + timedelta(minutes=63))} INFO [train.py:301] step 41200 "
                     "loss 1.8317 lr 2.4e-4 tokens/s 812345")
        for r in ranks:
            t = fired + timedelta(milliseconds=37 * (r % 8) + 5 * i)
            if r == straggler:
                lines.append(
                    f"{iso(t)} [rank{r}]:[{glog(t)} ProcessGroupNCCL.cpp:1682] [PG ID 0 PG GUID "
                    f"0(default_pg) Rank {r}] Received a dump signal due to a collective timeout "
                    "from rank 3 and we will try our best to dump the debug info. Last enqueued "
                    f"NCCL work: {seq - 1}, last completed NCCL work: {seq - 1}.{HINT}"
                )
                continue
            if i < 4:
                # older PyTorch under srun --label: task number prefix, `[Rank N]` only
                lines.append(
                    f"{iso(t)} {r:>3}: [Rank {r}] Watchdog caught collective operation timeout: "
                    f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=52428800, NumelOut=52428800,"
                    " Timeout(ms)=600000) ran for 600097 milliseconds before timing out."
                )
                lines.append(
                    f"{iso(t)} {r:>3}: [Rank {r}] Timeout at NCCL work: {seq}, last enqueued NCCL "
                    f"work: {seq}, last completed NCCL work: {seq - 1}."
                )
            else:
                lines.append(f"{iso(t)} {timeout_line(r, seq, t)}")
                lines.append(
                    f"{iso(t)} [rank{r}]:[{glog(t)} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
                    f"0(default_pg) Rank {r}] Exception (either an error or timeout) detected by "
                    f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL"
                    f" work: {seq - 1}."
                )
        t = fired + timedelta(seconds=2)
        lines.append(f"{iso(t)} [rank{8 * i}]:[{glog(t)} ProcessGroupNCCL.cpp:1834] [PG ID 0 PG "
                     f"GUID 0(default_pg) Rank {8 * i}] To avoid data inconsistency, we are "
                     "taking the entire process down.")
        write(out / "logs" / node / "app.log", lines)
    expected(out, "unattributed", None, ["node-11"],
             "A hang: every rank's watchdog fires at SeqNum 412, but rank 85 (node-11, GPU 5) "
             "reports last enqueued work 411: it never reached the all-reduce the other 127 "
             "ranks wait in. No fault line anywhere, so no cause; the lead is node-11 GPU 5.")


def watchdog_seqnum_only(root: Path) -> None:
    out = root / "hang-watchdog-seqnum-only"
    start = datetime(2026, 11, 27, 8, 0, tzinfo=timezone.utc)
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    context(out, "73388", nodes, start, start + timedelta(minutes=52))
    seq, silent = 9120, 13
    fired = start + timedelta(minutes=41, seconds=3)
    for i, node in enumerate(nodes):
        ranks = range(8 * i, 8 * i + 8)
        t0 = start + timedelta(seconds=9 + i)
        lines = [f"{iso(t0 + timedelta(seconds=20))} {x}"
                 for x in init_lines(node, ranks, 32, 8, 52000 + 61 * i)]
        lines.append(f"{iso(start + timedelta(minutes=30))} [rank{8 * i}]:iteration 18200/"
                     "500000 | consumed samples: 4659200 | lm loss: 2.061E+00 |")
        for r in ranks:
            if r == silent:
                continue
            t = fired + timedelta(milliseconds=41 * (r % 8) + 7 * i)
            lines.append(f"{iso(t)} {timeout_line(r, seq, t, ran=600032)}")
        lines.append("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:")
        write(out / "logs" / node / "stderr", lines)
    expected(out, "unattributed", None, ["node-b"],
             "A hang seen only in bare watchdog timeouts (no `last enqueued` line): 31 of the 32 "
             "ranks of the default group time out in SeqNum 9120; rank 13 (node-b, GPU 5 by its "
             "NCCL init line) prints no timeout, so it had no collective pending: it never "
             "enqueued the one the others wait in. No fault line, so no cause; the lead is "
             "node-b GPU 5.")


# ---- flight-recorder dumps ------------------------------------------------------------------


def dump_dict(rank: int, world: int, last_enq: int, last_done: int, t_ns: int,
              mismatch: dict[int, tuple[str, list[list[int]], str]] | None = None) -> dict:
    entries = []
    for i, seq in enumerate(range(last_enq - 7, last_enq + 1)):
        name, sizes, dtype = ("nccl:all_reduce", [[1024, 1024]], "Float")
        if mismatch and seq in mismatch:
            name, sizes, dtype = mismatch[seq]
        entries.append({
            "record_id": seq - 1,
            "pg_id": 0,
            "process_group": ("0", "default_pg"),
            "collective_seq_id": seq,
            "p2p_seq_id": 0,
            "op_id": seq,
            "profiling_name": name,
            "time_created_ns": t_ns - (last_enq - seq) * 950_000_000,
            "input_sizes": sizes,
            "input_dtypes": [dtype],
            "output_sizes": sizes,
            "output_dtypes": [dtype],
            "state": "completed" if seq <= last_done else "started",
            "time_discovered_started_ns": None,
            "time_discovered_completed_ns": None,
            "retired": seq <= last_done,
            "timeout_ms": 600000,
            "is_p2p": False,
            "frames": [{"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py",
                        "line": 2696}, {"name": "train_step", "filename": "train.py", "line": 211}],
        })
        del i
    return {
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {"0": {"last_enqueued_collective": last_enq,
                            "last_started_collective": last_enq,
                            "last_completed_collective": last_done}},
        "entries": entries,
        "nccl_version": "2.21.5",
    }


def flight_recorder(root: Path) -> None:
    out = root / "hang-flight-recorder"
    start = datetime(2026, 11, 27, 8, 0, tzinfo=timezone.utc)
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    context(out, "73311", nodes, start, start + timedelta(minutes=40))
    fired = start + timedelta(minutes=31, seconds=4)
    t_ns = int((fired - timedelta(minutes=10)).timestamp() * 1e9)
    for i, node in enumerate(nodes):
        ranks = range(2 * i, 2 * i + 2)
        t0 = start + timedelta(seconds=9 + i)
        lines = [f"{iso(t0)} INFO [train.py:88] starting train.py on {node} (node_rank={i}, "
                 "nproc_per_node=2, world_size=8)"]
        lines += [f"{iso(t0 + timedelta(seconds=15))} {x}"
                  for x in init_lines(node, ranks, 8, 2, 5100 + 31 * i)]
        for r in ranks:
            if r == 6:
                continue  # hung before it enqueued: its watchdog has nothing to time out
            t = fired + timedelta(milliseconds=41 * r)
            lines.append(f"{iso(t)} {timeout_line(r, 58, t)}")
            lines.append(f"{iso(t)} [rank{r}]:[{glog(t)} ProcessGroupNCCL.cpp:1376] [PG ID 0 PG "
                         f"GUID 0(default_pg) Rank {r}] ProcessGroupNCCL preparing to dump debug "
                         "info. Include stack trace: 1")
        write(out / "logs" / node / "app.log", lines)
    for r in range(8):
        enq, done = (57, 57) if r == 6 else (58, 57)
        data = dump_dict(r, 8, enq, done, t_ns)
        path = out / "dumps" / f"nccl_trace_rank_{r}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    expected(out, "unattributed", None, ["node-d"],
             "A hang read from the flight-recorder dumps: ranks 0-5 and 7 enqueued all_reduce "
             "seq 58 and wait in it; rank 6 (node-d, GPU 0) last enqueued 57 and has no entry "
             "for 58. Nothing else is visible, so the lead is node-d GPU 0.")


# ---- torchfrtrace text ----------------------------------------------------------------------


def torchfrtrace(root: Path, mismatch: bool = False) -> None:
    name = "hang-collective-mismatch" if mismatch else "hang-torchfrtrace"
    out = root / name
    start = datetime(2026, 11, 28, 13, 0, tzinfo=timezone.utc) + timedelta(hours=3 * mismatch)
    nodes = ["node-a", "node-b"]
    context(out, "73614" if mismatch else "73412", nodes, start, start + timedelta(minutes=25))
    fired = start + timedelta(minutes=17, seconds=30)
    for i, node in enumerate(nodes):
        ranks = range(4 * i, 4 * i + 4)
        t0 = start + timedelta(seconds=7 + i)
        lines = [f"{iso(t0)} INFO [train.py:88] starting train.py on {node} (node_rank={i}, "
                 "nproc_per_node=4, world_size=8)"]
        lines += [f"{iso(t0 + timedelta(seconds=11))} {x}"
                  for x in init_lines(node, ranks, 8, 4, 7700 + 13 * i)]
        for r in ranks:
            if r == 6 and not mismatch:
                continue
            t = fired + timedelta(milliseconds=29 * r)
            lines.append(f"{iso(t)} {timeout_line(r, 5 if not mismatch else 12, t)}")
        write(out / "logs" / node / "app.log", lines)
    if mismatch:
        report = [
            "$ torchfrtrace --prefix nccl_trace_rank_ /scratch/job-73614/fr/",
            "Collective 12 at entry 11 errors",
            "group info: 0:default_pg",
            "collective: nccl:all_reduce",
            "input sizes: [[1024]]",
            "output sizes: [[1024]]",
            "world size: 8",
            "expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}",
            "collective state: scheduled",
            "error msg: Culprit rank 5; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective"
            " type: 'nccl:all_reduce' does not match found collective type: 'nccl:all_gather'",
            "collective stack trace:",
            "  all_reduce at /opt/conda/lib/python3.11/site-packages/torch/distributed/"
            "distributed_c10d.py:2696",
            "  train_step at /workspace/train.py:211",
        ]
        expected(out, "attributed", "app.error", ["node-b"],
                 "torchfrtrace on the dumps: at collective 12 rank 5 called all_gather where the "
                 "other ranks called all_reduce (COLLECTIVE_TYPE_MISMATCH). An application fault "
                 "on the culprit rank: rank 5 runs on node-b (NCCL init lines).",
                 ["collective_mismatch"])
    else:
        report = [
            "$ torchfrtrace --prefix nccl_trace_rank_ /scratch/job-73412/fr/",
            "Not all ranks joining collective 5 at entry 4",
            "group info: 0:default_pg",
            "collective: nccl:all_reduce",
            "missing ranks: {6}",
            "input sizes: [[3, 4]]",
            "output sizes: [[3, 4]]",
            "expected ranks: 8",
            "collective state: scheduled",
            "collective stack trace:",
            "  all_reduce at /opt/conda/lib/python3.11/site-packages/torch/distributed/"
            "distributed_c10d.py:2696",
            "  train_step at /workspace/train.py:211",
        ]
        expected(out, "unattributed", None, ["node-b"],
                 "torchfrtrace says rank 6 never joined all_reduce 5 of the default group; rank "
                 "6 runs on node-b GPU 2 (NCCL init lines). No fault line: the lead is node-b.")
    write(out / "logs" / "node-a" / "torchfrtrace.txt", report)


# ---- NCCL RAS -------------------------------------------------------------------------------


def ncclras(root: Path) -> None:
    out = root / "hang-ncclras"
    start = datetime(2026, 11, 29, 1, 0, tzinfo=timezone.utc)
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    context(out, "73513", nodes, start, start + timedelta(minutes=55))
    fired = start + timedelta(minutes=44, seconds=12)
    for i, node in enumerate(nodes):
        ranks = range(8 * i, 8 * i + 8)
        t0 = start + timedelta(seconds=10 + i)
        lines = [f"{iso(t0)} INFO [train.py:88] starting train.py on {node} (node_rank={i}, "
                 "nproc_per_node=8, world_size=32)"]
        lines += [f"{iso(t0 + timedelta(seconds=14))} {x}"
                  for x in init_lines(node, ranks, 32, 8, 9100 + 17 * i)]
        for r in ranks:
            if r == 21:
                continue
            t = fired + timedelta(milliseconds=23 * r)
            lines.append(f"{iso(t)} {timeout_line(r, 9031, t)}")
        write(out / "logs" / node / "app.log", lines)
    report = [
        "$ ncclras",
        "Connecting to 127.0.0.1:28028",
        "NCCL version 2.26.2 compiled with CUDA 12.8",
        "CUDA runtime version 12080, driver version 12080",
        "",
        "Job summary",
        "===========",
        "",
        "  Nodes  Processes         GPUs  Processes     GPUs",
        "(total)   per node  per process    (total)  (total)",
        "      4          8            1         32       32",
        "",
        "Communicators... (0.00s)",
        "=============",
        "",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    #  in group  per comm  per node  per comm  in group",
        "    0         1         4         8        32        32   RUNNING  INCOMPLETE",
        "",
        "Errors",
        "======",
        "",
        "DEAD",
        "  1 job process is considered dead (unreachable via the RAS network)",
        "  Process 48211 on node node-c managing GPU 5",
        "",
        "#0-0 (9e3f0a7c2b1d4e56) INCOMPLETE",
        "  Missing communicator data from 1 rank",
        "  Rank 21 -- GPU 5 managed by process 48211 on node node-c",
        "",
        "Warnings",
        "========",
        "",
    ]
    write(out / "logs" / "node-a" / "ncclras-status.txt", report)
    expected(out, "unattributed", None, ["node-c"],
             "ncclras during the hang: process 48211 on node-c (GPU 5, rank 21) is dead and gave "
             "no communicator data; the other 31 ranks time out at SeqNum 9031. No fault line on "
             "node-c: the lead is node-c GPU 5.")


# ---- a straggler with an XID ----------------------------------------------------------------


def straggler_xid(root: Path) -> None:
    """The ambiguous XID 79 / IB link down case, with the ranks' watchdog progress lines: rank
    9 (node-b GPU 1, the GPU of the XID) is the one behind, which breaks the tie."""
    src = REPO / "samples" / "ambiguous-xid-and-ib"
    out = root / "hang-straggler-xid79"
    shutil.copytree(src / "logs", out / "logs", dirs_exist_ok=True)
    ctx = json.loads((src / "context.json").read_text())
    ctx["job_id"] = "73715"
    write(out / "context.json", [json.dumps(ctx, indent=2)])
    for node in ("node-a", "node-b", "node-c", "node-d"):
        path = out / "logs" / node / "app.log"
        lines = path.read_text().rstrip("\n").split("\n")
        first = {"node-a": 0, "node-b": 8, "node-c": 16, "node-d": 24}[node]
        extra = []
        for r in range(first, first + 8):
            if r == 9:
                extra.append(
                    f"[rank{r}]:[E1107 16:18:20.101310170 ProcessGroupNCCL.cpp:1682] [PG ID 0 PG "
                    f"GUID 0(default_pg) Rank {r}] Received a dump signal due to a collective "
                    "timeout from rank 16 and we will try our best to dump the debug info. Last "
                    f"enqueued NCCL work: 7311, last completed NCCL work: 7311.{HINT}"
                )
            else:
                extra.append(
                    f"[rank{r}]:[E1107 16:18:19.601310170 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG "
                    f"GUID 0(default_pg) Rank {r}] Exception (either an error or timeout) "
                    "detected by watchdog at work: 7312, last enqueued NCCL work: 7312, last "
                    "completed NCCL work: 7311."
                )
        # after the watchdog's own lines, before the torchrun summary
        at = next((i for i, x in enumerate(lines) if "ChildFailedError" in x), len(lines))
        path.write_text("\n".join(lines[:at] + extra + lines[at:]) + "\n", encoding="utf-8")
    expected(out, "attributed", "gpu.lost", ["node-b"],
             "XID 79 on node-b and an IB port down on node-c two seconds apart (the ambiguous "
             "sample); the watchdog progress lines show rank 9, node-b's GPU 1 (the XID's GPU), "
             "last enqueued 7311 while the 31 others wait in 7312: the straggler is on node-b, "
             "which breaks the tie for the XID.", ["xid"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "samples")
    args = ap.parse_args()
    for name in ("hang-watchdog-16node", "hang-watchdog-seqnum-only", "hang-flight-recorder", "hang-torchfrtrace",
                 "hang-collective-mismatch", "hang-ncclras", "hang-straggler-xid79"):
        shutil.rmtree(args.out / name, ignore_errors=True)
    watchdog_16node(args.out)
    watchdog_seqnum_only(args.out)
    flight_recorder(args.out)
    torchfrtrace(args.out)
    torchfrtrace(args.out, mismatch=True)
    ncclras(args.out)
    straggler_xid(args.out)


if __name__ == "__main__":
    main()
