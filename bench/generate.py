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
import random
import time
from datetime import timedelta
from pathlib import Path

from generate_fleet import gen_fleet
from genlib import (  # noqa: F401 - the shared pieces, also importable from here
    FAIL_AFTER,
    KERN_LEAD,
    KERN_SHARE,
    START,
    TS,
    _context,
    _kern_file,
    app_template,
    cause_kern,
    iso_ts,
    kern_template,
    nccl_init_lines,
    symptom_app,
    syslog_ts,
    write_file,
)


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
    _context(out, f"bench-{nodes}x{lines}", names, end, {"category": "gpu.lost", "node": bad})
    return out


# --- profiles shaped like real logs at scale (issue 16) ----------------------------------------
# Each writes a case with `context.json: expected` (the right answer) and returns its path.
# `scale` multiplies the default size (1.0: what `make bench` runs); sizes stay configurable.


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
