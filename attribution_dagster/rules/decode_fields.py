"""Decoders: the few things a regex cannot say, registered by name for parsers.yaml.

A decoder gets the regex groups, the text it matched and a mutable draft
(`fields`, `attrs`, optional `node_host`, `excerpt`). It fills in what needs code (code tables,
reading `Fatal` vs `Nonfatal`, exception families) and returns False to veto the match.
Decoders must never raise on odd input: the catalog wraps them anyway, but they are written
to treat every group as optional.
"""

from __future__ import annotations

import json
import re
import signal as _signal
from collections.abc import Callable
from typing import Any

Draft = dict[str, Any]
Decoder = Callable[[dict[str, str | None], str, Draft], bool]

DECODERS: dict[str, Decoder] = {}


def decoder(name: str) -> Callable[[Decoder], Decoder]:
    def register(fn: Decoder) -> Decoder:
        DECODERS[name] = fn
        return fn

    return register


# --- XID -------------------------------------------------------------------------------------

# code -> (mnemonic, subsystem); subsystem lets rules group codes without repeating tables.
XID_TABLE: dict[int, tuple[str, str]] = {
    8: ("FIFO_IDLE_TIMEOUT", "hang"),
    13: ("GR_EXCEPTION", "app"),
    31: ("MMU_ERR_FLT", "app"),
    32: ("PBDMA_ERROR", "app"),
    43: ("RESETCHANNEL_VERIF_ERROR", "secondary"),
    45: ("PREEMPTIVE_REMOVAL", "secondary"),
    46: ("GPU_TIMEOUT_ERROR", "hang"),
    48: ("GPU_ECC_DBE", "memory"),
    62: ("PMU_HALT_ERROR", "driver"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "memory"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "memory"),
    69: ("GR_CLASS_ERROR", "app"),
    74: ("NVLINK_ERROR", "nvlink"),
    79: ("GPU_HAS_FALLEN_OFF_THE_BUS", "bus"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "memory"),
    94: ("CONTAINED_ECC_ERROR", "memory"),
    95: ("UNCONTAINED_ECC_ERROR", "memory"),
    109: ("CTXSW_TIMEOUT_ERROR", "driver"),
    119: ("GSP_RPC_TIMEOUT", "driver"),
    120: ("GSP_ERROR", "driver"),
    121: ("C2C_ERROR", "bus"),
    136: ("ALI_TRAINING_FAIL", "nvlink"),
    137: ("NVLINK_PRIV_ERR", "nvlink"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "memory"),
    143: ("GPU_INIT_ERROR", "driver"),
    144: ("NVLINK_SAW_ERROR", "nvlink"),
    145: ("NVLINK_RLW_ERROR", "nvlink"),
    146: ("NVLINK_TLW_ERROR", "nvlink"),
    147: ("NVLINK_TREX_ERROR", "nvlink"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "nvlink"),
    149: ("NVLINK_NETIR_ERROR", "nvlink"),
    150: ("NVLINK_MSE_ERROR", "nvlink"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "recovery"),
    155: ("NVLINK_SW_DEFINED_ERROR", "nvlink"),
    156: ("RESOURCE_RETIREMENT_EVENT", "memory"),
    157: ("RESOURCE_RETIREMENT_FAILURE", "memory"),
    158: ("GPU_FATAL_TIMEOUT", "hang"),
    162: ("PSHC_REENGAGED", "power"),
    163: ("PSHC_DISENGAGED", "power"),
    164: ("PSHC_LOW_LIFETIME", "power"),
    165: ("PSHC_ZERO_LIFETIME", "power"),
    166: ("NVLINK_SECURE_ERROR", "nvlink"),
    167: ("PCIE_FATAL_TIMEOUT", "bus"),
    168: ("REDUCED_GPU_MEMORY_CAPACITY", "memory"),
    169: ("SEC2_HALT_ERROR", "driver"),
    170: ("NVLINK_SECURE_ERROR_2", "nvlink"),
}

# nvmlDeviceGpuRecoveryAction_t, for XID 154 lines that give only the number.
RECOVERY_ACTIONS = {
    0: "None",
    1: "GPU Reset",
    2: "Node Reboot",
    3: "Drain P2P",
    4: "Drain and Reset",
    5: "Recover IMEX Domain",
    6: "Bus Reset",
    7: "System Reboot",
}

_NONFATAL = re.compile(r"\bNon-?[Ff]atal\b|\bnon-?fatal\b|\bNONFATAL\b|\bNON-FATAL\b")
_FATAL = re.compile(r"\b[Ff]atal\b|\bFATAL\b")
_EVENT = re.compile(r"^\s*([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
_LINK = re.compile(r"\b[Ll]ink (\d{1,3})\b")
_ACTION = re.compile(r"from 0x([0-9a-fA-F]+)(?: \(([^)]*)\))? to 0x([0-9a-fA-F]+)(?: \(([^)]*)\))?")
_GPC = re.compile(r"\bGPC ?(\d+)")
_TPC = re.compile(r"\bTPC ?(\d+)")
_SM = re.compile(r"\bSM ?(\d+)")
_PID = re.compile(r"\bpid=(\d+)")
_NAME = re.compile(r"\bname=([^,]*)")


def read_fatal(text: str) -> bool | None:
    """`Nonfatal`/`Non-Fatal` first, since both contain `Fatal`; None when the line is silent."""
    if _NONFATAL.search(text):
        return False
    if _FATAL.search(text):
        return True
    return None


def _int(s: str | None, base: int = 10) -> int | None:
    if s is None:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


def _link(text: str, draft: Draft) -> None:
    m = _LINK.search(text)
    if m:
        link = int(m.group(1))
        draft["attrs"]["link"] = link
        draft["fields"].setdefault("port", f"link {link}")


_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,4})")


@decoder("xid")
def decode_xid(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Mnemonic from the table, and what the line itself says: fatality, event, link, action."""
    code = draft["fields"].get("code")
    if not isinstance(code, int):
        return False
    rest = groups.get("rest") or ""
    mnemonic, subsystem = XID_TABLE.get(code, ("UNKNOWN", "unknown"))
    attrs = draft["attrs"]
    attrs["mnemonic"] = mnemonic
    attrs["subsystem"] = subsystem
    pid, name = _PID.search(rest), _NAME.search(rest)
    if pid:
        attrs["pid"] = int(pid.group(1))
    if name and name.group(1).strip() not in ("<unknown>", ""):
        attrs["process"] = name.group(1).strip()
    # the message after the optional "pid=..., name=...," prefix
    msg = re.sub(r"^\s*pid=[^,]*,\s*(?:name=[^,]*,\s*)?", "", rest)
    attrs["text"] = msg.strip()[:200]
    attrs["fatal"] = read_fatal(msg)
    ev = _EVENT.match(msg)
    if ev:
        attrs["event"] = ev.group(1)
    _link(msg, draft)
    if code == 154:
        m = _ACTION.search(msg)
        if m:
            to_code = int(m.group(3), 16)
            attrs["action_code"] = to_code
            attrs["action"] = (m.group(4) or RECOVERY_ACTIONS.get(to_code, "unknown")).strip()
            prev = int(m.group(1), 16)
            attrs["previous_action"] = (m.group(2) or RECOVERY_ACTIONS.get(prev, "unknown")).strip()
    caused = _CAUSED_BY.search(msg)
    if caused:  # XID 45 `Ch 00000001 caused by previous Xid 149`: the XID it follows
        attrs["previous_xid"] = int(caused.group(1))
    if code == 13:
        for key, rx in (("gpc", _GPC), ("tpc", _TPC), ("sm", _SM)):
            m = rx.search(msg)
            if m:
                attrs[key] = int(m.group(1))
        detail = re.search(r"\):\s*(.+)$", msg)
        if detail:
            attrs["detail"] = detail.group(1).strip()[:120]
    if code in (94, 95):
        attrs["contained"] = code == 94
    return True


@decoder("sxid")
def decode_sxid(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    rest = groups.get("rest") or ""
    draft["attrs"]["fatal"] = read_fatal(rest)
    draft["attrs"]["text"] = rest.strip()[:200]
    _link(rest, draft)
    return True


@decoder("link")
def decode_link(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """NVLink lines outside XIDs: `link 2` -> attrs.link and port."""
    _link(text, draft)
    return True


# --- NCCL / IB -------------------------------------------------------------------------------

IBV_WC_STATUS = {
    0: "success",
    1: "loc_len",
    2: "loc_qp_op",
    3: "loc_eec_op",
    4: "loc_prot",
    5: "wr_flush",
    6: "mw_bind",
    7: "bad_resp",
    8: "loc_access",
    9: "rem_inv_req",
    10: "rem_access",
    11: "rem_op",
    12: "retry_exceeded",
    13: "rnr_retry",
    14: "loc_rdd_viol",
    15: "rem_inv_rd_req",
    16: "rem_abort",
    17: "inv_eecn",
    18: "inv_eec_state",
    19: "fatal",
    20: "resp_timeout",
    21: "general",
}


@decoder("ib_status")
def decode_ib_status(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    status = draft["attrs"].get("status")
    if isinstance(status, int):
        draft["attrs"]["status_name"] = IBV_WC_STATUS.get(status, "unknown")
    return True


# --- PCIe AER --------------------------------------------------------------------------------


@decoder("aer")
def decode_aer(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Severity; `Non-Fatal` is tested before `Fatal` because it contains it."""
    sev = (groups.get("sev") or groups.get("sev2") or "").lower()
    if "non-fatal" in sev or "nonfatal" in sev:
        draft["attrs"]["severity"] = "nonfatal"
    elif "fatal" in sev:
        draft["attrs"]["severity"] = "fatal"
    elif sev.startswith("correct"):
        draft["attrs"]["severity"] = "corrected"
    else:
        return False
    return True


# --- Python exceptions ------------------------------------------------------------------------

_NOT_EXCEPTIONS = {"LustreError", "NVRM", "Error", "Exception"}
_NCCL_TEXT = re.compile(
    r"NCCL|nccl|communicator|[Ww]atchdog|DistBackendError|DistNetworkError|DistStoreError"
    r"|ProcessGroup|remote process exited|gloo"
)
_IO_ERRNO = re.compile(
    r"Errno (?:5|28|30|107|108|116|122)\b|Input/output error|No space left|Read-only file system"
    r"|Stale file handle|transport endpoint|Disk quota exceeded"
    # torch.save on a full / failing filesystem often says only this (no errno text)
    r"|PytorchStreamWriter failed writing file|unexpected pos \d+ vs \d+"
)
# A CUDA *error* (driver/runtime/library status), not a mere mention of a CUDA device: a
# device-mismatch bug ("found at least two devices, cuda:2 and cpu! ... wrapper_CUDA_mm") or
# "Torch not compiled with CUDA enabled" is the application's own error.
_CUDA_TEXT = re.compile(
    r"CUDA (?:driver |runtime )?error|cuda runtime error|CUDA_ERROR_|cudaError|Cuda failure"
    r"|cuBLAS error|CUBLAS_STATUS_|cuDNN error|CUDNN_STATUS_|AcceleratorError|CUDA kernel errors"
    r"|CUDA-capable device|CUDA call failed"
)
_CUDA_EXC = re.compile(r"cuda", re.IGNORECASE)  # CUDARuntimeError, CudaAPIError, ...
_OOM_TEXT = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUDA driver error: out of memory"
    r"|cuda runtime error \(2\) : out of memory|OutOfMemoryError"
    r"|RESOURCE_EXHAUSTED: Out of memory while trying to allocate"  # JAX / XLA on GPU
)

# Out of HOST memory, whatever the exception's name says: Ray's memory monitor kills a task when
# the node runs low on RAM and raises `ray.exceptions.OutOfMemoryError: Task was killed due to
# the node running low on memory.` (not a GPU OOM).
_HOST_OOM_EXC = re.compile(
    r"^ray\.exceptions\.OutOfMemoryError\b|node running low on memory|RayOutOfMemoryError"
)

# An S3-compatible object store (checkpoints, datasets) that did not answer: botocore's
# connection / timeout exceptions (`Read timeout on endpoint URL: "..."`, `Could not connect to
# the endpoint URL: "..."`) and a ClientError the server itself raised (503 SlowDown,
# ServiceUnavailable, InternalError, RequestTimeout). Credentials, permissions, a missing bucket
# or key are the job's own configuration: app.
_OBJECT_STORE_EXC = {
    "ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError",
}  # fmt: skip
_OBJECT_STORE_SERVER = re.compile(
    r"\((?:SlowDown|ServiceUnavailable|InternalError|RequestTimeout|503)\)"
)


def _object_store(exc_type: str, short: str, message: str) -> bool:
    if not exc_type.startswith(("botocore.", "aiobotocore.")) and "endpoint URL" not in message:
        return False
    if short in _OBJECT_STORE_EXC:
        return True
    return short == "ClientError" and bool(_OBJECT_STORE_SERVER.search(message))


def classify_exception(exc_type: str, message: str) -> str:
    """nccl, host_oom, cuda_oom, cuda, io, object_store, signal, child_failed or app: what the
    exception is about."""
    short = exc_type.rsplit(".", 1)[-1]
    both = f"{exc_type} {message}"
    if short == "ChildFailedError":
        return "child_failed"
    if short in ("SignalException", "KeyboardInterrupt", "SystemExit"):
        return "signal"
    if _HOST_OOM_EXC.search(both):
        return "host_oom"
    if _OOM_TEXT.search(both) and not short.startswith("nccl"):
        return "cuda_oom"
    if short.startswith("nccl") or _NCCL_TEXT.search(both):
        return "nccl"
    if _CUDA_TEXT.search(both) or _CUDA_EXC.search(short):
        return "cuda"
    if _object_store(exc_type, short, message):
        return "object_store"
    if short in ("OSError", "IOError", "FileNotFoundError", "PermissionError", "BlockingIOError"):
        if _IO_ERRNO.search(message):
            return "io"
        return "app"
    if _IO_ERRNO.search(message) and short in ("RuntimeError", "ConnectionError"):
        return "io"
    return "app"


@decoder("exception")
def decode_exception(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    exc = groups.get("exc") or ""
    short = exc.rsplit(".", 1)[-1]
    if short in _NOT_EXCEPTIONS:
        return False
    msg = (groups.get("msg") or "").strip()
    draft["attrs"]["exc_type"] = exc
    draft["attrs"]["message"] = msg[:240]
    draft["attrs"]["family"] = classify_exception(exc, msg)
    errno = re.search(r"\[Errno (\d+)\]", msg)
    if errno:
        draft["attrs"]["errno"] = int(errno.group(1))
    return True


# --- CUDA --------------------------------------------------------------------------------------

_CUDA_ERRORS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"illegal memory access|ILLEGAL_ADDRESS|cudaErrorIllegalAddress"),
        "illegal_address",
    ),
    (re.compile(r"misaligned address|MISALIGNED_ADDRESS"), "misaligned_address"),
    (
        re.compile(r"unspecified launch failure|LAUNCH_FAILED|cudaErrorLaunchFailure"),
        "launch_failure",
    ),
    (re.compile(r"device-side assert|ASSERT\b"), "device_assert"),
    (re.compile(r"illegal instruction|ILLEGAL_INSTRUCTION"), "illegal_instruction"),
    (re.compile(r"launch timed out|LAUNCH_TIMEOUT"), "launch_timeout"),
    (re.compile(r"no CUDA-capable device|NO_DEVICE|driver version is insufficient"), "no_device"),
    (
        re.compile(
            r"busy or unavailable|cudaErrorDevicesUnavailable|CUDA_ERROR_DEVICES_UNAVAILABLE"
            r"|\berror=46\b|CUDA error 46\b"
        ),
        "devices_unavailable",
    ),
    (re.compile(r"initialization error|NOT_INITIALIZED"), "init_error"),
    (re.compile(r"\b999\b|unknown error|CUDA_ERROR_UNKNOWN"), "unknown"),
    (re.compile(r"ECC error|ECC_UNCORRECTABLE"), "ecc_uncorrectable"),
    (re.compile(r"NVLink|NVLINK_UNCORRECTABLE"), "nvlink_uncorrectable"),
]


@decoder("cuda_error")
def decode_cuda_error(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    msg = groups.get("msg") or text
    for rx, name in _CUDA_ERRORS:
        if rx.search(msg):
            draft["attrs"]["error"] = name
            break
    else:
        draft["attrs"]["error"] = "other"
    draft["attrs"]["message"] = msg.strip()[:200]
    return True


# --- launcher / scheduler ----------------------------------------------------------------------


def signal_name(num: int) -> str | None:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return None


@decoder("exit_signal")
def decode_exit_signal(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Negative exit codes (torchrun) are signals; srun `Killed`/`Segmentation fault` too."""
    attrs = draft["attrs"]
    code = attrs.get("exit_code")
    if isinstance(code, int) and code < 0:
        attrs["signal"] = -code
        attrs["signal_name"] = signal_name(-code)
    how = groups.get("how") or ""
    named = {
        "Killed": 9,
        "Terminated": 15,
        "Segmentation fault": 11,
        "Aborted": 6,
        "Bus error": 7,
    }
    for word, num in named.items():
        if how.startswith(word):
            attrs["signal"] = num
            attrs["signal_name"] = signal_name(num)
    if isinstance(code, int) and code > 128 and "signal" not in attrs:
        attrs["signal"] = code - 128
        attrs["signal_name"] = signal_name(code - 128)
    return True


_ROOT = re.compile(r"Root Cause \(first observed failure\)")
_BLOCK_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*?)\s*$")
_SIGNAL_TXT = re.compile(r"Signal (\d+) \((SIG\w+)\)")


@decoder("child_failed")
def decode_child_failed(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Read the torchrun summary block that follows a ChildFailedError line, when present."""
    lines = [strip_prefix(ln) for ln in text.split("\n")]
    start = next((i for i, ln in enumerate(lines) if _ROOT.search(ln)), None)
    attrs = draft["attrs"]
    attrs["failures"] = sum(1 for ln in lines if re.match(r"^\s*\[\d+\]:\s*$", ln))
    if start is None:
        # no root-cause section in view: fall back to the first failure listed, if any
        start = 0
    seen: dict[str, str] = {}
    for ln in lines[start + 1 :]:
        m = _BLOCK_FIELD.match(ln)
        if m and m.group(1) not in seen:
            seen[m.group(1)] = m.group(2)
        if ln.strip().startswith("====") and seen:
            break
    if "host" in seen:
        attrs["host"] = seen["host"]
        draft["node_host"] = seen["host"]
    if "rank" in seen:
        m = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", seen["rank"])
        if m:
            attrs["rank"] = int(m.group(1))
            if m.group(2):
                attrs["local_rank"] = int(m.group(2))
    if "exitcode" in seen:
        m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", seen["exitcode"])
        if m:
            attrs["exit_code"] = int(m.group(1))
            draft["fields"]["code"] = int(m.group(1))
            if m.group(2):
                attrs["pid"] = int(m.group(2))
            if int(m.group(1)) < 0:
                attrs["signal"] = -int(m.group(1))
                attrs["signal_name"] = signal_name(-int(m.group(1)))
    if "traceback" in seen:
        m = _SIGNAL_TXT.search(seen["traceback"])
        if m:
            attrs["signal"] = int(m.group(1))
            attrs["signal_name"] = m.group(2)
    if "time" in seen:
        attrs["failed_at"] = seen["time"]
    parts = [lines[0].strip()] + [f"{k}: {v}" for k, v in seen.items() if k != "error_file"]
    draft["excerpt"] = " | ".join(parts)
    return True


_CANCEL_REASONS = {
    "TIME LIMIT": "time_limit",
    "PREEMPTION": "preemption",
    "NODE FAILURE": "node_failure",
    "JOB REQUEUE": "requeue",
}


@decoder("slurm_cancel")
def decode_slurm_cancel(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    due = (groups.get("due") or "").strip()
    reason = "none"
    for key, name in _CANCEL_REASONS.items():
        if due.startswith(key):
            reason = name
    if due and reason == "none":
        reason = due.lower().replace(" ", "_")[:40]
    draft["attrs"]["reason"] = reason
    return True


_KERNEL_WHAT = [
    ("Kernel panic", "panic"),
    ("soft lockup", "soft_lockup"),
    ("hard LOCKUP", "hard_lockup"),
    ("blocked for more than", "hung_task"),
    ("Machine check events logged", "mce"),
    ("[Hardware Error]", "mce"),
    ("critical temperature reached", "thermal_shutdown"),
]


@decoder("kernel_what")
def decode_kernel_what(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    for needle, what in _KERNEL_WHAT:
        if needle in text:
            draft["attrs"]["what"] = what
            return True
    return False


@decoder("what")
def decode_what(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """attrs.what = the name (without `w_`) of the first `w_*` group that matched, so one
    regex with alternatives says which of them it saw (`(?P<w_driver_not_loaded>...)`)."""
    for name, value in groups.items():
        if value is not None and name.startswith("w_"):
            draft["attrs"]["what"] = name[2:]
            break
    return True


_DISRUPTION = {
    "PreemptionByScheduler": "preempted",
    "PreemptionByKubeScheduler": "preempted",
    "DeletionByTaintManager": "taint",
    "EvictionByEvictionAPI": "eviction_api",
    "DeletionByPodGC": "pod_gc",
    "TerminationByKubelet": "kubelet",
    # Kueue Workload condition reasons
    "PodsReadyTimeout": "pods_ready_timeout",
    "Exceeded the PodsReady timeout": "pods_ready_timeout",
    "InClusterQueue": "preempted",
    "InCohortReclamation": "preempted",
    "InCohortReclaimWhileBorrowing": "preempted",
    "InCohortFairSharing": "preempted",
}


@decoder("k8s_evicted")
def decode_k8s_evicted(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    attrs = draft["attrs"]
    for word, reason in _DISRUPTION.items():
        if word in text:
            attrs["reason"] = reason
            return True
    res = re.search(r"low on resource: (\w[\w-]*)", text)
    if res:
        attrs["reason"] = "node_pressure"
        attrs["resource"] = res.group(1)
        return True
    if re.search(r"\bPreempted\b", text):
        attrs["reason"] = "preempted"
        return True
    attrs["reason"] = "evicted"
    return True


# --- Kubernetes Events (connectors/kube_events.py reads every form) ---------------------------


def _event(groups: dict[str, str | None], text: str, draft: Draft, reasons: frozenset[str]) -> Any:
    """The event of a table row or JSON item when its REASON is one of `reasons`, with the
    common attrs set and the node it is about in `node_host` (EventView.node_name); None
    vetoes the match."""
    from attribution_dagster.core.formats.kube_events import render, view_of_json_text, view_of_row

    if groups.get("ereason"):
        view = view_of_row(groups)
    else:
        view = view_of_json_text(text)
        if view is not None:
            # the event as one row; a pretty-printed item's own first line (`"eventTime":
            # null,`, where its locator points) comes first so the excerpt quotes that line
            first = text.split("\n", 1)[0].strip()
            row = render(view)
            draft["excerpt"] = row if first.startswith("{") else f"{first}\n{row}"
    if view is None or view.reason not in reasons:
        return None
    draft["attrs"].update(view.attrs())
    host = view.node_name()
    if host:
        draft["node_host"] = host
    return view


@decoder("k8s_event_node_down")
def decode_k8s_event_node_down(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """NodeNotReady (node controller, on the Node and on each of its pods) and Rebooted
    (kubelet): attrs.what = not_ready / rebooted."""
    view = _event(groups, text, draft, frozenset({"NodeNotReady", "Rebooted"}))
    if view is None:
        return False
    draft["attrs"]["what"] = "rebooted" if view.reason == "Rebooted" else "not_ready"
    return True


_OOM_VICTIM = re.compile(
    r"(?:victim process: (?P<victim>[^,]{1,200})(?:, pid: (?P<vpid>\d{1,10}))?"
    r"|Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<proc>[^)]{0,200})\))"
)


@decoder("k8s_event_host_oom")
def decode_k8s_event_host_oom(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """SystemOOM (kubelet's OOM watcher: `System OOM encountered, victim process: python,
    pid: 94476`) and OOMKilling (node-problem-detector's kernel monitor, the kernel line as
    message): attrs victim / victim_pid or process / pid."""
    view = _event(groups, text, draft, frozenset({"SystemOOM", "OOMKilling"}))
    if view is None:
        return False
    m = _OOM_VICTIM.search(view.message)
    if m:
        for key, group, conv in (
            ("victim", "victim", str),
            ("victim_pid", "vpid", int),
            ("pid", "pid", int),
            ("process", "proc", str),
        ):
            if m.group(group):
                draft["attrs"][key] = conv(m.group(group).strip())
    return True


@decoder("k8s_event_evicted")
def decode_k8s_event_evicted(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Evicted (kubelet node pressure, Kueue), TaintManagerEviction (`Marking for deletion`;
    `Cancelling deletion` is no eviction) and Preempted (kube-scheduler, Kueue): attrs.reason
    as decode_k8s_evicted reads it from the message."""
    view = _event(groups, text, draft, frozenset({"Evicted", "TaintManagerEviction", "Preempted"}))
    if view is None:
        return False
    if view.reason == "TaintManagerEviction":
        if "Cancelling deletion" in view.message:
            return False
        draft["attrs"]["reason"] = "taint"
        return True
    if view.reason == "Preempted":
        draft["attrs"]["reason"] = (
            "pods_ready_timeout" if "PodsReady timeout" in view.message else "preempted"
        )
        return True
    return decode_k8s_evicted(groups, view.message, draft)


@decoder("k8s_event_disk_pressure")
def decode_k8s_event_disk_pressure(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """NodeHasDiskPressure (kubelet): the node's filesystem fell below the eviction
    threshold. attrs.condition = DiskPressure."""
    if _event(groups, text, draft, frozenset({"NodeHasDiskPressure"})) is None:
        return False
    draft["attrs"]["condition"] = "DiskPressure"
    return True


_IO_WHAT = {
    "d1": "buffer_io",
    "d2": "block_io",
    "d3": "ext4_error",
    "d4": "remount_ro",
    "d5": "nvme_reset",
    "d6": "xfs_error",
    "d7": "offline_device",
    "ro": "remount_ro",
    "eio": "eio",
    "esh": "transport_shutdown",
    "xfs": "xfs_shutdown",
}


@decoder("io_error")
def decode_io_error(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """attrs.what says which I/O failure the line reports; attrs.device where named."""
    for group, what in _IO_WHAT.items():
        val = groups.get(group)
        if val:
            draft["attrs"]["what"] = what
            if group.startswith("d"):
                # an offline SCSI disk: its block name (`[sdc]`) when given, else H:C:T:L
                draft["attrs"]["device"] = (groups.get("d8") or val) if group == "d7" else val
            return True
    return False


_GLOBAL_RANK = re.compile(r"\[rank(\d{1,7})\]:")
_PG_RANK = re.compile(r"\[(?:PG (?:ID )?(\d{1,6})[^\]]{0,200}?)?Rank (\d{1,7})\]")


@decoder("torch_ranks")
def decode_torch_ranks(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """`[rankN]:` is the global rank (torchrun prefix); `[PG x Rank N]` the process-group rank."""
    attrs = draft["attrs"]
    g = _GLOBAL_RANK.search(text)
    if g:
        attrs["global_rank"] = int(g.group(1))
    if "rank" not in attrs:
        r = _PG_RANK.search(text)
        if r:
            attrs["rank"] = int(r.group(2))
            if r.group(1) is not None and "pg" not in attrs:
                attrs["pg"] = int(r.group(1))
    return True


# Log-line prefixes that stand between a line's start and what the application printed:
# ISO / RFC 3164 / dmesg stamps, an optional `host tag[pid]: `, and launcher prefixes: srun's
# `N: ` task label, torchrun's `[rankN]:` / `[defaultN]:`, Ray's `(Name pid=N, ip=A)`, mpirun's
# `[j,r]<stderr>:`, kubectl's `[pod/p/c]`. Bounded quantifiers keep it linear on long lines.
_PREFIX = re.compile(
    r"^(?:(?:\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)?"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
    r"|\[ {0,12}\d{1,12}\.\d{1,9}\])\s{1,4}"
    r"(?:std(?:out|err) [PF] )?"  # CRI container log: stream, partial/full tag
    r"(?:[\w.-]{1,64} [\w./-]{1,64}(?:\[\d{1,10}\])?: )?)?"
    # launcher prefixes (parsers.yaml `origins`): Ray `(Name pid=N, ip=A) `, kubectl
    # `[pod/<pod>/<container>] `, srun `N: `, torchrun `[rankN]:` / `[defaultN]:`, mpirun
    # `[j,r]<stderr>:`, several in a row
    r"(?:\((?:raylet|(?:[A-Za-z_][\w.:-]{0,80} )?pid=\d{1,10})(?:, ip=[0-9A-Fa-f.:]{3,45})?\)\s"
    r"|\[pod/[\w.-]{1,253}/[\w.-]{1,253}\]\s"
    r"|\s{0,6}\d{1,6}: "
    r"|\[(?:rank|default)\d{0,7}\]:\s?"
    r"|\[\d{1,6},\d{1,7}\]<(?:stdout|stderr|stddiag)>:\s?){0,4}"
)


# The message field of a JSON log line (Fluent Bit / docker `log`, Vector `message`, journald
# `MESSAGE`, zap / logrus `msg`): a key right after `{` or `,` (one inside an escaped string
# follows a backslash), its string value with JSON escapes.
_JSON_MSG = re.compile(
    r'[{,]\s{0,4}"(?:log|message|MESSAGE|msg)"\s{0,2}:\s{0,2}"((?:[^"\\]|\\.){0,65536})"'
)


def json_message(line: str) -> str | None:
    """The message of a JSON log line (`{"log": "...", ...}`), unescaped, or None when the
    line is not one. Only lines starting with `{` are looked at."""
    if not line.lstrip(" \t")[:1] == "{":
        return None
    m = _JSON_MSG.search(line)
    if m is None:
        return None
    try:
        msg = json.loads(f'"{m.group(1)}"')
    except ValueError:
        msg = m.group(1)
    return msg.rstrip("\r\n")


def strip_prefix(line: str) -> str:
    """The line without timestamp / host / srun / torchrun prefixes; a JSON log line's
    message field (without its own prefixes)."""
    if line[:1] in "{ \t":
        msg = json_message(line)
        if msg is not None:
            line = msg.split("\n", 1)[0]
    m = _PREFIX.match(line)
    return line[m.end() :] if m and m.end() else line


# --- training progress ---------------------------------------------------------------------------

_STEP = re.compile(
    r"iteration\s{0,12}(?P<it>\d{1,12})\s{0,4}/\s{0,12}(?P<tot>\d{1,12})"  # Megatron / NeMo
    r"|\b(?:global_)?[Ss]teps?\b[\s=:]{1,4}(?P<step>\d{1,12})"  # DeepSpeed, torchtitan, logging
    r"|\b(?P<tq>\d{1,12})/(?P<tqt>\d{1,12}) \[[\d:]{4,12}<"  # tqdm / Lightning counter
)
_LOSS = re.compile(
    r"(?:lm loss|train_loss|'loss'|\bloss)['\"]?(?:\s{0,2}[=:]\s{0,3}|\s{1,2}(?=-?\d))"
    r"(?P<loss>nan|inf|-?[\d.]+(?:[eE][+-]?\d+)?)",
    re.IGNORECASE,
)
_RATE = re.compile(
    r"(?P<rate>[\d.]{1,12})\s?(?P<unit>it/s|s/it)|(?:tokens/s|tps|samples/s(?:ec)?|"
    r"samples_per_second|TFLOPs)[\s=:'\"]{1,4}(?P<tput>[\d.,]{1,16})"
)


@decoder("progress")
def decode_progress(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """A training progress line: step (iteration / step / tqdm counter), loss, throughput.
    Needs a step or a loss (a bare rate is not enough to say the job advanced)."""
    line = text.split("\n", 1)[0][-2000:]  # tqdm lines hold many \r updates: the last counts
    line = line.rsplit("\r", 1)[-1] if "\r" in line else line
    attrs = draft["attrs"]
    found = list(_STEP.finditer(line))
    m = found[-1] if found else None
    if m is not None:
        step = m.group("it") or m.group("step") or m.group("tq")
        total = m.group("tot") or m.group("tqt")
        attrs["step"] = int(step) if step else None
        if total:
            attrs["total"] = int(total)
    lm = _LOSS.search(line)
    if lm:
        try:
            attrs["loss"] = float(lm.group("loss"))
        except ValueError:
            attrs["loss"] = lm.group("loss")
    rm = _RATE.search(line)
    if rm:
        attrs["throughput"] = (rm.group("rate") or rm.group("tput") or "").replace(",", "")
    attrs = {k: v for k, v in attrs.items() if v is not None}
    draft["attrs"] = attrs
    return "step" in attrs or "loss" in attrs


@decoder("peer_ranks")
def decode_peer_ranks(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """The first rank a message names: the peer the engine resolves to a host."""
    first = re.match(r"\d+", groups.get("ranks") or "")
    if first is None:
        return False
    draft["attrs"]["peer_rank"] = int(first.group(0))
    return True


_EVENT_ATTRS = [
    "event_reason", "event_type", "object", "namespace", "source", "first_seen", "last_seen",
    "host", "pod", "logged_on",
]  # fmt: skip

# Attrs each decoder may set (for docs/parsers.md; the catalog adds the regex-mapped ones).
DECODER_ATTRS: dict[str, list[str]] = {
    "xid": [
        "mnemonic", "subsystem", "fatal", "event", "link", "action", "action_code",
        "previous_action", "gpc", "tpc", "sm", "detail", "contained", "pid", "process", "text",
    ],
    "sxid": ["fatal", "link", "text"],
    "link": ["link"],
    "ib_status": ["status_name"],
    "aer": ["severity"],
    "exception": ["exc_type", "message", "family", "errno"],
    "cuda_error": ["error", "message"],
    "exit_signal": ["signal", "signal_name"],
    "child_failed": [
        "host", "rank", "local_rank", "exit_code", "pid", "signal", "signal_name", "failed_at",
        "failures",
    ],
    "slurm_cancel": ["reason"],
    "kernel_what": ["what"],
    "what": ["what"],
    "k8s_evicted": ["reason", "resource"],
    "io_error": ["what", "device"],
    "torch_ranks": ["global_rank", "rank", "pg"],
    "progress": ["step", "total", "loss", "throughput"],
    "peer_ranks": ["peer_rank"],
    "k8s_event_node_down": [*_EVENT_ATTRS, "what"],
    "k8s_event_host_oom": [*_EVENT_ATTRS, "victim", "victim_pid", "process", "pid"],
    "k8s_event_evicted": [*_EVENT_ATTRS, "reason", "resource"],
    "k8s_event_disk_pressure": [*_EVENT_ATTRS, "condition"],
}  # fmt: skip


# --- torchfrtrace (issue 18) -----------------------------------------------------------------
_FR_GROUP = re.compile(r"^\s*group info: (?P<pg>[^:\s]{1,40})", re.M)
_FR_OP = re.compile(r"^\s*collective: (?P<op>\S{1,80})", re.M)
_FR_MISSING = re.compile(r"^\s*missing ranks: \{(?P<ranks>[\d, ]{1,4000})\}", re.M)


@decoder("torchfrtrace_block")
def decode_torchfrtrace_block(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """torchfrtrace's `Not all ranks joining collective ...` block: the following lines say
    `group info: 0:default_pg`, `collective: nccl:all_reduce`, `missing ranks: {1}`. No
    `missing ranks` line in the block: nothing to say (the block was cut)."""
    body = text.split("\n", 9)
    block = "\n".join(body[1:9])
    m = _FR_MISSING.search(block)
    if m is None:
        return False
    attrs = draft["attrs"]
    attrs["ranks"] = m.group("ranks").strip()
    g = _FR_GROUP.search(block)
    if g:
        attrs["pg"] = g.group("pg")
    op = _FR_OP.search(block)
    if op:
        attrs["op"] = op.group("op")
    return True


DECODER_ATTRS["torchfrtrace_block"] = ["ranks", "pg", "op"]
