"""The opt-in `fleet_1024` profile (bench/generate.py PROFILES): a 1,024-node job of about
10 GB whose cause is one node's IB port going down."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

from genlib import (
    FAIL_AFTER,
    KERN_LEAD,
    START,
    TS,
    _context,
    iso_ts,
    kern_template,
    nccl_init_lines,
    symptom_app,
    syslog_ts,
)

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
