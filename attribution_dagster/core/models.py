"""Typed models shared by connectors, the normalizer, the rule engine, sinks and assets.

Every boundary of the pipeline passes one of these:

    ExecutionContext -> RawEvidence (RawRecord, MetricSample, SourceCoverage)
                     -> list[Observation] -> AttributionResult

Only pydantic is imported here so that every layer can depend on this module.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

RESULT_SCHEMA_VERSION = "1"

CONTRACT_FIELDS = frozenset(
    {
        "job_id",
        "failed",
        "status",
        "category",
        "candidates",
        "suspect_nodes",
        "symptom_chain",
        "evidence",
        "rules_version",
    }
)
"""Top-level fields every result must carry (spec section 2); more fields are welcome."""


_IP_ADDRESS = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*)$")


def short_host(name: str) -> str:
    """The key two spellings of one host share: `gpu-017.cluster.local` and `GPU-017` -> `gpu-017`.
    An IP address is kept whole (`10.1.0.12` is not `10`); host names compare case-insensitively."""
    name = name.strip().lower()
    if _IP_ADDRESS.match(name):
        return name
    return name.split(".", 1)[0]


class JobState(str, Enum):
    """Final job state, in Slurm's vocabulary (the spec maps every scheduler onto it)."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"


Scheduler = Literal["slurm", "kueue", "static", "kai"]


class PodRef(BaseModel):
    """Where one pod of a Kubernetes job ran (Kueue connector, pod placement record)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    namespace: str
    name: str
    node: str | None = None  # spec.nodeName
    host_ip: str | None = None
    pod_ip: str | None = None
    containers: list[str] = Field(default_factory=list)
    restarts: int = 0
    started: AwareDatetime | None = None

_UNSAFE_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


class ExecutionContext(BaseModel):
    """One workload run: who ran where, when, and how it ended (spec section 1)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    job_id: str = Field(min_length=1)
    scheduler: Scheduler
    cluster: str | None = None
    state: JobState
    exit_code: int | None = None
    start: AwareDatetime
    end: AwareDatetime
    nodes: list[str] = Field(min_length=1)
    gpu_model: str | None = None
    log_timezone: str = "UTC"
    node_addresses: dict[str, list[str]] = Field(
        default_factory=dict,
        description="node -> IP addresses / other names it answers to (peers in errors)",
    )
    # Optional detail a scheduler connector fills in; a static context may carry it too.
    gpus_per_node: int | None = Field(default=None, ge=0)
    job_name: str | None = None
    partition: str | None = None
    user: str | None = None
    account: str | None = None
    reason: str | None = Field(
        default=None, description="the scheduler's own words: 'CANCELLED by 1000', eviction message"
    )
    failing_step: str | None = Field(default=None, description="Slurm step / pod that failed first")
    stdout_path: str | None = Field(default=None, description="job stdout, as Slurm recorded it")
    stderr_path: str | None = None
    pods: list[PodRef] = Field(
        default_factory=list, description="Kubernetes jobs: the pods and where they ran"
    )
    case_dir: str | None = Field(
        default=None, description="a case directory holding this job's logs/ and metrics/"
    )

    @property
    def failed(self) -> bool:
        return self.state is not JobState.COMPLETED or self.exit_code not in (None, 0)

    @property
    def partition_key(self) -> str:
        return job_partition_key(self.cluster, self.job_id)


def job_partition_key(cluster: str | None, job_id: str) -> str:
    """Dagster partition key of a job: `<cluster>.<job_id>` with only safe characters."""
    return _UNSAFE_KEY_CHARS.sub("_", f"{cluster or 'default'}.{job_id}")


TimeQuality = Literal["exact", "inherited", "unknown"]
"""`exact`: the line carried its own timestamp; `inherited`: taken from the nearest earlier
timed line of the same file; `unknown`: no timed line before it in the file.

An untimed line is an interval: written at or after `time` (the earlier timed line) and at or
before `time_latest` (the next timed line of the same file; None: the job / file end). A log
store's count per bucket (Loki `count_over_time`) gives the same shape: `inherited`, the
bucket's start and end."""


class Anchor(BaseModel):
    """A literal that a parser needs to see in a line; scanners prefilter on the union.

    `context_after` asks the scanner to append that many following lines to the record
    (for multi-line blocks such as torchrun's ChildFailedError summary).
    """

    model_config = ConfigDict(frozen=True)

    literal: str = Field(min_length=3)
    context_after: int = Field(default=0, ge=0, le=40)
    # not a prefilter hit: the scanner keeps only the LAST line of each file holding it
    # (training progress lines are a large share of a log; the engine needs where they stop)
    last_only: bool = False


class Window(BaseModel):
    """The time range evidence is read for: [job start - lead, job end + lag]."""

    model_config = ConfigDict(frozen=True)

    start: AwareDatetime
    end: AwareDatetime

    def contains(self, t: datetime) -> bool:
        return self.start <= t <= self.end


class AnalysisSettings(BaseModel):
    """Knobs shared by the CLI and the Dagster resources; defaults suit most clusters."""

    model_config = ConfigDict(frozen=True)

    lead_seconds: float = Field(
        default=120.0, ge=0, description="read evidence this long before start"
    )
    lag_seconds: float = Field(default=60.0, ge=0, description="and this long after end")
    skew_seconds: float = Field(default=5.0, ge=0, description="clock skew tolerated between nodes")
    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")
    workers: int | None = Field(default=None, description="scanner processes; None = all cores")

    def window(self, ctx: ExecutionContext) -> Window:
        from datetime import timedelta

        return Window(
            start=ctx.start - timedelta(seconds=self.lead_seconds),
            end=ctx.end + timedelta(seconds=self.lag_seconds),
        )


# --- locators: where a line or sample can be reopened ----------------------------------------
# A locator is typed from the moment a connector reads a line until the result is written, so
# nothing downstream parses a `path:line` string back (which file, which line, which query).
# It renders as the contract string (spec section 2: `logs/node-b/kern.log:32`, a LogQL or
# PromQL query plus its time) only at the edge: `str(locator)` / `locator.render()`.


class _LocatorBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    def render(self) -> str:  # pragma: no cover - every variant overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.render()

    @property
    def stream(self) -> str:
        """What the located line belongs to, the same for every line of it: a file, a log
        store's stream or query, a pod's container log (parsers group a stream's lines)."""
        raise NotImplementedError  # pragma: no cover

    @property
    def position(self) -> int | None:
        """Where in its stream, when lines of one stream can be ordered by it (file line)."""
        return None


class FileLine(_LocatorBase):
    """A line of a file: `root` is the case or root directory it was read under (so a person
    knows which case a line is in), `path` the file as shown (relative to a case directory,
    `logs/node-b/kern.log`; a shared root's files by their absolute path), `line` its line
    number (1-based), or `field` a named field instead of a line (`context.json:state`)."""

    type: Literal["file"] = "file"
    root: str | None = None
    path: str
    line: int | None = Field(default=None, ge=0)
    field: str | None = None

    def render(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}"
        return f"{self.path}:{self.field}" if self.field else self.path

    @property
    def stream(self) -> str:
        return self.path

    @property
    def position(self) -> int | None:
        return self.line


class QueryAt(_LocatorBase):
    """A LogQL or PromQL query and the time of the line / sample it returned (Unix ns):
    paste the query into Grafana Explore around that time to see it again."""

    type: Literal["query"] = "query"
    language: Literal["logql", "promql"]
    query: str
    at_ns: int

    def render(self) -> str:
        if self.language == "logql":
            return f"{self.query} @ns:{self.at_ns}"
        return f"promql: {self.query} @ {_seconds(self.at_ns)}"

    @property
    def stream(self) -> str:
        return self.query

    @property
    def position(self) -> int | None:
        # a log store's lines of one stream are ordered by time; this is what the `@ns:`
        # suffix of the rendered form carried before locators were typed
        return self.at_ns if self.language == "logql" else None


def _seconds(ns: int) -> str:
    """Unix ns as Prometheus prints a timestamp: seconds, up to 3 decimals, no trailing 0."""
    sec, ms = divmod(round(ns / 1_000_000), 1000)
    return f"{sec}.{ms:03d}".rstrip("0").rstrip(".")


class KubeObject(_LocatorBase):
    """A Kubernetes object read through the API: a pod's container log (`field`: the kubelet
    timestamp of the line, or `line N` when it had none) or an Event (`kubectl get event -n
    <namespace> <name> -o yaml` reopens it)."""

    type: Literal["k8s"] = "k8s"
    kind: Literal["pod_log", "event"]
    namespace: str
    name: str
    container: str | None = None
    previous: bool = False
    field: str | None = None

    def render(self) -> str:
        if self.kind == "event":
            return f"event {self.namespace}/{self.name}"
        out = f"pod {self.namespace}/{self.name} container {self.container}"
        out += " previous" if self.previous else ""
        return f"{out} @ {self.field}" if self.field else out

    @property
    def stream(self) -> str:
        if self.kind == "event":
            return "events"
        return f"pod {self.namespace}/{self.name} container {self.container}" + (
            " previous" if self.previous else ""
        )


class Note(_LocatorBase):
    """A locator known only as text: an observation made up for an example or a test, whose
    line was never read from a source. Rendered as given; it has no file, line or query, and
    no connector produces one (the conformance suite checks that)."""

    type: Literal["note"] = "note"
    text: str

    def render(self) -> str:
        return self.text

    @property
    def stream(self) -> str:
        return self.text


Locator = Annotated[FileLine | QueryAt | KubeObject | Note, Field(discriminator="type")]
"""Where a record, sample or observation can be reopened (a pydantic discriminated union)."""


def _as_locator(data: Any) -> Any:
    """Model input with a bare-text `locator` wrapped as a Note (never parsed: text given for
    a line no source read, in examples and tests, stays opaque)."""
    if isinstance(data, dict) and isinstance(data.get("locator"), str):
        return {**data, "locator": Note(text=data["locator"])}
    return data


class RawRecord(BaseModel):
    """One log line (plus requested continuation lines) that passed the prefilter."""

    model_config = ConfigDict(frozen=True)

    source: str  # "files", "loki", "k8s_pods", ...
    node: str
    locator: Locator  # logs/node-b/kern.log:1532 (FileLine), a LogQL query plus time (QueryAt)
    time: datetime | None
    time_quality: TimeQuality = "exact"
    time_latest: datetime | None = None  # untimed lines: the next timed line's time (upper bound)
    text: str  # the line; continuation lines follow after "\n" when an anchor asked for them
    stream: str = ""  # file name or stream label ("kern.log", "stdout"); hints system vs app output
    # the last timed line of its file (not a prefilter hit): where the source stops writing
    last_of_file: bool = False

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


class MetricSample(BaseModel):
    """One sample of a Prometheus series, from a `.prom` file or a PromQL query."""

    model_config = ConfigDict(frozen=True)

    source: str  # "files", "prometheus"
    node: str
    locator: Locator  # metrics/dcgm.prom:12 (FileLine), or a PromQL query plus time (QueryAt)
    time: datetime
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float = Field(allow_inf_nan=False)  # JSON has no NaN / inf: it would come back null

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


CoverageStatus = Literal["ok", "partial", "failed", "empty"]


class SourceCoverage(BaseModel):
    """What one evidence source delivered, so a result can say what it did not see."""

    source: str  # "files:logs", "files:metrics", "prometheus", "loki", ...
    status: CoverageStatus = "ok"
    nodes_read: list[str] = Field(default_factory=list)
    nodes_missing: list[str] = Field(default_factory=list)
    pods_read: list[str] = Field(default_factory=list)  # Kubernetes pod logs: `ns/pod`
    pods_missing: list[str] = Field(default_factory=list)  # pods gone (404) or unreadable
    files: int = 0
    queries: int = 0  # requests made to a back-end (Loki, Prometheus, Kubernetes API)
    bytes: int = 0  # bytes read from files or received from a back-end
    lines: int = 0
    samples: int = 0
    records: int = 0  # lines or samples kept as raw evidence
    out_of_window: int = 0
    invalid_utf8_lines: int = 0
    overlong_lines: int = 0
    binary_lines: int = 0
    files_skipped: int = 0  # rotated files whose time span cannot overlap the window: not read
    context_lines: int = 0  # cluster-level lines naming no job node: context only, not kept
    errors: list[str] = Field(default_factory=list)
    retryable: bool = Field(
        default=False, description="the failure was transient (timeout, 429, 5xx): retry may help"
    )

    @property
    def problems(self) -> int:
        return self.invalid_utf8_lines + self.overlong_lines + self.binary_lines


class LogBatch(BaseModel):
    """What one log source returns for one job (the LogSource contract, connectors/base.py).

    `tails` and `progress` are state the engine relies on (its silence and progress tests),
    so they are first-class serialized fields here and on RawEvidence, never hidden inside
    coverage: a Dagster asset that stores raw evidence and reads it back sees them too.
    """

    records: list[RawRecord] = Field(default_factory=list)
    tails: list[RawRecord] = Field(
        default_factory=list,
        description="the last timed line of each file read (Loki: the last bucket with lines "
        "of each stream, an interval; pod logs: each container log's last line, not for a log "
        "cut at max_bytes_per_pod): where each source stopped writing (engine: silence)",
    )
    progress: list[RawRecord] = Field(
        default_factory=list,
        description="the last line of each file holding a `last_only` anchor (training "
        "progress; Loki: each node's last ones): where the job stopped advancing",
    )
    coverage: SourceCoverage

    def pair(self) -> tuple[list[RawRecord], SourceCoverage]:
        """(records, coverage), for callers that look at neither tails nor progress."""
        return self.records, self.coverage


class RawEvidence(BaseModel):
    """Everything fetched for one job: prefiltered lines, where each file stops (`tails`)
    and where training progress stops (`progress`), metric samples and coverage."""

    job_id: str
    records: list[RawRecord] = Field(default_factory=list)
    tails: list[RawRecord] = Field(default_factory=list)
    progress: list[RawRecord] = Field(default_factory=list)
    samples: list[MetricSample] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)


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


Role = Literal["root_cause", "symptom"]
Status = Literal["attributed", "ambiguous", "unattributed", "not_failed"]

CATEGORIES: dict[str, str] = {
    "gpu.nvlink": "NVLink / NVSwitch fault",
    "gpu.memory": "uncorrectable GPU memory error",
    "gpu.lost": "GPU fell off the bus or became inaccessible",
    "gpu.driver": "GPU firmware / driver fault",
    "network.fabric": "InfiniBand / RoCE / Ethernet fabric fault",
    "node.down": "node became unreachable, crashed or was marked failed",
    "node.host_oom": "host kernel OOM killer ended the workload",
    "storage": "filesystem or disk fault",
    "app.gpu_oom": "the application ran out of GPU memory",
    "app.error": "the application failed on its own",
    "scheduler.time_limit": "the job hit its time limit",
    "scheduler.cancelled": "the job was cancelled or preempted",
}


class Evidence(BaseModel):
    """A pointer back to the raw line or query: `locator` reopens it (the contract string,
    spec section 2); `ref` is the same place typed (file and line, query and time, object)."""

    source: str
    locator: str
    ref: Locator | None = None
    time: datetime | None
    node: str
    excerpt: str
    time_latest: datetime | None = None  # an untimed line: logged between `time` and this


class ChainLink(BaseModel):
    time: datetime | None
    node: str
    kind: str
    role: Role
    summary: str
    evidence: Evidence
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None
    count: int = 1  # identical observations folded into this link
    time_quality: TimeQuality = "exact"  # "inherited": the line had no time; it was logged after
    # an untimed line is an interval: `time` is its earliest possible time, this the latest
    time_latest: datetime | None = None


class Candidate(BaseModel):
    category: str
    nodes: list[str]
    score: float
    rule: str | None = None
    summary: str | None = None


class Suspect(BaseModel):
    node: str
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None


class AttributionResult(BaseModel):
    """The result contract of spec section 2, plus optional detail fields."""

    job_id: str
    failed: bool
    status: Status
    category: str | None
    candidates: list[Candidate] = Field(default_factory=list)
    suspect_nodes: list[str] = Field(default_factory=list)
    symptom_chain: list[ChainLink] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    rules_version: str
    # optional detail
    cluster: str | None = None
    state: str | None = None
    confidence: float | None = None
    rule: str | None = None
    summary: str | None = None
    scope: Literal["node", "shared"] | None = None  # shared: switch / storage, not a node fault
    suspects: list[Suspect] = Field(default_factory=list)
    remediation: str | None = None
    notes: list[str] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)
    analyzed_at: datetime | None = None

    def contract_json(self, **kwargs: Any) -> str:
        return self.model_dump_json(**kwargs)
