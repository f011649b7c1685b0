"""Generate a large synthetic job case for the benchmark (spec section 1 layout).

64 nodes x 200,000 lines by default (~1.4 GB). Each node gets `kern.log` (RFC 3164 syslog
kernel chatter with some correctable ECC / AER noise) and `app.log` (python-logging ISO
lines with training progress, untimed NCCL INFO chatter, occasional warnings). One real
cause: XID 79 (GPU fallen off the bus) on one node's GPU 3 at minute 40, then NCCL watchdog
collective timeouts on every node and a torchrun ChildFailedError; Slurm state FAILED.

Speed: per-second templates are pre-built once and only the timestamp is substituted
(`bytes.replace`), so writing is I/O bound (seconds, not minutes).

    python bench/generate.py --out /tmp/attr-bench/case --nodes 64 --lines 200000
"""

from __future__ import annotations

import argparse
import json
import random
import time
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


def generate(out: Path, nodes: int, lines: int, bad_index: int = 17, seed: int = 7) -> Path:
    rng = random.Random(seed)
    fail_at = START + FAIL_AFTER
    end = fail_at + timedelta(seconds=150)
    names = [f"node-{i:03d}" for i in range(nodes)]
    bad = names[min(bad_index, nodes - 1)]
    kern_secs = int((FAIL_AFTER + KERN_LEAD).total_seconds())
    app_secs = int(FAIL_AFTER.total_seconds())
    kern_ps = max(1, round(lines * KERN_SHARE / kern_secs))
    app_ps = max(1, round(lines * (1 - KERN_SHARE) / app_secs))
    for i, host in enumerate(names):
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        kern_tail = cause_kern(host, fail_at) if host == bad else b""
        write_file(
            d / "kern.log",
            lambda n, host=host: kern_template(host, kern_ps, rng, n),
            START - KERN_LEAD,
            kern_secs,
            syslog_ts,
            kern_tail,
            120,
        )
        app_tail = symptom_app(host, i * 8 + 3, fail_at + timedelta(seconds=30 + i % 5), bad)
        write_file(
            d / "app.log",
            lambda n, host=host: app_template(host, app_ps, rng, n),
            START,
            app_secs,
            iso_ts,
            app_tail,
            300,
        )
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    ms = int(fail_at.timestamp() * 1000)
    prom = [
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
    ]
    for host in names:
        for gpu in range(8):
            value = 79 if (host == bad and gpu == 3) else 0
            series = f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{host}",gpu="{gpu}"}}'
            prom.append(f"{series} {value} {ms + 1000}")
    (out / "metrics" / "dcgm.prom").write_text("\n".join(prom) + "\n")
    ctx = {
        "job_id": f"bench-{nodes}x{lines}",
        "scheduler": "slurm",
        "cluster": "bench",
        "state": "FAILED",
        "exit_code": 1,
        "start": START.isoformat().replace("+00:00", "Z"),
        "end": end.isoformat().replace("+00:00", "Z"),
        "nodes": names,
        "gpu_model": "H100",
        "expected": {"category": "gpu.lost", "node": bad},
    }
    (out / "context.json").write_text(json.dumps(ctx, indent=2) + "\n")
    return out


# --- profiles shaped like real logs at scale (issue 16) ----------------------------------------
# Each writes a case with `context.json: expected` (the right answer) and returns its path.
# `scale` multiplies the default size (1.0: what `make bench` runs); sizes stay configurable.


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


def gen_nccl_init(out: Path, scale: float = 1.0, seed: int = 11) -> Path:
    """64 nodes; each app.log opens with `comms` communicators x 8 ranks of NCCL INFO init
    (about 2,000 `Init COMPLETE` and 12,000 chatter lines per node at scale 1), then training
    and the usual chatter; the cause: XID 79 on node-017."""
    return _nccl_init_case(out, scale, 250, 4, 20, seed, "nccl-init")


def gen_nccl_init_1g4(out: Path, scale: float = 1.0, seed: int = 16) -> Path:
    """The issue's real job: 64 nodes, 1.4 GB with NCCL_DEBUG=INFO (22 MB per node at scale 1).
    Each app.log opens with 875 communicators x 8 ranks of init: 7,000 `Init COMPLETE` lines
    per node (the issue's 8-node cut: 57,071 of 57,442 observations), each rank's 16 `Channel`
    and 2 `Connected all` lines per communicator, then training at 50 lines a second; the
    cause: XID 79 on node-017."""
    return _nccl_init_case(out, scale, 875, 16, 50, seed, "nccl-init-1g4")


def _nccl_init_case(
    out: Path, scale: float, comms_1: int, channels: int, app_ps: int, seed: int, job: str
) -> Path:
    rng = random.Random(seed)
    nodes = max(2, int(64 * min(scale, 1.0))) if scale < 1 else 64
    comms = int(comms_1 * scale)
    names = [f"node-{i:03d}" for i in range(nodes)]
    bad = names[min(17, nodes - 1)]
    fail_at = START + FAIL_AFTER
    app_secs = int(FAIL_AFTER.total_seconds())
    for i, host in enumerate(names):
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        _kern_file(
            d / "kern.log", host, 600, 4, cause_kern(host, fail_at) if host == bad else b"", rng
        )
        with open(d / "app.log", "wb") as fh:
            fh.write(iso_ts(START) + b",000 INFO train.py:80 initializing process groups\n")
            fh.write(nccl_init_lines(host, i, nodes, comms, rng, channels))
        tail = symptom_app(host, i * 8 + 3, fail_at + timedelta(seconds=30 + i % 5), bad)
        with open(d / "app.log", "ab") as fh:
            body = app_template(host, app_ps, rng, False)
            for s in range(60, app_secs):
                fh.write(body.replace(TS, iso_ts(START + timedelta(seconds=s))))
            fh.write(tail)
    _context(
        out,
        f"{job}-{nodes}",
        names,
        fail_at + timedelta(seconds=150),
        {"category": "gpu.lost", "node": bad},
    )
    return out


def gen_xid_storm(out: Path, scale: float = 1.0, seed: int = 12) -> Path:
    """8 nodes; node-005's kern.log holds 800,000 lines (at scale 1) of one XID 95
    (uncontained ECC, as in the NVSentinel report), then every rank times out."""
    rng = random.Random(seed)
    nodes, storm = 8, int(800_000 * scale)
    names = [f"node-{i:03d}" for i in range(nodes)]
    bad = names[5]
    fail_at = START + FAIL_AFTER
    storm_at = fail_at - timedelta(minutes=5)
    for i, host in enumerate(names):
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        tail = b""
        if host == bad:
            per_sec = max(1, storm // 300)
            lines = []
            for k in range(storm):
                t = storm_at + timedelta(seconds=k // per_sec)
                up = 612000 + k / per_sec
                lines.append(
                    syslog_ts(t)
                    + f" {host} kernel: [{up:.6f}] NVRM: Xid (PCI:0000:91:00): "
                    "95, pid=7062, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No\n".encode()
                )
            tail = b"".join(lines)
        _kern_file(d / "kern.log", host, 2400, 8, tail, rng)
        app_secs = int(FAIL_AFTER.total_seconds())
        write_file(
            d / "app.log",
            lambda n, host=host: app_template(host, 8, rng, n),
            START,
            app_secs,
            iso_ts,
            symptom_app(host, i * 8 + 3, fail_at + timedelta(seconds=30), ""),
            300,
        )
    _context(
        out,
        "xid-storm",
        names,
        fail_at + timedelta(seconds=150),
        {"category": "gpu.memory", "node": bad},
    )
    return out


def gen_watchdog(out: Path, scale: float = 1.0, seed: int = 13) -> Path:
    """8,192 ranks (1,024 nodes x 8) each logging its watchdog collective timeout, teardown
    and ChildFailedError; the cause: XID 79 on node-0517. 2,048 small files."""
    rng = random.Random(seed)
    nodes = max(2, int(1024 * scale))
    names = [f"node-{i:04d}" for i in range(nodes)]
    bad = names[min(517, nodes - 1)]
    fail_at = START + FAIL_AFTER
    for i, host in enumerate(names):
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        _kern_file(
            d / "kern.log",
            host,
            300,
            2,
            cause_kern(host, fail_at) if host == bad else b"",
            rng,
            begin=fail_at - timedelta(seconds=290),
        )
        parts = []
        body = app_template(host, 4, rng, False)
        for s in range(240):
            parts.append(body.replace(TS, iso_ts(fail_at - timedelta(seconds=240 - s))))
        for lr in range(8):
            parts.append(symptom_app(host, i * 8 + lr, fail_at + timedelta(seconds=30 + lr), bad))
        (d / "app.log").write_bytes(b"".join(parts))
    _context(
        out,
        f"watchdog-{nodes * 8}",
        names,
        fail_at + timedelta(seconds=150),
        {"category": "gpu.lost", "node": bad},
    )
    return out


def gen_week(out: Path, scale: float = 1.0, seed: int = 14) -> Path:
    """A week of step logging, one line per second per rank (2 nodes x 4 ranks at scale 1,
    4.8 M lines); the cause at the end: XID 79 on node-001."""
    rng = random.Random(seed)
    nodes, ranks = 2, max(1, int(4 * scale))
    days = 7
    start = START - timedelta(days=days)
    names = [f"node-{i:03d}" for i in range(nodes)]
    bad = names[1]
    fail_at = START
    secs = days * 86400
    for i, host in enumerate(names):
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        _kern_file(
            d / "kern.log",
            host,
            600,
            2,
            cause_kern(host, fail_at) if host == bad else b"",
            rng,
            begin=fail_at - timedelta(seconds=600),
        )
        with open(d / "app.log", "wb", buffering=1 << 20) as fh:
            tmpl = b"".join(
                b"@TS@,%03d INFO train.py:212 [rank%d] step=@STEP@ loss=2.31%02d lr=3.0e-04 "
                b"tokens/s=10%04d grad_norm=0.8%02d\n"
                % (r * 7, i * ranks + r, r, rng.randint(0, 9999), r)
                for r in range(ranks)
            )
            for s in range(secs):
                fh.write(
                    tmpl.replace(TS, iso_ts(start + timedelta(seconds=s))).replace(
                        b"@STEP@", b"%d" % s
                    )
                )
            fh.write(symptom_app(host, i * ranks, fail_at + timedelta(seconds=30), bad))
    _context(
        out,
        "week",
        names,
        fail_at + timedelta(seconds=150),
        {"category": "gpu.lost", "node": bad},
        start=start,
    )
    return out


def gen_long_lines(out: Path, scale: float = 1.0, seed: int = 15) -> Path:
    """Today's shape on 8 nodes, plus single lines of several MB in every app.log (a config
    dump, a tensor print): 6 lines of 4 MB per node at scale 1."""
    generate(out, 8, int(200_000 * scale), bad_index=3, seed=seed)
    for d in sorted((out / "logs").iterdir()):
        app = d / "app.log"
        data = app.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 1
        blob = []
        for k in range(6):
            n = int(4 * 1024 * 1024 * max(scale, 0.25))
            body = ("x" * 61 + "Xid error fail\t") * (n // 76)
            blob.append(f"2026-11-02 10:20:{k:02d},000 INFO config dump: {body}\n".encode())
        app.write_bytes(data[:cut] + b"".join(blob) + data[cut:])
    return out


def gen_today(out: Path, scale: float = 1.0, seed: int = 7) -> Path:
    """The original profile: 64 nodes x 200,000 lines (1.4 GB at scale 1)."""
    return generate(out, 64, int(200_000 * scale), seed=seed)


HOST = b"@HOST@"


def fleet_app_template(per_second: int, rng: random.Random, noisy: bool) -> bytes:
    """One second of a node's app.log (8 local ranks under torchrun) for any host: step lines
    of every local rank, NCCL INFO chatter of lazily created communicators (NET/IB channels,
    proxy threads), a warning in the noisy second. `@HOST@` and `@TS@` are filled in later."""
    host = HOST.decode()
    lines = []
    for i in range(per_second):
        ms = 1000 * i // max(per_second, 1)
        lr = i % 8
        r = rng.random()
        if noisy and i == per_second - 1:
            lines.append(
                TS
                + f",{ms:03d} WARNING [default{lr}] torch/distributed/c10d_logger.py:83 "
                "ProcessGroupNCCL: no NCCL_ASYNC_ERROR_HANDLING set, using default\n".encode()
            )
        elif r < 0.22:
            ch, peer = rng.randint(0, 31), rng.randint(0, 8191)
            text = (
                f"{host}:{4000 + lr}:{4200 + lr} [{lr}] NCCL INFO Channel {ch:02d}/1 : "
                f"{peer}[{lr}] -> {(peer + 8) % 8192}[{lr}] [send] via NET/IB/{lr}/GDRDMA\n"
            )
            lines.append(text.encode())
        elif r < 0.25:
            lines.append(
                f"{host}:{4000 + lr}:{4300 + lr} [{lr}] NCCL INFO [Proxy Service] Device {lr} "
                f"CPU core {rng.randint(0, 111)}\n".encode()
            )
        elif r < 0.27:
            lines.append(
                TS
                + f",{ms:03d} INFO [default{lr}] checkpoint.py:141 async save queued "
                f"shard={rng.randint(0, 8191)} bytes={rng.randint(10**8, 10**9)}\n".encode()
            )
        else:
            lines.append(
                TS
                + f",{ms:03d} INFO [default{lr}] train.py:212 step={rng.randint(1, 10**6)} "
                f"loss={rng.uniform(1, 3):.4f} lr=3.0e-04 tokens/s={rng.randint(90000, 120000)} "
                f"grad_norm={rng.uniform(0.1, 2):.3f} mfu={rng.uniform(0.35, 0.45):.3f}\n".encode()
            )
    return b"".join(lines)


def _timeline(make, begin: datetime, seconds: int, fmt, every: int) -> bytes:
    """`seconds` seconds of per-second templates (7 clean ones rotated, a noisy one every
    `every`), stamps filled in: one host-neutral body, rendered once."""
    clean = [make(False) for _ in range(7)]
    noisy = make(True)
    return b"".join(
        (noisy if s % every == every - 1 else clean[s % 7]).replace(
            TS, fmt(begin + timedelta(seconds=s))
        )
        for s in range(seconds)
    )


def gen_fleet(out: Path, scale: float = 1.0, seed: int = 17) -> Path:
    """A 1,024-node job of about 10 GB (10 MB per node at scale 1; `scale` < 1 also shrinks
    the node count, down to 8). Each node: app.log (its 8 ranks' NCCL_DEBUG=INFO init of 6
    communicators, 48 `Init COMPLETE` lines; 40 minutes of step lines and NCCL INFO chatter at
    24 lines a second; then, ten minutes after the hang, every rank's watchdog timeout,
    teardown and ChildFailedError) and kern.log (syslog chatter at 8 lines a second, an hour).
    The cause: node-0613's IB port goes down (mlx5 `Link down` in its kern.log, NCCL's
    `NET/IB : mlx5_3:1 Got async event : port error` in its app.log) and the job hangs.

    Fast: each file's body is rendered once per variant with `@HOST@` for the host name and
    written per node with one `bytes.replace`; only the init and the ending are per node."""
    rng = random.Random(seed)
    nodes = max(8, round(1024 * scale)) if scale < 1 else 1024
    per_node = scale * 1024 / nodes  # the total stays scale x 10 GB
    names = [f"node-{i:04d}" for i in range(nodes)]
    bad = names[min(613, nodes - 1)]
    fail_at = START + FAIL_AFTER
    hang = timedelta(seconds=600)
    kern_pre = int((FAIL_AFTER + KERN_LEAD).total_seconds())
    kern_post = int(hang.total_seconds()) + 60
    app_secs = int(FAIL_AFTER.total_seconds())
    kern_ps = max(1, round(8 * per_node))
    app_ps = max(1, round(24 * per_node))
    variants = []
    for _ in range(4):
        kmake = lambda n: kern_template(HOST.decode(), kern_ps, rng, n)  # noqa: E731
        variants.append(
            (
                _timeline(kmake, START - KERN_LEAD, kern_pre, syslog_ts, 120),
                _timeline(kmake, fail_at + timedelta(seconds=1), kern_post, syslog_ts, 120),
                _timeline(
                    lambda n: fleet_app_template(app_ps, rng, n), START, app_secs, iso_ts, 300
                ),
            )
        )
    link_down = b" @HOST@ kernel: [612345.548779] mlx5_core 0000:c1:00.0 ibp193s0f0: Link down\n"
    for i, host in enumerate(names):
        h = host.encode()
        kern_a, kern_b, app_body = variants[i % 4]
        d = out / "logs" / host
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "kern.log", "wb") as fh:
            fh.write(kern_a.replace(HOST, h))
            if host == bad:
                fh.write(syslog_ts(fail_at) + link_down.replace(HOST, h))
            fh.write(kern_b.replace(HOST, h))
        with open(d / "app.log", "wb") as fh:
            fh.write(
                iso_ts(START) + b",000 INFO [default0] train.py:80 initializing process groups\n"
            )
            fh.write(nccl_init_lines(host, i, nodes, 6, rng))
            fh.write(app_body.replace(HOST, h))
            if host == bad:
                fh.write(
                    f"{host}:4003:4190 [3] NCCL WARN NET/IB : mlx5_3:1 Got async event : "
                    "port error\n".encode()
                )
            for lr in range(8):
                t = fail_at + hang + timedelta(seconds=20 + lr)
                fh.write(symptom_app(host, i * 8 + lr, t, ""))
    _context(
        out,
        f"fleet-{nodes}",
        names,
        fail_at + hang + timedelta(seconds=120),
        {"category": "network.fabric", "node": bad},
    )
    return out


PROFILES = {
    "nccl_init": gen_nccl_init,
    "xid_storm": gen_xid_storm,
    "watchdog_8192": gen_watchdog,
    "week_steps": gen_week,
    "long_lines": gen_long_lines,
    "today": gen_today,
    "nccl_init_1g4": gen_nccl_init_1g4,
    "fleet_1024": gen_fleet,
}
# not in `make bench` by default (10 GB of /tmp, about a minute to generate, minutes to
# measure): `make bench-10g` or `bench/profiles.py --only fleet_1024`
OPT_IN = ("fleet_1024",)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/attr-bench/case"))
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--lines", type=int, default=200_000, help="lines per node")
    ap.add_argument("--profile", choices=sorted(PROFILES), help="a profile instead (issue 16)")
    ap.add_argument("--scale", type=float, default=1.0, help="profile size factor")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.profile:
        PROFILES[args.profile](args.out, args.scale)
    else:
        generate(args.out, args.nodes, args.lines)
    print(f"generated {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
