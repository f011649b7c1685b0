"""Shared pieces of the benchmark generators (bench/generate.py, bench/generate_fleet.py):
the job's timeline, per-second log templates with `@TS@` stamps filled in later, the cause
and symptom lines, a case's context.json, a node's kern.log and NCCL_DEBUG=INFO init lines."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 11, 2, 10, 0, 0, tzinfo=timezone.utc)
FAIL_AFTER = timedelta(minutes=40)
KERN_LEAD = timedelta(minutes=10)  # kernel log starts before the job (out of window)
KERN_SHARE = 0.4
TS = b"@TS@"


def syslog_ts(t: datetime) -> bytes:
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S}".encode()


def iso_ts(t: datetime) -> bytes:
    return f"{t:%Y-%m-%d %H:%M:%S}".encode()


def kern_template(host: str, per_second: int, rng: random.Random, noisy: bool) -> bytes:
    chatter = [
        'kernel: [{up}] audit: type=1400 audit({up}:{n}): apparmor="ALLOWED" operation="open" '
        'profile="unconfined" name="/proc/{n}/stat" pid={n} comm="python3"',
        "kernel: [{up}] IPv6: ADDRCONF(NETDEV_CHANGE): veth{n}: link becomes ready",
        "systemd[1]: Started Session {n} of user slurm.",
        "kernel: [{up}] nvidia-peermem: registering peer memory client for {n} pages",
        "kernel: [{up}] mlx5_core 0000:1a:00.0: mlx5_fw_tracer: FW tracer event {n}",
        "CRON[{n}]: (root) CMD (/usr/local/bin/node-health-check --quiet)",
    ]
    noise = [
        "kernel: [{up}] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0",
        "kernel: [{up}] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0",
        "kernel: [{up}] pcieport 0000:00:01.0: AER:   [ 0] RxErr                  (First)",
    ]
    lines = []
    for i in range(per_second):
        pool = noise if noisy and i == per_second // 2 else chatter
        text = rng.choice(pool).format(up=f"{rng.uniform(1e5, 9e5):.6f}", n=rng.randint(1, 99999))
        lines.append(TS + f" {host} {text}\n".encode())
    return b"".join(lines)


def app_template(host: str, per_second: int, rng: random.Random, noisy: bool) -> bytes:
    lines = []
    for i in range(per_second):
        ms = 1000 * i // max(per_second, 1)
        r = rng.random()
        if r < 0.45:
            gpu = rng.randint(0, 7)
            ch = rng.randint(0, 31)
            lines.append(
                f"{host}:{4000 + gpu}:{4100 + gpu} [{gpu}] NCCL INFO Channel {ch:02d}/0 : "
                f"{gpu}[{gpu}] -> {(gpu + 1) % 8}[{(gpu + 1) % 8}] via P2P/CUMEM/read\n".encode()
            )
        elif not (noisy and i == per_second - 1):
            step = rng.randint(1, 10**6)
            lines.append(
                TS
                + f",{ms:03d} INFO train.py:212 step={step} loss={rng.uniform(1, 3):.4f} "
                f"lr=3.0e-04 tokens/s={rng.randint(90000, 120000)} grad_norm="
                f"{rng.uniform(0.1, 2):.3f}\n".encode()
            )
        else:
            lines.append(
                TS
                + f",{ms:03d} WARNING torch/utils/data.py:558 UserWarning: This DataLoader "
                "will create 12 worker processes in total.\n".encode()
            )
    return b"".join(lines)


def cause_kern(host: str, t: datetime) -> bytes:
    ts = syslog_ts(t)
    return (
        ts
        + f" {host} kernel: [612345.548779] NVRM: Xid (PCI:0000:91:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n".encode()
        + ts
        + f" {host} kernel: [612345.548800] NVRM: GPU 0000:91:00.0: GPU has fallen "
        "off the bus.\n".encode()
    )


def symptom_app(host: str, rank: int, t: datetime, bad: str) -> bytes:
    ts = iso_ts(t)
    watchdog = (
        f"[rank{rank}]:[E{t:%m%d} {t:%H:%M:%S}.123456 4001 ProcessGroupNCCL.cpp:632] "
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, "
        "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for "
        "600021 milliseconds before timing out.\n"
    )
    child = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n"
        f"  time      : {t + timedelta(seconds=20):%Y-%m-%d_%H:%M:%S}\n"
        f"  host      : {host}\n  rank      : {rank} (local_rank: 3)\n"
        "  exitcode  : -6 (pid: 24321)\n  error_file: <N/A>\n"
        "  traceback : Signal 6 (SIGABRT) received by PID 24321\n"
        "============================================================\n"
    )
    out = ts + b",001 ERROR train.py:300 collective stalled\n" + watchdog.encode()
    if host == bad:
        warn = f"{host}:4003:4103 [3] NCCL WARN Cuda failure 'unspecified launch failure'\n"
        out += warn.encode()
    out += iso_ts(t + timedelta(seconds=20)) + b",500 ERROR torchrun agent: worker failed\n"
    return out + child.encode()


def write_file(path: Path, make, begin: datetime, seconds: int, fmt, tail: bytes, every: int):
    """Rotate 7 clean per-second templates; every `every` seconds use a noisy one."""
    clean = [make(False) for _ in range(7)]
    noisy = make(True)
    with open(path, "wb", buffering=1 << 20) as fh:
        for s in range(seconds):
            template = noisy if s % every == every - 1 else clean[s % 7]
            fh.write(template.replace(TS, fmt(begin + timedelta(seconds=s))))
        fh.write(tail)


def _context(
    out: Path, job: str, names: list[str], end: datetime, expected: dict, start: datetime = START
) -> None:
    ctx = {
        "job_id": job,
        "scheduler": "slurm",
        "cluster": "bench",
        "state": "FAILED",
        "exit_code": 1,
        "start": start.isoformat().replace("+00:00", "Z"),
        "end": end.isoformat().replace("+00:00", "Z"),
        "nodes": names,
        "gpu_model": "H100",
        "expected": expected,
    }
    (out / "context.json").write_text(json.dumps(ctx, indent=2) + "\n")


def _kern_file(
    path: Path,
    host: str,
    seconds: int,
    per_second: int,
    tail: bytes,
    rng: random.Random,
    begin: datetime = START,
) -> None:
    write_file(
        path,
        lambda n: kern_template(host, per_second, rng, n),
        begin,
        seconds,
        syslog_ts,
        tail,
        120,
    )


def nccl_init_lines(
    host: str, node: int, nodes: int, comms: int, rng: random.Random, channels: int = 4
) -> bytes:
    """NCCL_DEBUG=INFO communicator init of one node's 8 ranks: `comm 0x... rank R nRanks N
    ... - Init COMPLETE` per rank and communicator (TP of 8, DP of `nodes`, the world), with
    `channels` `Channel` lines and `Connected all rings` chatter, untimed as NCCL writes them."""
    out = []
    world = nodes * 8
    for c in range(comms):
        kind = c % 3
        nranks = (8, nodes, world)[kind]
        comm_id = rng.getrandbits(64)
        for lr in range(8):
            rank = (lr, node, node * 8 + lr)[kind]
            pfx = f"{host}:{4000 + lr}:{4100 + lr} [{lr}] NCCL INFO"
            ptr = 0x5581C2A0000 + rng.getrandbits(24)
            if c % 2:
                out.append(
                    f"{pfx} comm 0x{ptr:x} rank {rank} nRanks {nranks} nNodes "
                    f"{max(1, nranks // 8)} localRanks 8 localRank {lr} MNNVL 0 - Init COMPLETE\n"
                )
            else:
                out.append(
                    f"{pfx} ncclCommInitRank comm 0x{ptr:x} rank {rank} nranks {nranks} "
                    f"cudaDev {lr} nvmlDev {lr} busId {lr}b000 commId 0x{comm_id:016x}"
                    " - Init COMPLETE\n"
                )
            for ch in range(channels):
                out.append(
                    f"{pfx} Channel {ch:02d}/0 : {lr}[{lr}] -> {(lr + 1) % 8}[{(lr + 1) % 8}]"
                    " via P2P/CUMEM/read\n"
                )
            out.append(f"{pfx} Connected all rings\n")
            out.append(f"{pfx} Connected all trees\n")
    return "".join(out).encode()
