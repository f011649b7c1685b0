"""Building blocks for the sample cases: real line formats, healthy noise, failure tails.

Every format here is one that real clusters produce (see shared FIELD-FACTS):
rsyslog ISO and RFC 3164 syslog, `dmesg -T`, `journalctl -o short-iso`, Python
`logging`, NCCL `host:pid:tid [cudaDev]` lines, PyTorch glog-style watchdog lines,
torchrun's elastic summary, srun and slurmstepd messages, DCGM exporter metrics.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

UTC = timezone.utc

# PCI bus ids by GPU model, index = cudaDev
PCI = {
    "H100": ["0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
             "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"],
    "A100": ["0000:07:00", "0000:0f:00", "0000:47:00", "0000:4e:00",
             "0000:87:00", "0000:90:00", "0000:b7:00", "0000:bd:00"],
    "GB200": ["0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"],
    "L40S": ["0000:17:00", "0000:31:00", "0000:b1:00", "0000:ca:00"],
}
# IB HCAs and netdevs (mlx5 PCI, netdev) on the usual 8-rail layout
HCAS = [("0000:0c:00.0", "ibp12s0", "mlx5_0"), ("0000:2c:00.0", "ibp44s0", "mlx5_3"),
        ("0000:3c:00.0", "ibp60s0", "mlx5_4"), ("0000:5e:00.0", "ibp94s0", "mlx5_5"),
        ("0000:9c:00.0", "ibp156s0", "mlx5_6"), ("0000:ac:00.0", "ibp172s0", "mlx5_9"),
        ("0000:bc:00.0", "ibp188s0", "mlx5_10"), ("0000:dc:00.0", "ibp220s0", "mlx5_11")]


def t_(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


def ms(t: datetime) -> int:
    return int(round(t.timestamp() * 1000))


class Case:
    """One case directory: context, per-node files, metrics and the expected result."""

    def __init__(self, name: str, ctx: dict, expected: dict, seed: int | None = None):
        self.name = name
        self.ctx = ctx
        self.expected = expected
        self.rng = random.Random(seed if seed is not None else name)
        self.files: dict[str, list] = {}
        self.tz = ZoneInfo(ctx.get("log_timezone", "UTC"))
        self.start = t_(ctx["start"])
        self.end = t_(ctx["end"])
        self.boot: dict[str, datetime] = {}
        self.pids: dict[str, int] = {}
        # many jobs run with NCCL_DEBUG=WARN: no INFO chatter at all
        self.nccl_debug_info = ctx.pop("_nccl_debug", "INFO") == "INFO"

    def local(self, t: datetime) -> datetime:
        """Wall-clock time on the nodes (log_timezone), as processes without an offset print it."""
        return t.astimezone(self.tz)

    # ---- per-host facts -------------------------------------------------
    def uptime(self, host: str, t: datetime) -> str:
        if host not in self.boot:
            self.boot[host] = self.start - timedelta(days=self.rng.randint(3, 60),
                                                     seconds=self.rng.randint(0, 86399))
        d = t - self.boot[host]
        return f"[{d.days * 86400 + d.seconds:5d}.{d.microseconds:06d}]"

    def rank_pid(self, host: str, dev: int) -> int:
        """torchrun starts the local ranks right after itself: consecutive pids above the agent's."""
        key = f"{host}-rank{dev}"
        if key not in self.pids:
            self.pids[key] = self.pid(host + "agent", 1000, 300000) + 9 + dev
        return self.pids[key]

    def pid(self, key: str, lo: int = 2000, hi: int = 400000) -> int:
        if key not in self.pids:
            self.pids[key] = self.rng.randint(lo, hi)
        return self.pids[key]

    # ---- output ---------------------------------------------------------
    def add(self, relpath: str, lines: list) -> None:
        self.files.setdefault(relpath, []).extend(lines)

    def write(self, root: Path) -> Path:
        d = root / self.name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "context.json").write_text(json.dumps(self.ctx, indent=2) + "\n")
        (d / "expected.json").write_text(json.dumps(self.expected, indent=2) + "\n")
        for rel, lines in self.files.items():
            p = d / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            data = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
            if rel.endswith(".gz"):
                # mtime=0 keeps the archives byte-identical across regenerations
                with open(p, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0,
                                                        filename="") as gz:
                    gz.write(data)
            else:
                p.write_bytes(data)
        return d


# ---- timestamp prefixes -------------------------------------------------
def syslog_prefix(c: Case, fmt: str, t: datetime, host: str, proc: str) -> str:
    lt = t.astimezone(c.tz)
    if fmt == "iso":  # rsyslog RSYSLOG_FileFormat
        return f"{lt.isoformat(timespec='microseconds')} {host} {proc}: "
    if fmt == "rfc3164":
        return f"{lt:%b} {lt.day:2d} {lt:%H:%M:%S} {host} {proc}: "
    if fmt == "short-iso":  # journalctl -o short-iso
        return f"{lt:%Y-%m-%dT%H:%M:%S%z} {host} {proc}: "
    if fmt == "dmesgT":
        return f"[{lt:%a %b} {lt.day:2d} {lt:%H:%M:%S %Y}] "
    raise ValueError(fmt)


def kern(c: Case, fmt: str, t: datetime, host: str, msg: str) -> tuple[datetime, str]:
    """A kernel line in the given file format (with the printk uptime stamp where syslog keeps it)."""
    if fmt == "dmesgT":
        return t, syslog_prefix(c, fmt, t, host, "kernel") + msg
    if fmt == "short-iso":
        return t, syslog_prefix(c, fmt, t, host, "kernel") + msg
    return t, syslog_prefix(c, fmt, t, host, "kernel") + f"{c.uptime(host, t)} {msg}"


def daemon(c: Case, fmt: str, t: datetime, host: str, proc: str, msg: str) -> tuple[datetime, str]:
    if fmt == "dmesgT":  # dmesg holds kernel lines only
        return t, ""
    return t, syslog_prefix(c, fmt, t, host, f"{proc}[{c.pid(host + proc, 800, 5000)}]") + msg


def pylog(c: Case, t: datetime, level: str, msg: str, offset: bool = False) -> str:
    lt = t.astimezone(c.tz)
    stamp = f"{lt:%Y-%m-%d %H:%M:%S},{lt.microsecond // 1000:03d}"
    return f"{stamp} {level} {msg}"


def glog(t: datetime, sev: str = "E", nanos: bool = True) -> str:
    """PyTorch C++ log stamp `E1102 10:13:11.123456789` (c10 logging, local time = UTC here)."""
    frac = f"{t.microsecond:06d}" + (f"{(t.microsecond * 7) % 1000:03d}" if nanos else "")
    return f"{sev}{t:%m%d %H:%M:%S}.{frac}"


def kts(t: datetime) -> str:
    """kubectl logs --timestamps prefix (RFC 3339 with nanoseconds)."""
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}{(t.microsecond * 13) % 1000:03d}Z "


def sort_lines(items: list[tuple[datetime, str]]) -> list[str]:
    return [line for _, line in sorted(items, key=lambda x: x[0]) if line]


# ---- healthy noise ------------------------------------------------------
def system_noise(c: Case, host: str, fmt: str, t0: datetime, t1: datetime, n: int,
                 gpu_model: str = "H100") -> list[tuple[datetime, str]]:
    """Chatter every healthy GPU node logs: cron, slurmd, chrony, perf, host ECC CE, AER Corrected."""
    r = c.rng
    out: list[tuple[datetime, str]] = []
    span = max(1.0, (t1 - t0).total_seconds())
    for _ in range(n):
        t = t0 + timedelta(seconds=r.uniform(0, span))
        k = r.randrange(13)
        if k == 0:
            out.append(daemon(c, fmt, t, host, "CRON", "(root) CMD (/usr/sbin/nhc -t 60 >/dev/null 2>&1)"))
        elif k == 1:
            out.append(daemon(c, fmt, t, host, "chronyd",
                              f"Selected source 10.0.0.{r.choice([2, 3])} (ntp{r.choice([1, 2])}.cluster.local)"))
        elif k == 2:
            out.append(daemon(c, fmt, t, host, "systemd", f"Started Session {r.randint(100, 9999)} of User svc-monitor."))
        elif k == 3:
            out.append(kern(c, fmt, t, host, "perf: interrupt took too long (2503 > 2500), lowering "
                            f"kernel.perf_event_max_sample_rate to {r.choice([79750, 63750, 50750])}"))
        elif k == 4:
            ch = r.randint(0, 3)
            out.append(kern(c, fmt, t, host, f"EDAC MC{r.randint(0, 1)}: 1 CE memory read error on "
                            f"CPU_SrcID#0_MC#0_Chan#{ch}_DIMM#0 (channel:{ch} slot:0 page:0x{r.randint(0x10000, 0xfffff):x} "
                            "offset:0x0 grain:32 syndrome:0x0 - err_code:0x0000:0x009f socket:0 imc:0 rank:0 bg:1 "
                            "ba:2 row:0x1c2f col:0x1e0)"))
        elif k == 5:
            t2 = t + timedelta(microseconds=180)
            out.append(kern(c, fmt, t, host, "pcieport 0000:40:01.1: AER: Corrected error received: 0000:41:00.0"))
            out.append(kern(c, fmt, t2, host, "nvme 0000:41:00.0: PCIe Bus Error: severity=Corrected, "
                            "type=Physical Layer, (Receiver ID)"))
            out.append(kern(c, fmt, t2, host, "nvme 0000:41:00.0:   device [144d:a80a] error status/mask=00000001/0000e000"))
            out.append(kern(c, fmt, t2, host, "nvme 0000:41:00.0:    [ 0] RxErr                  (First)"))
        elif k == 6:
            out.append(kern(c, fmt, t, host, "mlx5_core 0000:0c:00.0: mlx5_cmd_out_err:838:(pid "
                            f"{c.pid(host + 'dcgm', 1000, 9000)}): ACCESS_REG(0x805) op_mod(0x1) failed, status bad "
                            "resource(0x5), syndrome (0x305684), err(-22)"))
        elif k == 7:
            out.append(daemon(c, fmt, t, host, "slurmd", "debug:  _handle_node_reg_resp: slurmctld sent back 17 TRES."))
        elif k == 8:
            out.append(daemon(c, fmt, t, host, "nv-hostengine", "DCGM: Updated field watches, 42 fields, 1000000 usec interval"))
        elif k == 9:
            out.append(daemon(c, fmt, t, host, "systemd", "Starting Cleanup of Temporary Directories..."))
        elif k == 10:
            out.append(kern(c, fmt, t, host, "audit: type=1400 audit(%d.%03d:%d): apparmor=\"DENIED\" operation=\"open\" "
                            "class=\"file\" profile=\"snap.lxd.daemon\" name=\"/proc/sys/kernel/keys/maxkeys\" pid=%d "
                            "comm=\"lxd\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0"
                            % (int(t.timestamp()), t.microsecond // 1000, r.randint(1000, 99999), r.randint(2000, 9000))))
        elif k == 11:
            out.append(daemon(c, fmt, t, host, "rasdaemon", "rasdaemon: mce_record store: 0x55b1c2d3e4f0"))
        else:
            out.append(daemon(c, fmt, t, host, "systemd-logind", f"Removed session {r.randint(100, 9999)}."))
    return [x for x in out if x[1]]


def nccl_init(c: Case, host: str, pid: int, dev: int, rank: int, nranks: int, nnodes: int,
              ip: str, gpu_model: str = "H100", brief: bool = False) -> list[str]:
    """NCCL INFO chatter of one rank bringing up its communicator (untimed, as NCCL prints it)."""
    r = c.rng
    tid = pid + r.randint(60, 180)
    dom, b, _ = PCI[gpu_model][dev].split(":")
    bus = f"{int(dom, 16):x}{b}" if int(dom, 16) else b  # NCCL prints busId as a hex int64
    p = f"{host}:{pid}:{pid} [{dev}]"
    q = f"{host}:{pid}:{tid} [{dev}]"
    comm = f"0x{r.getrandbits(44):012x}"
    commid = f"0x{c.rng.getrandbits(63):x}" if not hasattr(c, "_commid") else c._commid
    c._commid = commid
    local = nranks // nnodes
    lines: list[str] = []
    if not brief:
        lines += [f"{p} NCCL INFO Bootstrap : Using ibp12s0:{ip}<0>",
                  f"{p} NCCL INFO cudaDriverVersion 12040",
                  f"{p} NCCL INFO NCCL version 2.21.5+cuda12.4",
                  f"{q} NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object "
                  "file: No such file or directory : when loading libnccl-net.so",
                  f"{q} NCCL INFO NET/Plugin: Using internal network plugin.",
                  f"{q} NCCL INFO NET/IB : Using " + " ".join(f"[{i}]{h[2]}:1/IB" for i, h in enumerate(HCAS))
                  + f" [RO]; OOB ibp12s0:{ip}<0>",
                  f"{q} NCCL INFO Using non-device net plugin version 0",
                  f"{q} NCCL INFO Using network IB"]
    if not brief:
        lines += [f"{q} NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {dev} "
                  f"nvmlDev {dev} busId {bus}000 commId {commid} - Init START"]
        mnnvl = 1 if gpu_model in ("GB200", "GB300") else 0
        lines += [f"{q} NCCL INFO Setting affinity for GPU {dev} to ffff,ffffffff,00000000,0000ffff,ffffffff",
                  f"{q} NCCL INFO comm {comm} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks {local} "
                  f"localRank {dev} MNNVL {mnnvl}"]
        for ch in range(0, 3):
            nxt = (rank + 1) % nranks
            via = "P2P/MNNVL" if mnnvl else ("P2P/CUMEM/read" if nxt // local == rank // local else "NET/IB/0/GDRDMA")
            lines.append(f"{q} NCCL INFO Channel {ch:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % local}] via {via}")
        lines += [f"{q} NCCL INFO Connected all rings",
                  f"{q} NCCL INFO Connected all trees",
                  f"{q} NCCL INFO threadThresholds 8/8/64 | {8 * nranks}/8/64 | 512 | 512",
                  f"{q} NCCL INFO 32 coll channels, 32 collnet channels, {16 if mnnvl else 0} nvls channels, "
                  "32 p2p channels, 32 p2p channels per peer"]
    lines.append(f"{q} NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {dev} "
                 f"nvmlDev {dev} busId {bus}000 commId {commid} localSize 184 used 1344 bytes - Init COMPLETE")
    return lines


def startup(c: Case, t: datetime, host: str, node_idx: int, nnodes: int, gpus: int, ip: str,
            gpu_model: str, script: str = "train.py") -> tuple[list[str], datetime]:
    """torchrun start, Python warnings healthy jobs print, NCCL bring-up of every local rank."""
    lines = [pylog(c, t, "INFO", f"[{script}:88] starting {script} on {host} (node_rank={node_idx}, "
                   f"nproc_per_node={gpus}, world_size={gpus * nnodes})"),
             f"[W{c.local(t):%m%d %H:%M:%S}.{t.microsecond:06d}000 Utils.hpp:135] Warning: Environment variable "
             "NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead "
             "(function operator())",
             "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:1399: FutureWarning: "
             "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.",
             "  with device_autocast_ctx, torch.cpu.amp.autocast(**cpu_autocast_kwargs), recompute_context:  # type: ignore[attr-defined]"]
    for dev in range(gpus if c.nccl_debug_info else 0):  # NCCL_DEBUG=INFO prints the bring-up
        pid = c.rank_pid(host, dev)
        rank = node_idx * gpus + dev
        lines += nccl_init(c, host, pid, dev, rank, gpus * nnodes, nnodes, ip, gpu_model, brief=dev != 0 or node_idx != 0)
    t2 = t + timedelta(seconds=c.rng.uniform(25, 45))
    lines.append(pylog(c, t2, "INFO", f"[{script}:140] model initialised: 8.03B parameters, "
                       "activation checkpointing on, bf16"))
    lines.append(pylog(c, t2 + timedelta(seconds=3.1), "INFO", "[data.py:61] loaded 2048 shards from "
                       "/lustre/datasets/fineweb-edu/v2, 1,294,113,280 tokens"))
    return lines, t2 + timedelta(seconds=6)


def steps(c: Case, t0: datetime, t1: datetime, step0: int, dt: float, every: int = 1,
          script: str = "train.py", mem: float = 61.2) -> tuple[list[str], int, datetime]:
    """Training progress lines from t0 until t1 (exclusive); returns lines, next step, last time."""
    r = c.rng
    lines: list[str] = []
    t, s, last = t0, step0, t0
    loss = 2.9 - step0 * 0.00005
    while t < t1:
        if s % every == 0:
            loss = max(1.4, loss - r.uniform(-0.004, 0.009))
            lines.append(pylog(c, t, "INFO", f"[{script}:412] step {s} | loss {loss:.4f} | lr {3e-4 * min(1, s / 2000):.3e} "
                               f"| grad_norm {r.uniform(0.6, 1.1):.3f} | tokens/s {r.randint(395000, 420000)} | "
                               f"mem {mem + r.uniform(-0.4, 0.4):.1f}GB"))
            last = t
        s += 1
        t += timedelta(seconds=dt * r.uniform(0.97, 1.03))
    return lines, s, last


# ---- failure tails ------------------------------------------------------
def watchdog_timeout(rank: int, t: datetime, seq: int, timeout_ms: int = 600000, optype: str = "ALLREDUCE",
                     numel: int = 1, full: bool | str = True, label: str | None = None) -> list[str]:
    """PyTorch ProcessGroupNCCL watchdog lines for one rank (PyTorch 2.4/2.5 wording)."""
    pre = (f"{label}: " if label else "") + f"[rank{rank}]:[{glog(t)} "
    ran = timeout_ms + (t.microsecond // 1000) % 97
    work = f"WorkNCCL(SeqNum={seq}, OpType={optype}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms})"
    lines = [f"{pre}ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
             f"{work} ran for {ran} milliseconds before timing out."]
    if not full:
        return lines
    if full == "short":  # what most ranks print: the timeout, the take-down notice, the abort
        return lines + [
            f"{pre}ProcessGroupNCCL.cpp:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire "
            "process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'"]
    lines += [
        f"{pre}ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error "
        f"or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 1}, last completed NCCL work: {seq - 1}.",
        f"{pre}ProcessGroupNCCL.cpp:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"{pre}ProcessGroupNCCL.cpp:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
        f"{pre}ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread "
        f"terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran} "
        "milliseconds before timing out.",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c8a2b9446 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x282 (0x7f3c8b5a6772 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3c8b5ad1b3 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
        "frame #3: <unknown function> + 0x94ac3 (0x7f3ce1e94ac3 in /lib/x86_64-linux-gnu/libc.so.6)",
        "",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ]
    return lines


def remote_error(host: str, pid: int, dev: int, rank: int, t: datetime, peer_ip: str, status: int = 5,
                 vendor: int = 244) -> list[str]:
    """Watchdog tear-down after NCCL saw the remote side go away (ncclRemoteError)."""
    tid = pid + 211
    return [
        f"{host}:{pid}:{tid} [{dev}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        f"{peer_ip}<{40000 + pid % 20000}> with status={status} opcode=0 len=0 vendor err {vendor} (Recv) "
        f"localGid ::ffff:{'.'.join(peer_ip.split('.')[:3])}.{10 + dev} remoteGids ::ffff:{peer_ip}",
        f"{host}:{pid}:{tid} [{dev}] NCCL INFO transport/net.cc:1298 -> 6",
        f"{host}:{pid}:{tid} [{dev}] NCCL INFO proxy.cc:698 -> 6",
        f"{host}:{pid}:{tid} [{dev}] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
        f"[rank{rank}]:[{glog(t)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process "
        "group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.21.5",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "Last error:",
        f"NET/IB : Got completion from peer {peer_ip}<{40000 + pid % 20000}> with status={status} opcode=0 len=0 "
        f"vendor err {vendor} (Recv)",
    ]


def torchrun_failed(c: Case, t: datetime, host: str, failures: list[dict], script: str = "train.py",
                    agent_pid: int | None = None, style: str = "glog") -> list[str]:
    """Elastic agent SIGTERM/failed lines, its own traceback, and the ChildFailedError summary.

    failures: [{rank, local_rank, exitcode, pid}] with the first observed failure first.
    """
    ap = agent_pid or c.pid(host + "agent", 1000, 300000)
    first = failures[0]

    def agent(sev: str, tt: datetime, src: str, msg: str) -> str:
        if style == "glog":
            return f"{sev}{tt:%m%d %H:%M:%S}.{tt.microsecond:06d} {ap} torch/distributed/elastic/multiprocessing/{src}] {msg}"
        lvl = {"W": "WARNING", "E": "ERROR", "I": "INFO"}[sev]
        return f"[{tt:%Y-%m-%d %H:%M:%S},{tt.microsecond // 1000:03d}] torch.distributed.elastic.multiprocessing.api: [{lvl}] {msg}"

    lines = []
    local = [c.pids[k] for k in sorted(c.pids) if k.startswith(f"{host}-rank") and c.pids[k] != first["pid"]]
    for p in (local or [first["pid"] + k + 1 for k in range(3)])[:3]:
        lines.append(agent("W", t, "api.py:897", f"Sending process {p} closing signal SIGTERM"))
    lines.append(agent("E", t + timedelta(milliseconds=480), "api.py:869",
                       f"failed (exitcode: {first['exitcode']}) local_rank: {first['local_rank']} (pid: {first['pid']}) "
                       "of binary: /usr/bin/python3"))
    lines += [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", '
        "line 355, in wrapper",
        "    return f(*args, **kwargs)",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 919, in main',
        "    run(args)",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 910, in run',
        "    elastic_launch(",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 138, in __call__',
        "    return launch_agent(self._config, self._entrypoint, list(args))",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{script} FAILED",
        "------------------------------------------------------------",
        "Failures:",
    ]

    def block(i: int, f: dict) -> list[str]:
        ec = f["exitcode"]
        tb = (f"Signal {-ec} ({ {6: 'SIGABRT', 9: 'SIGKILL', 15: 'SIGTERM'}[-ec] }) received by PID {f['pid']}"
              if ec < 0 else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        tt = t + timedelta(milliseconds=400)
        return [f"[{i}]:",
                f"  time      : {tt:%Y-%m-%d_%H:%M:%S}",
                f"  host      : {host}",
                f"  rank      : {f['rank']} (local_rank: {f['local_rank']})",
                f"  exitcode  : {ec} (pid: {f['pid']})",
                "  error_file: <N/A>",
                f"  traceback : {tb}"]

    if len(failures) == 1:
        lines.append("  <NO_OTHER_FAILURES>")
    else:
        for i, f in enumerate(failures[1:], start=1):
            lines += block(i, f)
    lines += ["------------------------------------------------------------",
              "Root Cause (first observed failure):"]
    lines += block(0, first)
    lines.append("============================================================")
    return lines


def xid(pci: str, code: int, text: str, pid: str | int = "'<unknown>'", name: str = "<unknown>") -> str:
    if pid is None:
        return f"NVRM: Xid (PCI:{pci}): {code}, {text}"
    return f"NVRM: Xid (PCI:{pci}): {code}, pid={pid}, name={name}, {text}"


def dcgm_series(host: str, gpu: int, gpu_model: str, uuid: str) -> str:
    model = {"H100": "NVIDIA H100 80GB HBM3", "A100": "NVIDIA A100-SXM4-80GB",
             "GB200": "NVIDIA GB200", "L40S": "NVIDIA L40S"}[gpu_model]
    bus = PCI[gpu_model][gpu]
    dom, b, _ = bus.split(":")
    return (f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="0000{dom}:{b.upper()}:00.0",device="nvidia{gpu}",'
            f'modelName="{model}",Hostname="{host}"')
