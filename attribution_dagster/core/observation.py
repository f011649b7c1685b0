"""Normalized, typed events: what the parsers produce and the rules read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from attribution_dagster.core.evidence import TimeQuality
from attribution_dagster.core.locators import Locator, _as_locator

AttrValue = str | int | float | bool | None


class Observation(BaseModel):
    """A normalized, typed event. `kind` is one of OBSERVATION_KINDS."""

    model_config = ConfigDict(frozen=True)

    kind: str
    node: str
    time: datetime | None
    time_quality: TimeQuality = "exact"
    time_latest: datetime | None = None  # untimed lines: latest possible time (None: job end)
    gpu: int | None = None  # GPU index where the line says it (cudaDev, label gpu=)
    pci: str | None = None  # PCI bus id, "0000:91:00"
    port: str | None = None  # NIC / IB port: "mlx5_0/1", "enp1s0f0np0", "Link 01"
    peer: str | None = None  # remote address (NCCL peer)
    code: int | None = None  # XID / SXid / exit code / errno
    attrs: dict[str, AttrValue] = Field(default_factory=dict)
    excerpt: str  # the raw line, trimmed
    source: str
    locator: Locator
    parser: str  # id of the parser that produced it
    # A repeated fact is one fact (issue 16): observations identical in kind, node, GPU,
    # port, fields and attrs are folded into one; `time` / `locator` are the first
    # occurrence's, `time_last` / `locator_last` the last one's (None when count is 1).
    count: int = Field(default=1, ge=1)
    time_last: datetime | None = None
    locator_last: Locator | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


# The vocabulary shared by parsers (producers) and rules (consumers).
OBSERVATION_KINDS: dict[str, str] = {
    # GPU
    "xid": "NVIDIA XID from the kernel log or DCGM (code; attrs: fatal, mnemonic, link, action)",
    "sxid": "NVSwitch SXid (code; attrs: fatal, link)",
    "gpu_lost": "GPU fell off the bus / inaccessible, stated without an XID",
    "nvlink_error": "NVLink fault outside an XID line (link disabled, CUDA uncorrectable NVLink)",
    "nvlink_counter": "NVLink error counter increased (DCGM CRC/replay/recovery)",
    "gpu_ecc_uncorrectable": "uncorrectable ECC / DBE / row-remap failure (CUDA or DCGM)",
    "cuda_error": "CUDA runtime error (attrs.error: illegal_address, launch_failure, ...)",
    "cuda_oom": "CUDA out of memory in the application",
    "gpu_driver_error": "the NVIDIA driver is not loaded / did not initialize the GPUs (kernel "
    "probe failure, nvidia-container-cli cannot reach NVML): attrs.what",
    # network
    "ib_completion_error": "NCCL NET/IB completion error (attrs: status, vendor_err, opcode)",
    "ib_link_down": "NIC / IB port went down (mlx5 Link down, port state, counter)",
    "ib_link_up": "NIC / IB port came back",
    "nic_fatal": "NIC health fault (mlx5 unrecoverable, health compromised, cable error)",
    "pcie_aer": "PCIe AER report (attrs.severity: corrected, nonfatal, fatal)",
    "pcie_link_down": "PCIe link down on a port",
    "nccl_system_error": "NCCL `unhandled system error`",
    "nccl_remote_error": "NCCL `remote process exited or there was a network error`",
    "nccl_abort": "NCCL communicator aborted / NCCL WARN about an abort",
    "nccl_warn": "any other NCCL WARN line",
    "peer_lost": "a connection to a named peer closed or was reset (NCCL socket, Gloo, c10d "
    "store); `peer` names it (IP, IP:port or host name)",
    "node_address": "an address a job node uses, from the job's own logs (NCCL `Bootstrap : "
    "Using <if>:<ip>`, `NET/IB ... OOB <if>:<ip>`); attrs.address: resolves peers",
    "clock_anchor": "a line every node of a job logs at the same true instant (slurmd step "
    "launch, NCCL communicator Init COMPLETE); attrs anchor, key: the engine learns clock offsets",
    # collective / launcher symptoms
    "collective_timeout": "PyTorch NCCL watchdog caught a collective timeout",
    "watchdog_failure": "PyTorch watchdog tore the process down",
    "child_failed": "torchrun ChildFailedError (attrs: exitcode, signal, rank, host)",
    "process_exit": "srun task / elastic agent reports a non-zero exit",
    "traceback": "Python exception (attrs: exc_type, message)",
    "segfault": "process segfault",
    # host
    "host_oom_kill": "kernel OOM killer killed a process",
    "host_memory_low": "host memory nearly exhausted (node_exporter MemAvailable fell below a "
    "small share of MemTotal; attrs.percent)",
    "cgroup_oom": "cgroup / slurmstepd oom-kill event",
    "kernel_panic": "kernel panic / machine check / soft lockup / hung task",
    "node_unreachable": "node not responding / rebooted (from logs of any node)",
    # storage
    "lustre_error": "Lustre error (attrs: rc, target, op)",
    "nfs_error": "NFS server not responding",
    "io_error": "block / filesystem I/O error, read-only remount, NVMe timeout",
    "disk_full": "No space left on device",
    "storage_recovered": "a storage outage cleared: NFS server OK, Lustre connection restored "
    "(attrs.fs: nfs, lustre)",
    # scheduler / orchestrator
    "slurm_cancelled": "slurmstepd CANCELLED line (attrs.reason: time_limit, node_failure, "
    "preemption, requeue, none)",
    "k8s_oom_killed": "Kubernetes container terminated OOMKilled",
    "k8s_evicted": "Kubernetes pod evicted / preempted (attrs.reason)",
    "job_state": "the scheduler's final state, from the execution context (attrs.state)",
    # liveness (issue 9)
    "log_last_line": "the last timed line of one log file: where that source stopped writing",
    "node_silent": "a node stopped writing while the others went on (engine, from "
    "log_last_line); evidence is the last line it wrote",
    "progress": "a training progress line (step / iteration / loss / throughput; attrs.step)",
}
