#!/usr/bin/env python3
"""Regenerate the sample cases under samples/ (deterministic: same bytes every run).

    python samples/_tools/make_samples.py            # all cases
    python samples/_tools/make_samples.py gzip-logs  # some cases

Each function below builds one real-world situation: healthy noise first, then a cause
on one node (or a shared cause on all), then the downstream symptoms with realistic
timing. The expected result is written next to it; see samples/README.md.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from logkit import (  # noqa: E402
    HCAS,
    PCI,
    Case,
    daemon,
    dcgm_series,
    glog,
    kern,
    kts,
    ms,
    pylog,
    remote_error,
    sort_lines,
    startup,
    steps,
    system_noise,
    t_,
    torchrun_failed,
    watchdog_timeout,
    xid,
)

ROOT = Path(__file__).resolve().parents[1]
S = timedelta(seconds=1)
CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


def ip(idx: int, net: int = 1) -> str:
    return f"10.10.{net}.{11 + idx}"


def ctx(job_id, state, start, end, nodes, gpu_model="H100", exit_code=1, scheduler="slurm",
        cluster="cw-h100-iad1", **extra):
    d = {"job_id": job_id, "scheduler": scheduler, "cluster": cluster, "state": state,
         "exit_code": exit_code, "start": start, "end": end, "nodes": nodes, "gpu_model": gpu_model}
    d.update(extra)
    return d


def exp(status, category=None, suspects=(), kinds=None, cands=None, why="", failed=True):
    d = {"failed": failed, "status": status, "category": category, "suspect_nodes": sorted(suspects)}
    if kinds:
        d["root_cause_kinds"] = kinds
    d["candidate_categories"] = sorted(cands or [])
    d["why"] = why
    return d


def kernel_file(c: Case, host: str, fmt: str, events: list, n_noise: int, gpu_model="H100",
                before=timedelta(minutes=40), after=timedelta(minutes=8)):
    """System log of one node: noise spread around the job, plus the given (time, line) events."""
    items = system_noise(c, host, fmt, c.start - before, c.end + after, n_noise, gpu_model)
    return sort_lines(items + list(events))


def app_head(c: Case, host: str, idx: int, nnodes: int, gpus: int, gpu_model: str, stop,
             dt: float = 3.9, every: int = 5, script="train.py", log_steps=True, step0=1):
    lines, t = startup(c, c.start + timedelta(seconds=c.rng.uniform(14, 22)), host, idx, nnodes, gpus,
                       ip(idx), gpu_model, script)
    last = t
    if log_steps:
        more, step, last = steps(c, t, stop, step0, dt, every, script)
        lines += more
    else:
        step = step0 + int((stop - t).total_seconds() / dt)
    return lines, step, last


def wd_all(c, host, idx, gpus, t, seq, timeout_ms=600000, full_ranks=(0,), skip=(), optype="ALLREDUCE",
           numel=1):
    out = []
    for dev in range(gpus):
        if dev in skip:
            continue
        r = idx * gpus + dev
        tt = t + timedelta(milliseconds=c.rng.randint(0, 900))
        # one node per case prints the whole dump (stack frames); elsewhere the short form
        full = (True if not getattr(c, "_dumped", False) else "short") if dev in full_ranks else False
        out += watchdog_timeout(r, tt, seq, timeout_ms, optype, numel, full=full)
    c._dumped = True
    return out


def rankpid(c, host, dev):
    return c.rank_pid(host, dev)


def slurm_out(c: Case, job: str, nodes: list[str], t_launch, tail: list[str]) -> list[str]:
    lines = [f"{t_launch:%Y-%m-%dT%H:%M:%S}+00:00 job {job}: launching torchrun on {len(nodes)} nodes: "
             f"{','.join(nodes)}",
             f"MASTER_ADDR={nodes[0]} MASTER_PORT=29500 NCCL_IB_HCA=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,"
             "mlx5_10,mlx5_11 NCCL_SOCKET_IFNAME=ibp12s0"]
    return lines + tail


# --------------------------------------------------------------------------------------
@case
def xid149_nvlink_3node():
    nodes = ["node-a", "node-b", "node-c"]
    c = Case("xid149-nvlink-3node",
             ctx("4812", "FAILED", "2026-11-02T10:00:00Z", "2026-11-02T10:23:31Z", nodes, "GB200",
                 cluster="gb200-nvl72-east"),
             exp("attributed", "gpu.nvlink", ["node-b"], ["xid"],
                 why="Fatal XID 149 NETIR_LINK_EVT on node-b's GPU 1 (XID 154: Drain and Reset) hung the NVLink "
                     "collectives; the watchdog timeouts on all three nodes ten minutes later are symptoms."))
    T0 = t_("2026-11-02T10:12:40.531877Z")
    gpus, seq = 4, 18211
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 3, gpus, "GB200", T0, dt=2.1, every=10)
        ev = []
        if h == "node-b":
            pci = PCI["GB200"][1]
            # a rising bit-error rate on the same link announced it (Nonfatal: no job impact by itself)
            ev += [kern(c, "iso", T0 - timedelta(seconds=95.2), h, xid(pci, 149, "NETIR_BER_EVENT Nonfatal XC0 i0 "
                        "Link 05 (0x00000013 0x00000000 0x00000000 0x00000000)", pid=None))]
            ev += [kern(c, "iso", T0, h, xid(pci, 149, "NETIR_LINK_EVT  Fatal   XC0 i0 Link 05 (0x021425c6 "
                                          "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)", pid=None)),
                   kern(c, "iso", T0 + timedelta(milliseconds=9), h,
                        xid(pci, 154, "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
                            pid=None))]
        # the NVLink domain hangs: every rank, node-b's included, waits in the collective until
        # the 10-minute watchdog fires
        tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
        app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0, 3), optype="_ALLGATHER_BASE", numel=52428800)
        app += torchrun_failed(c, tw + 1.6 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                    "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 24, "GB200"))
    c.add("logs/node-a/slurm-4812.out", slurm_out(c, "4812", nodes, c.start + S, [
        "srun: error: node-a: task 0: Exited with exit code 1",
        "srun: error: node-b: task 1: Exited with exit code 1",
        "srun: error: node-c: task 2: Exited with exit code 1"]))
    return c


# --------------------------------------------------------------------------------------
@case
def xid79_32node_nccl_timeouts():
    nodes = [f"node-{i:02d}" for i in range(1, 33)]
    c = Case("xid79-32node-nccl-timeouts",
             ctx("771203", "FAILED", "2026-09-14T03:05:00Z", "2026-09-14T03:52:10Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("attributed", "gpu.lost", ["node-17"], ["xid"],
                 why="XID 79 (GPU fell off the bus) on node-17 GPU 5 at 03:41:07; every other node's NCCL "
                     "watchdog fired 10 minutes later, node-01 (rank 0) logging the most errors."))
    T0 = t_("2026-09-14T03:41:07.208114Z")
    gpus, seq, nn = 8, 52117, len(nodes)
    for i, h in enumerate(nodes):
        ev = []
        # a per-node monitor thread logs once a minute; only rank 0 (node-01) logs loss
        lines, t = startup(c, c.start + timedelta(seconds=c.rng.uniform(12, 20)), h, i, nn, gpus, ip(i), "H100")
        lines = [x for x in lines if "NCCL INFO" not in x or ("[0]" in x.split(" NCCL")[0] and
                                                               (i == 0 or "Init " in x or "Bootstrap" in x))][:14]
        if i == 0:
            more, step, _ = steps(c, t, T0, 1, 5.8, every=20)
            lines += more
        else:
            tt = t
            while tt < T0:
                lines.append(pylog(c, tt, "INFO", f"[monitor.py:57] {h} gpus=8 util_avg={c.rng.randint(93, 99)}% "
                                   f"hbm_used={c.rng.uniform(70.1, 72.9):.1f}GiB host_rss={c.rng.uniform(180, 190):.0f}GiB"))
                tt += timedelta(seconds=c.rng.uniform(290, 310))
        if h == "node-17":
            pci = PCI["H100"][5]
            ev += [kern(c, "rfc3164", T0, h, xid(pci, 79, "GPU has fallen off the bus.")),
                   kern(c, "rfc3164", T0, h, "NVRM: GPU 0000:ab:00.0: GPU has fallen off the bus."),
                   kern(c, "rfc3164", T0 + timedelta(milliseconds=3), h,
                        "NVRM: GPU 0000:ab:00.0: GPU serial number is 1654123098231."),
                   kern(c, "rfc3164", T0 + timedelta(milliseconds=41), h,
                        "NVRM: A GPU crash dump has been created. If possible, please run"),
                   kern(c, "rfc3164", T0 + timedelta(milliseconds=41), h,
                        "NVRM: nvidia-bug-report.sh as root to collect this data before"),
                   kern(c, "rfc3164", T0 + timedelta(milliseconds=41), h, "NVRM: the NVIDIA kernel module is unloaded.")]
            pid = rankpid(c, h, 5)
            tf = T0 + timedelta(milliseconds=640)
            lines += [f"{h}:{pid}:{pid + 133} [5] NCCL WARN Cuda failure 'unknown error'",
                      f"{h}:{pid}:{pid + 133} [5] NCCL INFO enqueue.cc:1451 -> 1",
                      f"[rank{16 * 8 + 5}]:[{glog(tf)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
                      f"Rank {16 * 8 + 5}] Process group watchdog thread terminated with exception: CUDA error: "
                      "unknown error",
                      "terminate called after throwing an instance of 'c10::DistBackendError'"]
            lines += torchrun_failed(c, T0 + 1.9 * S, h, [{"rank": 133, "local_rank": 5, "exitcode": -6, "pid": pid}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(30, 400))
            if i == 0:
                # rank 0's node: full watchdog dumps on every rank, remote-error tear-down (flush, status 5)
                lines += wd_all(c, h, i, gpus, tw, seq, full_ranks=tuple(range(8)))
                for dev in range(gpus):
                    lines += remote_error(h, rankpid(c, h, dev), dev, dev, tw + 2 * S, ip(16), status=5)
            else:
                lines += wd_all(c, h, i, gpus, tw, seq, full_ranks=())
            lines += torchrun_failed(c, tw + 1.5 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                          "pid": rankpid(c, h, 0)}])
            lines = [x for x in lines if not x.startswith("  File ") and not x.startswith("    ")] if i else lines
        if h == "node-05":
            # the previous job on node-05 lost a GPU 2 h before this one started; the node was rebooted
            old = c.start - timedelta(hours=2, minutes=4)
            c.boot[h] = old - timedelta(days=11, seconds=40211.734102)
            pre = [kern(c, "rfc3164", old, h, xid("0000:3a:00", 79, "GPU has fallen off the bus.")),
                   kern(c, "rfc3164", old, h, "NVRM: GPU 0000:3a:00.0: GPU has fallen off the bus.")]
            pre_lines = sort_lines(pre)
            reboot = c.start - timedelta(hours=1, minutes=31)
            c.boot[h] = reboot
            pre_lines += sort_lines([
                kern(c, "rfc3164", reboot, h, "Linux version 5.15.0-113-generic (buildd@lcy02-amd64-037) "
                     "(gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
                     "#123-Ubuntu SMP Mon Jun 10 08:16:17 UTC 2024 (Ubuntu 5.15.0-113.123-generic 5.15.152)"),
                kern(c, "rfc3164", reboot, h, "Command line: BOOT_IMAGE=/vmlinuz-5.15.0-113-generic "
                     "root=/dev/md0 ro pci=realloc=off iommu=pt"),
                kern(c, "rfc3164", reboot + timedelta(seconds=41.338120), h, "nvidia-nvlink: Nvlink Core is being initialized, major "
                     "device number 508"),
                kern(c, "rfc3164", reboot + timedelta(seconds=44.902551), h, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  "
                     "Fri May 31 09:35:42 UTC 2024")])
            c.add(f"logs/{h}/syslog", pre_lines + kernel_file(c, h, "rfc3164", ev, 8, before=timedelta(minutes=20)))
        else:
            c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 8, before=timedelta(minutes=20)))
        c.add(f"logs/{h}/stdout", lines)
    tail = ["srun: error: node-17: task 16: Exited with exit code 1"]
    tail += [f"srun: error: {h}: task {k}: Exited with exit code 1" for k, h in enumerate(nodes) if h != "node-17"]
    c.add("logs/node-01/slurm-771203.out", slurm_out(c, "771203", nodes, c.start + S, tail))
    return c


# --------------------------------------------------------------------------------------
@case
def mixed_formats():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("mixed-formats",
             ctx("30077", "FAILED", "2026-10-14T10:00:00Z", "2026-10-14T10:24:05Z", nodes, "H100",
                 log_timezone="America/Chicago", cluster="h100-ord3"),
             exp("attributed", "gpu.memory", ["node-c"], ["xid"],
                 why="XID 95 (uncontained ECC) on node-c GPU 2 at 05:12:40 CDT (10:12:40 UTC) in a journald "
                     "short-iso log; the other nodes' logs are RFC 3164, dmesg -T, ISO with and without offset, "
                     "all in local time, and show only the resulting NCCL timeouts."))
    T0 = t_("2026-10-14T10:12:40.114302Z")
    gpus, seq = 8, 9931
    L = lambda t: t.astimezone(c.tz)  # noqa: E731
    fmts = {"node-a": ("syslog", "rfc3164"), "node-b": ("dmesg", "dmesgT"),
            "node-c": ("journal", "short-iso"), "node-d": ("messages", "iso")}
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=4.4, every=8)
        ev = []
        if h == "node-c":
            ev += [kern(c, "short-iso", T0, h, xid(PCI["H100"][2], 95, "Uncontained: FBHUB. RST: Yes, D-RST: No",
                                                  pid=c.pid("c2"), name="python3")),
                   kern(c, "short-iso", T0 + timedelta(milliseconds=2), h,
                        xid(PCI["H100"][2], 154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset)",
                            pid=None))]
            pid = rankpid(c, h, 2)
            tf = L(T0 + timedelta(milliseconds=520))
            app += [f"{h}:{pid}:{pid + 88} [2] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'",
                    f"[rank18]:[{glog(tf)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 18] "
                    "Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error "
                    "encountered",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, L(T0 + 2 * S), h, [{"rank": 18, "local_rank": 2, "exitcode": -6, "pid": pid}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, L(tw), seq, full_ranks=(0,))
            app += torchrun_failed(c, L(tw + 1.2 * S), h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                           "pid": rankpid(c, h, 0)}])
        fname, fmt = fmts[h]
        c.add(f"logs/{h}/{fname}", kernel_file(c, h, fmt, ev, 17))
        if h == "node-a":      # Python logging in local time, no offset
            c.add(f"logs/{h}/app.log", app)
        elif h == "node-b":    # every line stamped by a log shipper, ISO with offset
            out, cur = [], c.start
            for x in app:
                if x[:4].isdigit():
                    cur = t_(x[:19].replace(" ", "T") + "-05:00") + timedelta(milliseconds=int(x[20:23]))
                out.append(f"{L(cur).isoformat(timespec='milliseconds')} {x}")
            c.add(f"logs/{h}/stdout", out)
        elif h == "node-c":    # untimed warnings first, then mixed
            c.add(f"logs/{h}/stderr", ["Loading extension module fused_adam...",
                                       "Detected CUDA files, patching ldflags"] + app)
        else:                  # ISO without offset (log_timezone applies)
            c.add(f"logs/{h}/app.log", [x.replace(" ", "T", 1).replace(",", ".", 1) if x[:4].isdigit() else x
                                        for x in app])
    return c


# --------------------------------------------------------------------------------------
@case
def gzip_logs():
    nodes = ["node-a", "node-b", "node-c"]
    c = Case("gzip-logs",
             ctx("20931", "OUT_OF_MEMORY", "2026-11-05T22:10:00Z", "2026-11-05T22:31:48Z", nodes, "A100",
                 exit_code=137, cluster="a100-lab"),
             exp("attributed", "node.host_oom", ["node-b"], kinds=None,
                 why="The kernel OOM killer (job cgroup limit) killed rank 10's python3 on node-b at 22:20:13; "
                     "slurmstepd reports the oom-kill event and the peers' NCCL errors follow. All logs are gzip."))
    T0 = t_("2026-11-05T22:20:13.402911Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 3, gpus, "A100", T0, dt=3.3, every=10)
        ev = []
        if h == "node-b":
            victim = rankpid(c, h, 2)
            memcg = "/slurm/uid_1001/job_20931"
            k = lambda dt, m: kern(c, "rfc3164", T0 + timedelta(milliseconds=dt), h, m)  # noqa: E731
            ev += [k(0, "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
                   k(0, f"CPU: 87 PID: {victim + 412} Comm: python3 Tainted: P           OE     5.15.0-113-generic "
                        "#123-Ubuntu"),
                   k(0, "Hardware name: NVIDIA DGXA100 920-23687-2530-000/DGXA100, BIOS 1.25 11/07/2023"),
                   k(1, "memory: usage 1048576000kB, limit 1048576000kB, failcnt 3417"),
                   k(1, "swap: usage 0kB, limit 9007199254740988kB, failcnt 0"),
                   k(1, f"Memory cgroup stats for {memcg}:"),
                   k(2, "Tasks state (memory values in pages):"),
                   k(2, "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name")]
            for dev in range(gpus):
                p = rankpid(c, h, dev)
                ev.append(k(2, f"[{p:7d}]  1001 {p:7d} {c.rng.randint(90, 110) * 1000000:8d} "
                               f"{(99 if dev == 2 else c.rng.randint(9, 12)) * 1000000:8d} {c.rng.randint(300, 400) * 100000:9d}"
                               "        0             0 python3"))
            ev += [k(3, f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-7,"
                        f"oom_memcg={memcg},task_memcg={memcg}/step_0/user/task_1,task=python3,pid={victim},uid=1001"),
                   k(3, f"Memory cgroup out of memory: Killed process {victim} (python3) total-vm:412345678kB, "
                        f"anon-rss:398123456kB, file-rss:812345kB, shmem-rss:0kB, UID:1001 pgtables:812344kB "
                        "oom_score_adj:0"),
                   k(310, f"oom_reaper: reaped process {victim} (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB")]
            app += ["slurmstepd: error: Detected 1 oom-kill event(s) in StepId=20931.0. Some of your processes "
                    "may have been killed by the cgroup out-of-memory handler."]
            app += torchrun_failed(c, T0 + 1.4 * S, h, [{"rank": 10, "local_rank": 2, "exitcode": -9, "pid": victim}])
        else:
            tf = T0 + timedelta(seconds=c.rng.uniform(2.0, 4.0))
            for dev in (0, 5):
                app += remote_error(h, rankpid(c, h, dev), dev, i * gpus + dev, tf, ip(1), status=12, vendor=129)
            app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, tf + 1.2 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log.gz", app)
        c.add(f"logs/{h}/syslog.gz", kernel_file(c, h, "rfc3164", ev, 17, "A100"))
    c.add("logs/node-a/slurm-20931.out.gz", slurm_out(c, "20931", nodes, c.start + S, [
        "srun: error: node-b: task 1: Out Of Memory",
        "srun: launch/slurm: _step_signal: Terminating StepId=20931.0",
        "srun: error: node-a: task 0: Exited with exit code 1",
        "srun: error: node-c: task 2: Exited with exit code 1"]))
    return c


# --------------------------------------------------------------------------------------
@case
def invalid_bytes():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("invalid-bytes",
             ctx("61140", "FAILED", "2026-11-03T07:30:00Z", "2026-11-03T07:51:22Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("attributed", "network.fabric", ["node-c"], ["ib_link_down"],
                 why="node-c's mlx5_4 port (ibp60s0) went down after a cable module error; its peers' NCCL saw "
                     "IB completion status 12 from 10.10.1.13. The logs around it hold invalid UTF-8, NUL runs, "
                     "ANSI colour codes and a 100 KB line."))
    T0 = t_("2026-11-03T07:44:51.640013Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=4.1, every=8)
        ev = []
        if h == "node-c":
            pci, dev_name, hca = HCAS[2]
            ev += [kern(c, "iso", T0 - timedelta(milliseconds=210), h,
                        f"mlx5_core {pci}: Port module event[error]: module 2, Cable error, High Temperature"),
                   kern(c, "iso", T0, h, f"mlx5_core {pci} {dev_name}: Link down"),
                   (T0 + timedelta(milliseconds=1), b"\x00" * 380),  # NUL run written around the event
                   kern(c, "iso", T0 + 31 * S, h, f"{dev_name}: Lost carrier")]
            for dev in (2, 3):
                p = rankpid(c, h, dev)
                app += [f"{h}:{p}:{p + 160} [{dev}] NCCL WARN NET/IB : {hca}:1 Got async event : port error"]
            tf = T0 + timedelta(seconds=27.3)
            app += remote_error(h, rankpid(c, h, 2), 2, 18, tf, ip(0), status=12, vendor=129)[:4]
        else:
            tf = T0 + timedelta(seconds=c.rng.uniform(26.5, 29.0))
            for dev in (2, 3):
                app += remote_error(h, rankpid(c, h, dev), dev, i * gpus + dev, tf, ip(2), status=12, vendor=129)
            app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
        app += torchrun_failed(c, T0 + 30 * S, h, [{"rank": i * gpus + 2, "local_rank": 2, "exitcode": -6,
                                                    "pid": rankpid(c, h, 2)}])
        if h == "node-a":
            # a 100 KB single-line config dump, as some trainers print their resolved config
            blob = "{" + ", ".join(f"'layer_{k}.attn.qkv': {{'shape': [4096, 12288], 'dtype': 'bf16', "
                                   f"'init_std': 0.0{k % 9 + 1}}}" for k in range(840)) + "}"
            app.insert(6, pylog(c, c.start + 20 * S, "INFO", "[config.py:201] resolved parameter table: " + blob))
            app.insert(9, b"2026-11-03 07:30:21,900 INFO [data.py:74] tokenizer vocab entry 50213 = 'caf\xe9 cr\xe8me'"
                          b" (latin-1 in the source file)")
        if h == "node-b":
            garbage = bytes(c.rng.randrange(256) for _ in range(240))
            app.insert(len(app) // 2, garbage.replace(b"\n", b"\x01"))
            app.insert(len(app) // 3, b"\xff\xfe\x00W\x00A\x00R\x00N\x00 \x00U\x00T\x00F\x00-\x001\x006\x00")
        if h == "node-d":
            app = [("\x1b[32m" + x + "\x1b[0m") if " step " in x else x for x in app]
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 16))
    return c


# --------------------------------------------------------------------------------------
@case
def metrics_only_cause():
    nodes = ["node-a", "node-b"]
    c = Case("metrics-only-cause",
             ctx("90412", "FAILED", "2026-11-04T13:00:00Z", "2026-11-04T13:21:40Z", nodes, "H100",
                 cluster="h100-iad2"),
             exp("attributed", "gpu.lost", ["node-b"], kinds=None,
                 why="No kernel log was collected; the app logs show only NCCL watchdog timeouts on both nodes, "
                     "but DCGM_FI_DEV_XID_ERRORS for node-b GPU 3 goes from 0 to 79 at 13:10:00, before them."))
    T0 = t_("2026-11-04T13:09:48.902112Z")
    gpus, seq = 8, 14020
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=3.6, every=10)
        tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
        app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
        app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                    "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
    prom = ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
            "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    util = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    tscrape = c.start - timedelta(minutes=2)
    while tscrape <= c.end + timedelta(minutes=1):
        for i, h in enumerate(nodes):
            for g in range(gpus):
                lab = dcgm_series(h, g, "H100", f"GPU-{(i * 8 + g) * 0x1111111:08x}-4c1e-9b2a-{g:04x}-1e6b7c9d2a{i:02d}")
                lost = h == "node-b" and g == 3 and tscrape >= T0
                prom.append(f"DCGM_FI_DEV_XID_ERRORS{{{lab}}} {79 if lost else 0} {ms(tscrape)}")
                if not lost and tscrape.minute % 10 == 0:
                    # a hung NCCL kernel keeps the other GPUs busy at 100 % until the watchdog fires
                    u = 100 if T0 <= tscrape <= T0 + 600 * S else (0 if tscrape > T0 else c.rng.randint(88, 100))
                    util.append(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {u} {ms(tscrape)}")
        tscrape += timedelta(seconds=120)
    c.add("metrics/dcgm.prom", prom + util)
    return c


# --------------------------------------------------------------------------------------
@case
def healthy_completed_transient():
    nodes = ["node-a", "node-b"]
    c = Case("healthy-completed-transient",
             ctx("88001", "COMPLETED", "2026-11-06T01:00:00Z", "2026-11-06T01:26:12Z", nodes, "H100",
                 exit_code=0, cluster="h100-iad2"),
             exp("not_failed", None, [], failed=False,
                 why="The job completed with exit 0; an IB link flap that recovered in 2 s, the NCCL async "
                     "events it caused, a row-remap event (XID 63) and corrected AER/EDAC errors are transient."))
    gpus = 8
    tflap = t_("2026-11-06T01:09:33.118200Z")
    end = c.end - 40 * S
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", end, dt=4.0, every=10)
        ev = []
        if h == "node-a":
            pci, dev_name, hca = HCAS[4]
            ev += [kern(c, "rfc3164", tflap, h, f"mlx5_core {pci} {dev_name}: Link down"),
                   kern(c, "rfc3164", tflap + timedelta(seconds=2.2), h, f"mlx5_core {pci} {dev_name}: Link up")]
            p = rankpid(c, h, 4)
            k = next(j for j, x in enumerate(app) if x[:4].isdigit() and t_(x[:19].replace(" ", "T") + "Z") > tflap)
            app[k:k] = [f"{h}:{p}:{p + 150} [4] NCCL WARN NET/IB : {hca}:1 Got async event : port error",
                        f"{h}:{p}:{p + 150} [4] NCCL WARN NET/IB : {hca}:1 Got async event : port active"]
        if h == "node-b":
            ev += [kern(c, "rfc3164", t_("2026-11-06T01:17:02.551000Z"), h,
                        xid(PCI["H100"][6], 63, "Row remapping event: Rows 0x1a and 0x2b have been remapped on "
                            "GPU 00000000:ba:00.0", pid=None))]
        done = end + 2 * S
        app += [pylog(c, done, "INFO", f"[train.py:520] reached max_steps={step - 1}; saving final checkpoint to "
                      "/lustre/ckpt/llama8b-run17/step_final"),
                pylog(c, done + 31 * S, "INFO", "[train.py:531] checkpoint saved (16.1 GB in 30.8 s)")]
        for dev in (0, gpus - 1):
            p = rankpid(c, h, dev)
            app.append(f"{h}:{p}:{p} [{dev}] NCCL INFO comm 0x55d0{dev}c8a1b2c0 rank {i * gpus + dev} nranks 16 "
                       f"cudaDev {dev} busId {PCI['H100'][dev].split(':')[1]}000 - Destroy COMPLETE")
        app.append(f"I{done + 35 * S:%m%d %H:%M:%S}.512000 {c.pid(h + 'agent')} torch/distributed/elastic/agent/"
                   "server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for "
                   "other agents to finish.")
        app.append(f"I{done + 36 * S:%m%d %H:%M:%S}.021000 {c.pid(h + 'agent')} torch/distributed/elastic/agent/"
                   "server/api.py:932] Done waiting for other agents. Elapsed: 0.5083 seconds")
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 21))
    return c


# --------------------------------------------------------------------------------------
@case
def ambiguous_xid_and_ib():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("ambiguous-xid-and-ib",
             ctx("61877", "FAILED", "2026-11-07T16:00:00Z", "2026-11-07T16:19:44Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("ambiguous", None, ["node-b", "node-c"], cands=["gpu.lost", "network.fabric"],
                 why="XID 79 on node-b and an IB port down on node-c two seconds apart; either explains the "
                     "NCCL failures that follow, so a person has to look at both."))
    T0 = t_("2026-11-07T16:08:19.077310Z")
    gpus, seq = 8, 7312
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=3.7, every=10)
        ev = []
        if h == "node-b":
            ev += [kern(c, "iso", T0, h, xid(PCI["H100"][1], 79, "GPU has fallen off the bus.")),
                   kern(c, "iso", T0, h, "NVRM: GPU 0000:2a:00.0: GPU has fallen off the bus.")]
            p = rankpid(c, h, 1)
            app += [f"{h}:{p}:{p + 120} [1] NCCL WARN Cuda failure 'unknown error'",
                    f"[rank9]:[{glog(T0 + 0.7 * S)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 9] "
                    "Process group watchdog thread terminated with exception: CUDA error: unknown error",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 9, "local_rank": 1, "exitcode": -6, "pid": p}])
        elif h == "node-c":
            pci, dev_name, hca = HCAS[5]
            ev += [kern(c, "iso", T0 + 2.1 * S, h, f"mlx5_core {pci} {dev_name}: Link down")]
            p = rankpid(c, h, 5)
            app += [f"{h}:{p}:{p + 160} [5] NCCL WARN NET/IB : {hca}:1 Got async event : port error"]
            tw = T0 + timedelta(seconds=600, milliseconds=300)
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,), skip=(5,))
            app += torchrun_failed(c, tw + 1.3 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        else:
            tf = T0 + timedelta(seconds=c.rng.uniform(27, 30))
            app += remote_error(h, rankpid(c, h, 5), 5, i * gpus + 5, tf, ip(2), status=12, vendor=129)
            app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, tf + 1.1 * S, h, [{"rank": i * gpus + 5, "local_rank": 5, "exitcode": -6,
                                                        "pid": rankpid(c, h, 5)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 14))
    return c


# --------------------------------------------------------------------------------------
@case
def unattributed_only_symptoms():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("unattributed-only-symptoms",
             ctx("55170", "FAILED", "2026-11-08T09:00:00Z", "2026-11-08T09:22:03Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-iad2"),
             exp("unattributed", None, [],
                 why="Only NCCL watchdog timeouts and ChildFailedError on node-a..c; node-d's logs were not "
                     "collected, so the cause cannot be named (the result should say node-d is missing)."))
    T0 = t_("2026-11-08T09:10:52.301000Z")
    gpus, seq = 8, 30551
    for i, h in enumerate(nodes[:3]):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=4.2, every=10)
        tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
        app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0, 4))
        app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                    "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", [], 14))
    c.add("logs/node-a/slurm-55170.out", slurm_out(c, "55170", nodes, c.start + S, [
        "srun: error: node-a: task 0: Exited with exit code 1",
        "srun: error: node-b: task 1: Exited with exit code 1",
        "srun: error: node-c: task 2: Exited with exit code 1",
        "srun: error: node-d: task 3: Exited with exit code 1"]))
    return c


# --------------------------------------------------------------------------------------
@case
def shared_switch_linkdown():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("shared-switch-linkdown",
             ctx("61902", "FAILED", "2026-11-09T14:00:00Z", "2026-11-09T14:21:37Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("attributed", "network.fabric", [], ["ib_link_down"],
                 why="All four nodes' rail-3 ports (mlx5_5) went down in the same second and came back 55 s "
                     "later: a leaf switch event, not a node fault; NCCL retry-exceeded errors followed everywhere."))
    T0 = t_("2026-11-09T14:12:31.000000Z")
    gpus = 8
    pci, dev_name, hca = HCAS[3]
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=3.9, every=10)
        td = T0 + timedelta(milliseconds=c.rng.randint(40, 900))
        ev = [kern(c, "rfc3164", td, h, f"mlx5_core {pci} {dev_name}: Link down"),
              kern(c, "rfc3164", td + timedelta(seconds=55.2), h, f"mlx5_core {pci} {dev_name}: Link up")]
        p = rankpid(c, h, 3)
        app += [f"{h}:{p}:{p + 150} [3] NCCL WARN NET/IB : {hca}:1 Got async event : port error"]
        tf = T0 + timedelta(seconds=c.rng.uniform(25, 29))
        app += remote_error(h, p, 3, i * gpus + 3, tf, ip((i + 1) % 4), status=12, vendor=129)
        app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
        app += torchrun_failed(c, tf + 1.2 * S, h, [{"rank": i * gpus + 3, "local_rank": 3, "exitcode": -6, "pid": p}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 14))
    return c


# --------------------------------------------------------------------------------------
@case
def shared_lustre():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("shared-lustre",
             ctx("61955", "FAILED", "2026-11-10T04:00:00Z", "2026-11-10T04:27:51Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-sc2"),
             exp("attributed", "storage", [], ["lustre_error"],
                 why="Every node lost its connection to scratch-OST0007 (rc = -107) in the same second; rank 0's "
                     "checkpoint write then failed with EIO and the other ranks timed out waiting for it."))
    T0 = t_("2026-11-10T04:16:09.480000Z")
    gpus, seq = 8, 21881
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=4.0, every=10)
        osc = f"scratch-OST0007-osc-ffff9a1c{2 + i:x}d3e4000"
        td = T0 + timedelta(milliseconds=c.rng.randint(0, 700))
        ev = [kern(c, "iso", td, h, f"LustreError: 11-0: {osc}: operation ost_write to node 10.7.42.4@o2ib failed: "
                                    "rc = -107"),
              kern(c, "iso", td, h, f"Lustre: {osc}: Connection to scratch-OST0007 (at 10.7.42.4@o2ib) was lost; in "
                                    "progress operations using this service will wait for recovery to complete"),
              kern(c, "iso", td + timedelta(seconds=100.3), h, f"LustreError: 167-0: scratch-OST0007-osc-ffff9a1c{2 + i:x}"
                                    "d3e4000: This client was evicted by scratch-OST0007; in progress operations "
                                    "using this service will fail.")]
        if h == "node-a":
            app += [pylog(c, T0 - 2 * S, "INFO", f"[checkpoint.py:88] saving checkpoint step {step} to "
                          "/lustre/scratch/ckpt/llama8b-run21/step_%d" % step),
                    "Traceback (most recent call last):",
                    '  File "/workspace/train.py", line 701, in <module>',
                    "    main()",
                    '  File "/workspace/train.py", line 655, in main',
                    "    save_checkpoint(model, optimizer, step, args.ckpt_dir)",
                    '  File "/workspace/checkpoint.py", line 94, in save_checkpoint',
                    "    torch.save(state, os.path.join(path, f\"rank{rank:05d}.pt\"))",
                    '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 850, in save',
                    "    _save(",
                    '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 1114, in _save',
                    "    zip_file.write_record(name, storage, num_bytes)",
                    "OSError: [Errno 5] Input/output error",
                    pylog(c, T0 + 101 * S, "ERROR", "[train.py:702] rank 0 failed, exiting")]
            app += torchrun_failed(c, T0 + 102 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": 1,
                                                        "pid": rankpid(c, h, 0)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,), optype="BROADCAST", numel=1)
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 14))
    return c


# --------------------------------------------------------------------------------------
@case
def gpu_driver_gsp_timeout():
    nodes = ["node-a", "node-b"]
    c = Case("gpu-driver-gsp-timeout",
             ctx("70331", "FAILED", "2026-11-11T19:00:00Z", "2026-11-11T19:20:55Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-ord3"),
             exp("attributed", "gpu.driver", ["node-b"], ["xid"],
                 why="Repeated XID 119 (GSP RPC timeout) on node-b GPU 3; rank 11 then failed with 'unspecified "
                     "launch failure' and node-a's ranks hit the NCCL watchdog."))
    T0 = t_("2026-11-11T19:09:14.330981Z")
    gpus, seq = 8, 11822
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=3.8, every=10)
        ev = []
        if h == "node-b":
            pci = PCI["H100"][3]
            for k, fn in enumerate([(76, "GSP_RM_CONTROL", "0x20802a02 0x8"), (76, "GSP_RM_CONTROL", "0x2080205b 0x4"),
                                    (10, "FREE", "0xc1d00171 0x0")]):
                ev.append(kern(c, "rfc3164", T0 + timedelta(seconds=6.2 * k), h,
                               xid(pci, 119, f"Timeout after 6s of waiting for RPC response from GPU3 GSP! Expected "
                                   f"function {fn[0]} ({fn[1]}) ({fn[2]}).", pid=c.pid("b3"), name="python3")))
            ev.append(kern(c, "rfc3164", T0 + timedelta(seconds=12.5), h,
                           "NVRM: GPU3 _kgspLogXid119: ********************************* GSP Timeout "
                           "**********************************"))
            p = rankpid(c, h, 3)
            tf = T0 + timedelta(seconds=13.1)
            app += [f"[rank11]:[{glog(tf)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 11] "
                    "Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure",
                    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                    "below might be incorrect.",
                    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
                    "",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, tf + 1.5 * S, h, [{"rank": 11, "local_rank": 3, "exitcode": -6, "pid": p}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/stdout", app)
        c.add(f"logs/{h}/messages", kernel_file(c, h, "rfc3164", ev, 16))
    return c


# --------------------------------------------------------------------------------------
def rank_traceback(rank: int, frames: list[tuple[str, int, str, str]], exc: str) -> list[str]:
    """Traceback as PyTorch >= 2.2 prints it from a rank: every line prefixed `[rankN]: `."""
    out = [f"[rank{rank}]: Traceback (most recent call last):"]
    for f, ln, fn, src in frames:
        out += [f'[rank{rank}]:   File "{f}", line {ln}, in {fn}', f"[rank{rank}]:     {src}"]
    out.append(f"[rank{rank}]: {exc}")
    return out


@case
def app_cuda_oom():
    nodes = ["node-a", "node-b"]
    c = Case("app-cuda-oom",
             ctx("70502", "FAILED", "2026-11-12T08:00:00Z", "2026-11-12T08:19:20Z", nodes, "H100",
                 cluster="h100-ord3"),
             exp("attributed", "app.gpu_oom", ["node-b"], ["cuda_oom"],
                 why="torch.OutOfMemoryError on rank 9 (node-b GPU 1) after the sequence length was raised; "
                     "node-a's ranks then timed out. node-x9 (logs present, not in the job) had an XID 79 that "
                     "must be ignored."))
    T0 = t_("2026-11-12T08:08:41.774120Z")
    gpus, seq = 8, 4410
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=10)
        if h == "node-b":
            app.append(pylog(c, T0 - 1.1 * S, "INFO", "[data.py:140] curriculum: seq_len 8192 -> 16384 at step "
                             f"{step - 1}"))
            app += rank_traceback(9, [
                ("/workspace/train.py", 512, "<module>", "main()"),
                ("/workspace/train.py", 471, "main", "loss = model(batch).loss"),
                ("/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", 1736, "_wrapped_call_impl",
                 "return self._call_impl(*args, **kwargs)"),
                ("/workspace/model/attention.py", 203, "forward", "scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale")],
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 1 has a total capacity "
                "of 79.10 GiB of which 2.12 GiB is free. Including non-PyTorch memory, this process has 76.97 GiB "
                "memory in use. Of the allocated memory 71.48 GiB is allocated by PyTorch, and 3.96 GiB is reserved "
                "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
            app += torchrun_failed(c, T0 + 3 * S, h, [{"rank": 9, "local_rank": 1, "exitcode": 1,
                                                      "pid": rankpid(c, h, 1)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", [], 12))
    # a neighbouring node's logs were swept up by the collector; it was not part of this job
    stray = "node-x9"
    c.add(f"logs/{stray}/kern.log", kernel_file(c, stray, "iso", [
        kern(c, "iso", T0 - 40 * S, stray, xid(PCI["H100"][0], 79, "GPU has fallen off the bus.")),
        kern(c, "iso", T0 - 40 * S, stray, "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.")], 15))
    return c


# --------------------------------------------------------------------------------------
@case
def app_python_error():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("app-python-error",
             ctx("55012", "FAILED", "2026-11-13T11:00:00Z", "2026-11-13T11:21:29Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-iad2"),
             exp("attributed", "app.error", ["node-c"], ["traceback"],
                 why="rank 22 on node-c raised KeyError: 'input_ids' in the collate function (a malformed data "
                     "shard); the other nodes' NCCL watchdog timeouts are symptoms."))
    T0 = t_("2026-11-13T11:10:33.019554Z")
    gpus, seq = 8, 8123
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0, dt=4.0, every=10)
        err = []
        if h == "node-c":
            err += rank_traceback(22, [
                ("/workspace/train.py", 618, "<module>", "main()"),
                ("/workspace/train.py", 560, "main", "batch = next(train_iter)"),
                ("/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", 701, "__next__",
                 "data = self._next_data()"),
                ("/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", 757, "_next_data",
                 "data = self._dataset_fetcher.fetch(index)  # may raise StopIteration"),
                ("/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/fetch.py", 55, "fetch",
                 "return self.collate_fn(data)"),
                ("/workspace/data/collate.py", 44, "__call__", 'ids = [s["input_ids"] for s in batch]')],
                "KeyError: 'input_ids'")
            err += torchrun_failed(c, T0 + 2.2 * S, h, [{"rank": 22, "local_rank": 6, "exitcode": 1,
                                                        "pid": rankpid(c, h, 6)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            err += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            err += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/stdout", [x for x in app if x[:4].isdigit()])
        c.add(f"logs/{h}/stderr", [x for x in app if not x[:4].isdigit()] + err)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 12))
    c.add("logs/node-a/slurm-55012.out", slurm_out(c, "55012", nodes, c.start + S, [
        "srun: error: node-c: task 2: Exited with exit code 1",
        "srun: error: node-a: task 0: Exited with exit code 1",
        "srun: error: node-b: task 1: Exited with exit code 1",
        "srun: error: node-d: task 3: Exited with exit code 1"]))
    return c


# --------------------------------------------------------------------------------------
def sigterm_tail(c: Case, h: str, t, job: str, reason: str | None) -> list[str]:
    why = f" DUE TO {reason}" if reason else ""
    ap = c.pid(h + "agent", 1000, 300000)
    lines = [f"slurmstepd: error: *** STEP {job}.0 ON {h} CANCELLED AT {t:%Y-%m-%dT%H:%M:%S}{why} ***",
             f"W{t:%m%d %H:%M:%S}.{t.microsecond:06d} {ap} torch/distributed/elastic/agent/server/api.py:704] "
             "Received Signals.SIGTERM death signal, shutting down workers"]
    for dev in range(3):
        lines.append(f"W{t:%m%d %H:%M:%S}.{t.microsecond:06d} {ap} torch/distributed/elastic/multiprocessing/"
                     f"api.py:897] Sending process {rankpid(c, h, dev)} closing signal SIGTERM")
    lines += ["Traceback (most recent call last):",
              '  File "/usr/local/bin/torchrun", line 8, in <module>',
              "    sys.exit(main())",
              '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/agent/server/api.py", '
              "line 696, in run",
              "    result = self._invoke_run(role)",
              '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/api.py", '
              "line 84, in _terminate_process_handler",
              "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
              f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {ap} got signal: 15"]
    return lines


@case
def slurm_time_limit():
    nodes = ["node-a", "node-b"]
    c = Case("slurm-time-limit",
             ctx("88123", "TIMEOUT", "2026-11-14T00:00:00Z", "2026-11-14T04:00:27Z", nodes, "H100",
                 exit_code=0, _nccl_debug="WARN", cluster="h100-iad2", time_limit_minutes=240),
             exp("attributed", "scheduler.time_limit", [], ["slurm_cancelled"],
                 why="Training was healthy until Slurm cancelled it at its 4 h limit (DUE TO TIME LIMIT); the "
                     "SIGTERM tear-down that follows is a symptom."))
    Tc = t_("2026-11-14T04:00:02Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", Tc, dt=4.3, every=100)
        app += sigterm_tail(c, h, Tc, "88123", "TIME LIMIT")
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 24, before=timedelta(minutes=10)))
    c.add("logs/node-a/slurm-88123.out", slurm_out(c, "88123", nodes, c.start + S, [
        "slurmstepd: error: *** JOB 88123 ON node-a CANCELLED AT 2026-11-14T04:00:02 DUE TO TIME LIMIT ***",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "slurmstepd: error: *** STEP 88123.0 ON node-a CANCELLED AT 2026-11-14T04:00:02 DUE TO TIME LIMIT ***"]))
    return c


@case
def slurm_preempted():
    nodes = ["node-a", "node-b"]
    c = Case("slurm-preempted",
             ctx("88410", "PREEMPTED", "2026-11-15T06:00:00Z", "2026-11-15T06:47:12Z", nodes, "H100",
                 exit_code=0, _nccl_debug="WARN", cluster="h100-iad2", partition="low"),
             exp("attributed", "scheduler.cancelled", [], ["slurm_cancelled"],
                 why="A higher-priority job preempted this low-partition job at 06:46:40 (DUE TO PREEMPTION); "
                     "nothing on the nodes was faulty."))
    Tc = t_("2026-11-15T06:46:40Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", Tc, dt=4.1, every=25)
        app += sigterm_tail(c, h, Tc, "88410", "PREEMPTION")
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", [], 14))
    c.add("logs/node-a/slurm-88410.out", slurm_out(c, "88410", nodes, c.start + S, [
        "slurmstepd: error: *** JOB 88410 ON node-a CANCELLED AT 2026-11-15T06:46:40 DUE TO PREEMPTION ***",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."]))
    return c


# --------------------------------------------------------------------------------------
@case
def node_failure():
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    c = Case("node-failure",
             ctx("5531", "NODE_FAIL", "2026-11-16T21:00:00Z", "2026-11-16T21:18:44Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-sc2"),
             exp("attributed", "node.down", ["node-c"], ["kernel_panic"],
                 why="node-c logged soft lockups and a kernel panic at 21:12:20 and went silent; Slurm cancelled "
                     "the job DUE TO NODE FAILURE and peers saw node-c's endpoints vanish."))
    T0 = t_("2026-11-16T21:11:31.447000Z")
    Tp = t_("2026-11-16T21:12:20.903000Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 4, gpus, "H100", T0 if h == "node-c" else Tp, dt=3.9, every=10)
        ev = []
        if h == "node-c":
            for k in range(3):
                tt = T0 + timedelta(seconds=16 * k)
                ev.append(kern(c, "iso", tt, h, f"watchdog: BUG: soft lockup - CPU#{18 + k} stuck for {22 + 4 * k}s! "
                               f"[python3:{rankpid(c, h, k)}]"))
                ev.append(kern(c, "iso", tt, h, "CPU: %d PID: %d Comm: python3 Tainted: P           OEL    "
                               "5.15.0-113-generic #123-Ubuntu" % (18 + k, rankpid(c, h, k))))
            ev.append(kern(c, "iso", T0 + 20 * S, h, "INFO: task jbd2/md0-8:1187 blocked for more than 120 seconds."))
            ev.append(kern(c, "iso", Tp, h, "Kernel panic - not syncing: softlockup: hung tasks"))
            ev.append(kern(c, "iso", Tp, h, "CPU: 20 PID: 4123 Comm: python3 Tainted: P           OEL    "
                           "5.15.0-113-generic #123-Ubuntu"))
            ev.append(kern(c, "iso", Tp, h, "Kernel Offset: 0x2e600000 from 0xffffffff81000000 (relocation range: "
                           "0xffffffff80000000-0xffffffffbfffffff)"))
            items = system_noise(c, h, "iso", c.start - timedelta(minutes=40), Tp, 25)
            c.add(f"logs/{h}/kern.log", sort_lines(items + ev))
            c.add(f"logs/{h}/app.log", app)
            continue
        tf = Tp + timedelta(seconds=c.rng.uniform(18, 24))
        app += remote_error(h, rankpid(c, h, 1), 1, i * gpus + 1, tf, ip(2), status=12, vendor=129)
        app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
        app += torchrun_failed(c, tf + 1.2 * S, h, [{"rank": i * gpus + 1, "local_rank": 1, "exitcode": -6,
                                                    "pid": rankpid(c, h, 1)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 14))
    c.add("logs/node-a/slurm-5531.out", slurm_out(c, "5531", nodes, c.start + S, [
        "srun: error: Node failure on node-c",
        "slurmstepd: error: *** JOB 5531 ON node-a CANCELLED AT 2026-11-16T21:18:20 DUE TO NODE FAILURE, SEE "
        "SLURMCTLD LOG FOR DETAILS ***",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "srun: error: node-a: task 0: Exited with exit code 1"]))
    return c


# --------------------------------------------------------------------------------------
@case
def timeout_outranked_by_xid():
    nodes = ["node-a", "node-b"]
    c = Case("timeout-outranked-by-xid",
             ctx("88777", "TIMEOUT", "2026-11-17T00:00:00Z", "2026-11-17T02:00:31Z", nodes, "H100",
                 exit_code=0, _nccl_debug="WARN", cluster="h100-iad2", time_limit_minutes=120),
             exp("attributed", "gpu.lost", ["node-a"], ["xid"],
                 why="XID 79 on node-a at 01:30:12 hung the job (NCCL timeout set to 2 h) until Slurm's time "
                     "limit cancelled it 30 minutes later: the earlier infrastructure fault outranks TIMEOUT."))
    T0 = t_("2026-11-17T01:30:12.660100Z")
    Tc = t_("2026-11-17T02:00:06Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.2, every=60)
        ev = []
        if h == "node-a":
            ev += [kern(c, "rfc3164", T0, h, xid(PCI["H100"][6], 79, "GPU has fallen off the bus.")),
                   kern(c, "rfc3164", T0, h, "NVRM: GPU 0000:ba:00.0: GPU has fallen off the bus."),
                   kern(c, "rfc3164", T0 + 60 * S, h, "INFO: task python3:%d blocked for more than 120 seconds."
                        % rankpid(c, h, 6))]
        app += sigterm_tail(c, h, Tc, "88777", "TIME LIMIT")
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 16, before=timedelta(minutes=10)))
    c.add("logs/node-a/slurm-88777.out", slurm_out(c, "88777", nodes, c.start + S, [
        "slurmstepd: error: *** JOB 88777 ON node-a CANCELLED AT 2026-11-17T02:00:06 DUE TO TIME LIMIT ***"]))
    return c


# --------------------------------------------------------------------------------------
@case
def disk_full():
    nodes = ["node-a", "node-b"]
    c = Case("disk-full",
             ctx("70911", "FAILED", "2026-11-18T15:00:00Z", "2026-11-18T15:33:02Z", nodes, "L40S",
                 _nccl_debug="WARN", cluster="l40s-dev"),
             exp("attributed", "storage", ["node-a"], ["disk_full"],
                 why="Rank 0 on node-a filled the node-local NVMe (/local_nvme) while saving a checkpoint: "
                     "'No space left on device'; node-b's ranks then timed out in the next collective."))
    T0 = t_("2026-11-18T15:21:50.200400Z")
    gpus, seq = 4, 3301
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "L40S", T0, dt=5.1, every=10)
        if h == "node-a":
            app += [pylog(c, T0 - 35 * S, "INFO", f"[checkpoint.py:88] saving checkpoint step {step} to "
                          f"/local_nvme/ckpt/run-0451/step_{step}"),
                    "Traceback (most recent call last):",
                    '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 850, in save',
                    "    _save(",
                    '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 1114, in _save',
                    "    zip_file.write_record(name, storage, num_bytes)",
                    "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing "
                    "file data/412: file write failed",
                    "",
                    "During handling of the above exception, another exception occurred:",
                    "",
                    "Traceback (most recent call last):",
                    '  File "/workspace/train.py", line 655, in main',
                    "    save_checkpoint(model, optimizer, step, args.ckpt_dir)",
                    '  File "/workspace/checkpoint.py", line 97, in save_checkpoint',
                    "    shutil.copy(tmp, final)",
                    '  File "/usr/lib/python3.10/shutil.py", line 256, in copyfile',
                    "    fdst.write(buf)",
                    "OSError: [Errno 28] No space left on device",
                    pylog(c, T0 + 0.4 * S, "ERROR", "[train.py:660] checkpoint failed on rank 0; /local_nvme: 0 B "
                          "free of 3.5 TB")]
            app += torchrun_failed(c, T0 + 1.5 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": 1,
                                                        "pid": rankpid(c, h, 0)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 4, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 12, "L40S"))
    return c


# --------------------------------------------------------------------------------------
@case
def nonfatal_nvlink_noise_app_error():
    nodes = ["node-a", "node-b"]
    c = Case("nonfatal-nvlink-noise-app-error",
             ctx("4977", "FAILED", "2026-11-19T12:00:00Z", "2026-11-19T12:18:10Z", nodes, "GB200",
                 cluster="gb200-nvl72-east"),
             exp("attributed", "app.error", ["node-b"], ["traceback"],
                 why="node-a logged Nonfatal XID 149/144 NVLink events (no job impact); the job died because "
                     "rank 6 on node-b raised AssertionError on a NaN loss."))
    T0 = t_("2026-11-19T12:07:44.910331Z")
    gpus, seq = 4, 5530
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "GB200", T0, dt=2.2, every=10)
        ev = []
        if h == "node-a":
            pci = PCI["GB200"][2]
            for k, tt in enumerate([T0 - 301 * S, T0 - 120 * S, T0 - 9 * S]):
                ev.append(kern(c, "iso", tt, h, xid(pci, 149, "NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00000013 "
                                                    "0x00000000 0x00000000 0x00000000)", pid=None)))
            ev.append(kern(c, "iso", T0 - 8 * S, h, xid(pci, 144, "SAW_MVB Nonfatal XC0 i0 Link -1 (0x00000004 "
                                                        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
                                                    pid=None)))
        if h == "node-b":
            app.append(pylog(c, T0 - 0.5 * S, "WARNING", f"[train.py:430] step {step} | loss nan | grad_norm inf | "
                             "skipped update (loss scale 1.0)"))
            app += rank_traceback(6, [
                ("/workspace/train.py", 512, "<module>", "main()"),
                ("/workspace/train.py", 436, "main", 'assert torch.isfinite(loss), f"non-finite loss at step {step}: {loss.item()}"')],
                f"AssertionError: non-finite loss at step {step}: nan")
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 6, "local_rank": 2, "exitcode": 1,
                                                      "pid": rankpid(c, h, 2)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 16, "GB200"))
    return c


# --------------------------------------------------------------------------------------
@case
def kueue_oomkilled():
    nodes = ["gpu-node-07", "gpu-node-12"]
    c = Case("kueue-oomkilled",
             ctx("team-llm/sft-llama-8b-x7k2p", "FAILED", "2026-11-20T10:00:00Z", "2026-11-20T10:31:40Z", nodes,
                 "H100", exit_code=137, scheduler="kueue", cluster="gke-a3-mega-usc1",
                 jobset="sft-llama-8b-x7k2p", queue="team-llm-lq"),
             exp("attributed", "node.host_oom", ["gpu-node-12"], kinds=None,
                 why="The kernel memcg OOM killer killed the trainer in worker-1's container on gpu-node-12 "
                     "(container limit 1 TiB); the pod was OOMKilled (137) and worker-0 lost its NCCL peer. "
                     "A container-limit OOM is the kernel OOM killer ending the workload, so node.host_oom."))
    T0 = t_("2026-11-20T10:31:06.981234Z")
    gpus = 8
    pods = {"gpu-node-07": "sft-llama-8b-x7k2p-worker-0-0-9ffrc", "gpu-node-12": "sft-llama-8b-x7k2p-worker-1-0-5hq8v"}
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.4, every=10, script="sft.py")
        ev = []
        cur = c.start
        stamped = []
        for x in app:
            if x[:4].isdigit():
                cur = t_(x[:19].replace(" ", "T") + "Z") + timedelta(milliseconds=int(x[20:23]))
            stamped.append(kts(cur) + x)
        if h == "gpu-node-12":
            pod_uid = "3b2f9c1e-7a44-4d0b-9e61-5c2a8f4d1b77"
            cid = "9c1e4b7a2d3f5e6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a"
            memcg = (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_uid.replace('-', '_')}.slice/"
                     f"cri-containerd-{cid}.scope")
            victim = rankpid(c, h, 0) - 7
            k = lambda dt, m: kern(c, "short-iso", T0 + timedelta(milliseconds=dt), h, m)  # noqa: E731
            ev += [k(-120, "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=985"),
                   k(-120, "memory: usage 1073741824kB, limit 1073741824kB, failcnt 118"),
                   k(-119, f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{cid[:12]}.scope,"
                           f"mems_allowed=0-1,oom_memcg={memcg},task_memcg={memcg},task=python,pid={victim},uid=0"),
                   k(-119, f"Memory cgroup out of memory: Killed process {victim} (python) total-vm:1301234560kB, "
                           "anon-rss:1069123456kB, file-rss:1234567kB, shmem-rss:2048kB, UID:0 pgtables:2101234kB "
                           "oom_score_adj:985"),
                   daemon(c, "short-iso", T0, h, "containerd", f'time="{T0:%Y-%m-%dT%H:%M:%S}.{T0.microsecond:06d}000Z" '
                          f'level=info msg="TaskOOM event container_id:\\"{cid}\\""'),
                   daemon(c, "short-iso", T0 + 0.6 * S, h, "kubelet", f'I{T0:%m%d %H:%M:%S}.{T0.microsecond:06d}    '
                          f'{c.pid(h + "kubelet", 800, 5000)} kubelet.go:2461] "SyncLoop (PLEG): event for pod" pod="team-llm/{pods[h]}" '
                          f'event={{"ID":"{pod_uid}","Type":"ContainerDied","Data":"{cid}"}}')]
            c.add(f"logs/{h}/describe-{pods[h]}.txt", [
                f"Name:             {pods[h]}", "Namespace:        team-llm", f"Node:             {h}/10.128.0.{40 + i}",
                "Containers:", "  trainer:", f"    Container ID:   containerd://{cid}",
                "    State:          Terminated", "      Reason:       OOMKilled", "      Exit Code:    137",
                "      Started:      Fri, 20 Nov 2026 10:00:31 +0000", "      Finished:     Fri, 20 Nov 2026 10:31:06 +0000",
                "    Limits:", "      memory:          1Ti", "      nvidia.com/gpu:  8"])
        else:
            tf = T0 + timedelta(seconds=3.4)
            stamped += [kts(tf) + x for x in remote_error(h, rankpid(c, h, 0), 0, 0, tf, "10.128.0.41", status=12,
                                                          vendor=129)]
            stamped += [kts(tf + 1.2 * S) + x for x in torchrun_failed(c, tf + 1.2 * S, h, [
                {"rank": 0, "local_rank": 0, "exitcode": -6, "pid": rankpid(c, h, 0)}], script="sft.py")]
        c.add(f"logs/{h}/{pods[h]}.log", stamped)
        noise = [x for x in system_noise(c, h, "short-iso", c.start - timedelta(minutes=30), c.end + 5 * 60 * S, 40)
                 if "slurmd" not in x[1] and "nhc" not in x[1]]
        c.add(f"logs/{h}/journal", sort_lines(noise + ev))
    return c


# --------------------------------------------------------------------------------------
@case
def year_boundary_rfc3164():
    nodes = ["node-a", "node-b"]
    c = Case("year-boundary-rfc3164",
             ctx("99120", "FAILED", "2026-12-31T23:30:00Z", "2027-01-01T00:14:41Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-iad2"),
             exp("attributed", "gpu.lost", ["node-b"], ["xid"],
                 why="XID 79 on node-b at 00:03:02 on 1 January, logged in RFC 3164 syslog which has no year: "
                     "the job started on 31 December, so 'Jan  1' belongs to the next year, not the start's."))
    T0 = t_("2027-01-01T00:03:02.518771Z")
    gpus, seq = 8, 6120
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=15)
        ev = []
        if h == "node-b":
            ev += [kern(c, "rfc3164", T0, h, xid(PCI["H100"][4], 79, "GPU has fallen off the bus.")),
                   kern(c, "rfc3164", T0, h, "NVRM: GPU 0000:9a:00.0: GPU has fallen off the bus.")]
            p = rankpid(c, h, 4)
            app += [f"{h}:{p}:{p + 131} [4] NCCL WARN Cuda failure 'unknown error'",
                    f"[rank12]:[{glog(T0 + 0.6 * S)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
                    "Rank 12] Process group watchdog thread terminated with exception: CUDA error: unknown error",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 12, "local_rank": 4, "exitcode": -6, "pid": p}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 19))
    return c


# --------------------------------------------------------------------------------------
@case
def xid13_illegal_address():
    nodes = ["node-a", "node-b"]
    c = Case("xid13-illegal-address",
             ctx("99307", "FAILED", "2026-11-21T09:00:00Z", "2026-11-21T09:19:02Z", nodes, "H100",
                 cluster="h100-ord3"),
             exp("attributed", "app.error", ["node-a"],
                 why="A custom fused kernel read out of range on rank 3: XID 13 (SM warp exception, Out Of "
                     "Range Address) then XID 43 on node-a GPU 3 and 'an illegal memory access' in the app; a "
                     "single application-induced burst, not a GPU fault."))
    T0 = t_("2026-11-21T09:08:29.004512Z")
    gpus, seq = 8, 3390
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=10)
        ev = []
        if h == "node-a":
            pci, p = PCI["H100"][3], rankpid(c, h, 3)
            ev += [kern(c, "iso", T0, h, xid(pci, 13, "Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of "
                                                 "Range Address", pid=p, name="python3")),
                   kern(c, "iso", T0, h, xid(pci, 13, "Graphics Exception: ESR 0x524648=0x114000e 0x524650=0x20 "
                                                 "0x524644=0xd3eff2 0x52464c=0x17f", pid=p, name="python3")),
                   kern(c, "iso", T0 + timedelta(milliseconds=35), h, xid(pci, 43, "channel 0x00000030", pid=p,
                                                                          name="python3"))]
            app.append(pylog(c, T0 - 3 * S, "INFO", "[train.py:233] enabling fused rotary kernel "
                             "(kernels/fused_rope.py, block=256)"))
            app += rank_traceback(3, [
                ("/workspace/train.py", 512, "<module>", "main()"),
                ("/workspace/train.py", 471, "main", "loss = model(batch).loss"),
                ("/workspace/model/attention.py", 188, "forward", "q, k = apply_fused_rope(q, k, self.freqs, pos)"),
                ("/workspace/kernels/fused_rope.py", 97, "apply_fused_rope", "torch.cuda.synchronize()"),
                ("/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", 954, "synchronize",
                 "return torch._C._cuda_synchronize()")],
                "RuntimeError: CUDA error: an illegal memory access was encountered")
            app += ["[rank3]: CUDA kernel errors might be asynchronously reported at some other API call, so the "
                    "stacktrace below might be incorrect.",
                    "[rank3]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                    "[rank3]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]
            app += torchrun_failed(c, T0 + 1.8 * S, h, [{"rank": 3, "local_rank": 3, "exitcode": 1, "pid": p}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 8, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 19))
    return c


# --------------------------------------------------------------------------------------
@case
def clock_skew_linkdown():
    nodes = ["node-a", "node-b", "node-c"]
    c = Case("clock-skew-linkdown",
             ctx("99415", "FAILED", "2026-11-22T17:00:00Z", "2026-11-22T17:16:20Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("attributed", "network.fabric", ["node-c"], ["ib_link_down"],
                 why="node-c's clock ran 4 s fast (chronyd later says so): its 'Link down' is stamped 1.8 s "
                     "after the peers' status-12 errors it caused; within clock skew, it is still the cause."))
    T0 = t_("2026-11-22T17:09:14.270110Z")  # true time of the link failure
    skew = {"node-a": timedelta(0), "node-b": timedelta(milliseconds=-310), "node-c": timedelta(seconds=4.0)}
    gpus = 8
    pci, dev_name, hca = HCAS[6]
    for i, h in enumerate(nodes):
        off = skew[h]
        app, step, last = app_head(c, h, i, 3, gpus, "H100", T0, dt=4.0, every=10)
        if h == "node-c":
            ev = [kern(c, "iso", T0 + off, h, f"mlx5_core {pci} {dev_name}: Link down"),
                  daemon(c, "iso", T0 + 140 * S, h, "chronyd", "System clock wrong by -4.000287 seconds, "
                         "adjustment started")]
            p = rankpid(c, h, 6)
            app += [f"{h}:{p}:{p + 150} [6] NCCL WARN NET/IB : {hca}:1 Got async event : port error"]
            tf = T0 + timedelta(seconds=2.6)
            app += remote_error(h, p, 6, i * gpus + 6, tf + off, ip(0), status=12, vendor=129)
            app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, tf + off + 1.0 * S, h, [{"rank": i * gpus + 6, "local_rank": 6,
                                                              "exitcode": -6, "pid": p}])
        else:
            ev = []
            tf = T0 + timedelta(seconds=2.2 + c.rng.uniform(0, 0.3))
            app += remote_error(h, rankpid(c, h, 6), 6, i * gpus + 6, tf + off, ip(2), status=12, vendor=129)
            app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, tf + off + 1.1 * S, h, [{"rank": i * gpus + 6, "local_rank": 6,
                                                              "exitcode": -6, "pid": rankpid(c, h, 6)}])
        # the site captures job output through journald: every line stamped on arrival, in the node's clock
        stamped, cur = [], c.start + off
        for x in app:
            if x[:4].isdigit():
                cur = t_(x[:19].replace(" ", "T") + "Z") + timedelta(milliseconds=int(x[20:23])) + off
            elif "Got async event" in x:
                cur = T0 + 0.4 * S + off
            elif "NCCL WARN" in x or x.startswith("[rank"):
                cur = tf + off
            stamped.append(f"{cur.isoformat(timespec='microseconds')} {h} python3[{rankpid(c, h, 0)}]: {x}")
        c.add(f"logs/{h}/journal-app", stamped)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 19))
    return c


# --------------------------------------------------------------------------------------
@case
def scancel_by_user():
    nodes = ["node-a", "node-b"]
    c = Case("scancel-by-user",
             ctx("99501", "CANCELLED", "2026-11-23T08:00:00Z", "2026-11-23T08:14:03Z", nodes, "H100",
                 exit_code=0, _nccl_debug="WARN", cluster="h100-iad2"),
             exp("attributed", "scheduler.cancelled", [], ["slurm_cancelled"],
                 why="The user ran scancel at 08:13:40: a plain 'CANCELLED AT ... ***' with no reason, training "
                     "healthy until then, state CANCELLED."))
    Tc = t_("2026-11-23T08:13:40Z")
    gpus = 8
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", Tc, dt=4.0, every=20)
        app += sigterm_tail(c, h, Tc, "99501", None)
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [
            daemon(c, "rfc3164", Tc, h, "slurmstepd", "error: *** STEP 99501.0 ON %s CANCELLED AT "
                   "2026-11-23T08:13:40 ***" % h)], 12))
    c.add("logs/node-a/slurm-99501.out", slurm_out(c, "99501", nodes, c.start + S, [
        "slurmstepd: error: *** JOB 99501 ON node-a CANCELLED AT 2026-11-23T08:13:40 ***",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."]))
    return c


# --------------------------------------------------------------------------------------
@case
def nvswitch_sxid_xid74():
    nodes = ["node-a", "node-b"]
    c = Case("nvswitch-sxid-xid74",
             ctx("99612", "FAILED", "2026-11-24T02:00:00Z", "2026-11-24T02:21:12Z", nodes, "H100",
                 cluster="h100-hgx-lab"),
             exp("attributed", "gpu.nvlink", ["node-a"],
                 why="On node-a (HGX H100) NVSwitch 2 reported fatal SXid 20034 (LTSSM Fault Up) on link 40 and "
                     "the attached GPU logged XID 74 NVLink fatal errors; rank 5's NCCL then failed."))
    T0 = t_("2026-11-24T02:10:33.182004Z")
    gpus, seq = 8, 4471
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=20)
        ev = []
        if h == "node-a":
            pci = PCI["H100"][5]
            ev += [kern(c, "iso", T0, h, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 40 LTSSM "
                                       "Fault Up"),
                   kern(c, "iso", T0, h, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine "
                                       "instance 40 Sub-engine instance 00"),
                   kern(c, "iso", T0 + timedelta(milliseconds=12), h,
                        xid(pci, 74, "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")),
                   kern(c, "iso", T0 + timedelta(milliseconds=12), h,
                        "NVRM: GPU 0000:ab:00.0: NVLink link 14 disabled due to error")]
            p = rankpid(c, h, 5)
            app += [f"{h}:{p}:{p + 140} [5] NCCL WARN Cuda failure 'uncorrectable NVLink error detected during the "
                    "execution'",
                    f"[rank5]:[{glog(T0 + 0.9 * S)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
                    "Process group watchdog thread terminated with exception: CUDA error: uncorrectable NVLink error "
                    "detected during the execution",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 5, "local_rank": 5, "exitcode": -6, "pid": p}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 8, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 12))
    return c


# --------------------------------------------------------------------------------------
@case
def nfs_not_responding():
    nodes = ["node-a", "node-b", "node-c"]
    c = Case("nfs-not-responding",
             ctx("99733", "FAILED", "2026-11-25T13:00:00Z", "2026-11-25T13:22:40Z", nodes, "A100",
                 _nccl_debug="WARN", cluster="a100-lab"),
             exp("attributed", "storage", [], kinds=None,
                 why="The NFS server holding the dataset stopped responding to all three nodes at once; the data "
                     "loaders stalled, a DataLoader timed out on rank 0 and the other ranks hit the watchdog."))
    T0 = t_("2026-11-25T13:11:02.660000Z")
    gpus, seq = 8, 2290
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 3, gpus, "A100", T0, dt=4.5, every=20)
        td = T0 + timedelta(milliseconds=c.rng.randint(0, 900))
        ev = [kern(c, "rfc3164", td, h, "nfs: server 10.100.0.60 not responding, still trying"),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h,
                   "INFO: task python3:%d blocked for more than 120 seconds." % (rankpid(c, h, 0) + 40)),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h,
                   "      Tainted: P           OE     5.15.0-113-generic #123-Ubuntu"),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h,
                   '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h, "task:python3         state:D stack:    0 "
                   "pid:%d ppid:%d flags:0x00004002" % (rankpid(c, h, 0) + 40, rankpid(c, h, 0))),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h, "Call Trace:"),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h, " <TASK>"),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h, " rpc_wait_bit_killable+0x1e/0xb0 [sunrpc]"),
              kern(c, "rfc3164", td + timedelta(seconds=242.5), h, " nfs_file_read+0x6e/0xa0 [nfs]"),
              kern(c, "rfc3164", td + timedelta(seconds=905.1), h, "nfs: server 10.100.0.60 OK")]
        if h == "node-a":
            app += rank_traceback(0, [
                ("/workspace/train.py", 560, "main", "batch = next(train_iter)"),
                ("/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", 1328, "_next_data",
                 "idx, data = self._get_data()"),
                ("/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", 1284, "_get_data",
                 "success, data = self._try_get_data(self._timeout)")],
                "RuntimeError: DataLoader timed out after 300 seconds")
            app += torchrun_failed(c, T0 + 301 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": 1,
                                                        "pid": rankpid(c, h, 0)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 12, "A100"))
    return c


# --------------------------------------------------------------------------------------
@case
def xid48_dbe_row_remap_failure():
    nodes = ["node-a", "node-b"]
    c = Case("xid48-dbe-row-remap-failure",
             ctx("99840", "FAILED", "2026-11-26T05:00:00Z", "2026-11-26T05:20:51Z", nodes, "A100",
                 _nccl_debug="WARN", cluster="a100-lab"),
             exp("attributed", "gpu.memory", ["node-b"], ["xid"],
                 why="A double-bit ECC error (XID 48) on node-b GPU 6 whose row remap then failed (XID 64); the "
                     "rank on it died with 'uncorrectable ECC error encountered'. Earlier correctable-ECC and "
                     "XID 63 row-remap events were the warning signs, not the cause."))
    T0 = t_("2026-11-26T05:09:57.441019Z")
    gpus, seq = 8, 5581
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "A100", T0, dt=4.0, every=20)
        ev = []
        if h == "node-b":
            pci, p = PCI["A100"][6], rankpid(c, h, 6)
            ev += [kern(c, "iso", T0 - 400 * S, h, xid(pci, 63, "Row remapping event: Rows 0x2f1 and 0x2f2 have been "
                                                          "remapped on GPU 00000000:b7:00.0", pid=None)),
                   kern(c, "iso", T0, h, xid(pci, 48, "An uncorrectable double bit error (DBE) has been detected on "
                                                 "GPU in the framebuffer at partition 6, subpartition 0.")),
                   kern(c, "iso", T0 + timedelta(milliseconds=4), h,
                        xid(pci, 64, "Failed to persist row remap table -- GPU may require servicing", pid=None))]
            app += [f"{h}:{p}:{p + 120} [6] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'",
                    f"[rank14]:[{glog(T0 + 0.5 * S)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
                    "Rank 14] Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC "
                    "error encountered",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 14, "local_rank": 6, "exitcode": -6, "pid": p}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 12, "A100"))
    return c


# --------------------------------------------------------------------------------------
@case
def aer_nonfatal_noise_app_error():
    nodes = ["node-a", "node-b"]
    c = Case("aer-nonfatal-noise-app-error",
             ctx("99911", "FAILED", "2026-11-27T10:00:00Z", "2026-11-27T10:17:33Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-iad2"),
             exp("attributed", "app.error", ["node-b"], ["traceback"],
                 why="node-a's NVMe logged AER 'Uncorrected (Non-Fatal)' errors that the device recovered from "
                     "(the job kept training); the job died when rank 11 on node-b raised ValueError on a bad "
                     "config value. 'Non-Fatal' contains 'Fatal': it must not be read as a fatal PCIe error."))
    T0 = t_("2026-11-27T10:06:50.118900Z")
    Ta = T0 - timedelta(seconds=212.4)
    gpus, seq = 8, 2740
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=20)
        ev = []
        if h == "node-a":
            for k in range(2):
                tt = Ta + timedelta(seconds=31.7 * k)
                ev += [kern(c, "iso", tt, h, "pcieport 0000:40:01.1: AER: Uncorrected (Non-Fatal) error received: "
                                             "0000:41:00.0"),
                       kern(c, "iso", tt, h, "nvme 0000:41:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), "
                                             "type=Transaction Layer, (Requester ID)"),
                       kern(c, "iso", tt, h, "nvme 0000:41:00.0:   device [144d:a80a] error status/mask=00004000/00400000"),
                       kern(c, "iso", tt, h, "nvme 0000:41:00.0:    [14] CmpltTO                (First)"),
                       kern(c, "iso", tt + timedelta(milliseconds=3), h, "pcieport 0000:40:01.1: AER: device recovery "
                                                                         "successful")]
        if h == "node-b":
            app += rank_traceback(11, [
                ("/workspace/train.py", 512, "<module>", "main()"),
                ("/workspace/train.py", 402, "main", "scheduler = build_scheduler(cfg.optim, optimizer)"),
                ("/workspace/optim/schedule.py", 58, "build_scheduler", 'raise ValueError(f"unknown lr schedule '
                 '{name!r}; expected one of {sorted(SCHEDULES)}")')],
                "ValueError: unknown lr schedule 'cosine_restart'; expected one of ['constant', 'cosine', 'linear', "
                "'wsd']")
            app += torchrun_failed(c, T0 + 2 * S, h, [{"rank": 11, "local_rank": 3, "exitcode": 1,
                                                      "pid": rankpid(c, h, 3)}])
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 0, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 12))
    return c


# --------------------------------------------------------------------------------------
@case
def xid45_after_app_abort():
    nodes = ["node-a", "node-b"]
    c = Case("xid45-after-app-abort",
             ctx("99952", "FAILED", "2026-11-28T15:00:00Z", "2026-11-28T15:18:02Z", nodes, "H100",
                 _nccl_debug="WARN", cluster="h100-ord3"),
             exp("attributed", "app.error", ["node-a"], ["traceback"],
                 why="Rank 2 on node-a raised RuntimeError (a shape mismatch after a checkpoint reload); when "
                     "torchrun killed the local ranks the driver logged XID 45 (preemptive cleanup) on each of "
                     "their GPUs: XID 45 after an abort is a consequence, not a GPU fault."))
    T0 = t_("2026-11-28T15:07:12.004400Z")
    gpus, seq = 8, 1203
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 2, gpus, "H100", T0, dt=4.0, every=20)
        ev = []
        if h == "node-a":
            app += rank_traceback(2, [
                ("/workspace/train.py", 512, "<module>", "main()"),
                ("/workspace/train.py", 471, "main", "loss = model(batch).loss"),
                ("/workspace/model/mlp.py", 61, "forward", "return self.down(F.silu(self.gate(x)) * self.up(x))")],
                "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8192x4096 and 14336x4096)")
            app += torchrun_failed(c, T0 + 1.5 * S, h, [{"rank": 2, "local_rank": 2, "exitcode": 1,
                                                        "pid": rankpid(c, h, 2)}])
            for dev in range(gpus):
                if dev == 2:
                    continue
                ev.append(kern(c, "iso", T0 + timedelta(seconds=1.9, milliseconds=7 * dev), h,
                               xid(PCI["H100"][dev], 45, "Ch 00000010", pid=rankpid(c, h, dev), name="python3")))
        else:
            tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
            app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,))
            app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": 8, "local_rank": 0, "exitcode": -6,
                                                        "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 12))
    return c


# --------------------------------------------------------------------------------------
@case
def untimed_app_output():
    nodes = ["node-a", "node-b", "node-c"]
    c = Case("untimed-app-output",
             ctx("99987", "FAILED", "2026-11-29T20:00:00Z", "2026-11-29T20:21:10Z", nodes, "H100",
                 cluster="h100-sc2"),
             exp("attributed", "gpu.lost", ["node-c"], ["xid"],
                 why="The application prints instead of logging and runs PyTorch 2.1 (watchdog lines without a "
                     "stamp): apart from one start-up warning its output is untimed; only the kernel log is "
                     "timed, and it shows XID 79 on node-c GPU 0 at 20:10:05."))
    T0 = t_("2026-11-29T20:10:05.771004Z")
    gpus, seq = 8, 7701
    for i, h in enumerate(nodes):
        app, step, last = app_head(c, h, i, 3, gpus, "H100", T0, dt=4.0, every=20)
        # the trainer prints instead of logging: strip the logging stamps
        app = [x[24:].replace("INFO ", "", 1) if x[:4].isdigit() else x for x in app]
        ev = []
        if h == "node-c":
            ev += [kern(c, "rfc3164", T0, h, xid(PCI["H100"][0], 79, "GPU has fallen off the bus.")),
                   kern(c, "rfc3164", T0, h, "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.")]
            p = rankpid(c, h, 0)
            app += [f"{h}:{p}:{p + 90} [0] NCCL WARN Cuda failure 'unknown error'",
                    "[rank16]:[E ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 16] Process group "
                    "watchdog thread terminated with exception: CUDA error: unknown error",
                    "terminate called after throwing an instance of 'c10::DistBackendError'"]
        else:
            for dev in range(gpus):
                app.append(f"[rank{i * gpus + dev}]:[E ProcessGroupNCCL.cpp:616] [Rank {i * gpus + dev}] Watchdog "
                           f"caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, "
                           "NumelOut=1, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.")
            app.append("terminate called after throwing an instance of 'c10::DistBackendError'")
        c.add(f"logs/{h}/stdout", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 12))
    return c


def main(argv: list[str]) -> int:
    names = argv or list(CASES)
    for n in names:
        c = CASES[n]()
        d = c.write(ROOT)
        size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        print(f"{n:36s} {size / 1024:8.1f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
