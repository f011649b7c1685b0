"""One workload run as its scheduler describes it: the execution context (spec section 1)."""

from __future__ import annotations

import hashlib
import re
from enum import Enum
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

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
MAX_KEY = 64  # a partition key longer than this is cut (the full name is in the metadata)
KEY_HASH_MARK = "~"  # never in a verbatim key: a cut or cleaned key cannot equal one


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
    """Dagster partition key of a job: `<cluster>.<job_id>`, short, stable and unique.

    A key of safe characters (letters, digits, `_.-`) up to MAX_KEY long is kept as it is
    (`gb200-nvl72-east.4812`). Any other key (a Kueue `namespace/name`, a Slurm `4812+1`, a
    very long name) is cleaned and cut to MAX_KEY, keeping the end of the job id, and ends
    in `~` and 8 hex digits of the exact name: `c.team-llm_pretrain-7b~3f9a0c1e`. Distinct
    names never share a key (`a/b` and `a_b` used to), and the same name always gets the
    same one. The cluster is never cut: a key's cluster is what precedes its first `.`."""
    full = f"{cluster or 'default'}.{job_id}"
    if len(full) <= MAX_KEY and not _UNSAFE_KEY_CHARS.search(full) and "..." not in full:
        return full
    cluster = _UNSAFE_KEY_CHARS.sub("_", cluster or "default").replace(".", "_")
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    clean = _UNSAFE_KEY_CHARS.sub("_", job_id).replace("..", "._")
    room = max(MAX_KEY - len(cluster) - 2 - len(digest), 8)
    return f"{cluster}.{clean[-room:].lstrip('.')}{KEY_HASH_MARK}{digest}"
