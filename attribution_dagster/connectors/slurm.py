"""Slurm scheduler connector: finished jobs and their execution context from accounting.

Two transports, chosen by `transport` in the cluster's scheduler block:

- `sacct` (default): runs `sacct --parsable2 --noheader` with an explicit field list, in UTC
  (`TZ=UTC`, ISO times), once for the allocations (`-X`) and once for the steps of the jobs
  that did not complete (to name the failing step). Fields a Slurm version lacks (`StdOut`,
  `StdErr` arrived in sacct 24.05) are dropped after sacct rejects them, and the job's
  output paths then come from `scontrol show job` while slurmctld still remembers the job
  (MinJobAge). Node addresses come from one `scontrol show node` call.
- `slurmrestd`: the slurmdbd job endpoints over HTTP with a JWT, for dbv0.0.38 (22.05) and
  v0.0.39-v0.0.42 (23.02-25.11). 22.05 reports wrong exit codes in JSON (every job
  `SUCCESS`/0); for that version the connector asks slurmctld's `/slurm/v0.0.38/jobs`
  (raw wait status) while it still knows the job, and otherwise leaves the exit code unset
  rather than report a false 0 for a failed job.

Both transports produce the same intermediate `SlurmJob` records, turned into
ExecutionContexts by one function, so states, arrays (`123_4`), heterogeneous jobs (`123+0`,
merged into one context `123`), exit codes and paths mean the same whatever the transport.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import quote

from pydantic import Field

from attribution_dagster.connectors.base import (
    BackendConfig,
    JobNotFound,
    JobQuery,
    SchedulerError,
    utc_now,
)
from attribution_dagster.models import ExecutionContext, JobState

# --------------------------------------------------------------------------- hostlists

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(expr: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside brackets: `a[1,2],b` -> [`a[1,2]`, `b`]."""
    out, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {expr!r}")
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {expr!r}")
    out.append("".join(cur))
    return out


def _expand_ranges(body: str, expr: str) -> list[str]:
    """`001-003,010` -> [`001`, `002`, `003`, `010`]; the low bound's width sets the padding."""
    values: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise ValueError(f"bad range {part!r} in hostlist {expr!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"descending range {part!r} in hostlist {expr!r}")
        if int(hi) - int(lo) > 1_000_000:
            raise ValueError(f"range {part!r} in hostlist {expr!r} is too large")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return values


def expand_hostlist(expr: str | None) -> list[str]:
    """Slurm's compressed host list to names, in order, without duplicates.

    `gpu-[001-004,010],dgx7` -> gpu-001..gpu-004, gpu-010, dgx7; several bracket groups in
    one name multiply (`a[1-2]-b[3-4]` -> a1-b3, a1-b4, a2-b3, a2-b4). Empty input and
    Slurm's placeholders (`None assigned`, `(null)`) give []. ValueError on a malformed
    expression. (python-hostlist does this too but is GPL-2.0, this project is Apache-2.0.)
    """
    if expr is None:
        return []
    expr = expr.strip()
    if not expr or expr in ("None assigned", "(null)", "None", "N/A"):
        return []
    names: list[str] = []
    seen: set[str] = set()
    for item in _split_top(expr):
        item = item.strip()
        if not item:
            continue
        partial = [""]
        pos = 0
        for m in re.finditer(r"\[([^\]]*)\]", item):
            prefix = item[pos : m.start()]
            if "[" in prefix or "]" in prefix:
                raise ValueError(f"nested brackets in hostlist {expr!r}")
            values = _expand_ranges(m.group(1), expr)
            partial = [p + prefix + v for p in partial for v in values]
            pos = m.end()
        tail = item[pos:]
        if "[" in tail or "]" in tail:
            raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
        for p in partial:
            name = p + tail
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


# --------------------------------------------------------------------------- states

# Slurm's final job states -> the context vocabulary. Anything not listed is not final
# (PENDING, RUNNING, REQUEUED, RESIZING, SUSPENDED, REVOKED, ...) and is not listed.
STATE_MAP: dict[str, JobState] = {
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "NODE_FAIL": JobState.NODE_FAIL,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "PREEMPTED": JobState.PREEMPTED,
    # a node failed to boot for the job: an infrastructure failure like NODE_FAIL
    "BOOT_FAIL": JobState.NODE_FAIL,
    # the job hit its --deadline: a time limit
    "DEADLINE": JobState.TIMEOUT,
    # the job ended in a state an admin or script reserved for requeue-and-hold on error
    "SPECIAL_EXIT": JobState.FAILED,
    # the launch of the batch script failed (a slurmd or prolog problem on the node)
    "LAUNCH_FAILED": JobState.FAILED,
}
STATE_CODES = {  # sacct's short state names, accepted on input
    "CD": "COMPLETED", "F": "FAILED", "CA": "CANCELLED", "TO": "TIMEOUT", "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY", "PR": "PREEMPTED", "BF": "BOOT_FAIL", "DL": "DEADLINE",
    "SE": "SPECIAL_EXIT", "RQ": "REQUEUED", "R": "RUNNING", "PD": "PENDING",
}  # fmt: skip


def map_state(raw: str | None) -> tuple[JobState | None, str | None]:
    """`CANCELLED by 1000` -> (CANCELLED, 'CANCELLED by 1000'); `RUNNING` -> (None, None).

    The second value is the words worth keeping as ctx.reason: the raw text whenever it
    says more than the bare state, or names a state that was mapped to another one.
    """
    text = (raw or "").strip()
    if not text:
        return None, None
    base = text.split()[0].rstrip("+").upper()
    base = STATE_CODES.get(base, base)
    state = STATE_MAP.get(base)
    if state is None:
        return None, None
    keep = text if (text != base or state.value != base) else None
    return state, keep


# The final states `sacct --state` accepts (22.05-25.11); it is fatal on SPECIAL_EXIT
# ("job state SPECIAL_EXIT is not supported / accounted") and LAUNCH_FAILED.
FILTERABLE_STATES = (
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE",
)  # fmt: skip


def _states_for(wanted: Iterable[JobState]) -> list[str]:
    """Slurm state names that map to any of `wanted`, for sacct --state / the REST filter
    (the result is filtered again locally, which also catches the unfilterable states)."""
    want = set(wanted)
    names = [name for name in FILTERABLE_STATES if STATE_MAP[name] in want]
    return names


# --------------------------------------------------------------------------- small parsers


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """sacct's `N:M` (exit code N, signal M) -> (N, M); empty or odd text -> (None, None)."""
    m = re.match(r"^\s*(\d+):(\d+)\s*$", text or "")
    if not m:
        return None, None
    return int(m.group(1)), int(m.group(2))


def context_exit_code(code: int | None, signal: int | None) -> int | None:
    """One integer for ctx.exit_code: the exit code, or 128+signal (shell convention) when
    the process was killed by a signal and left no exit code of its own."""
    if code:
        return code
    if signal:
        return 128 + signal
    return code


def decode_wait_status(status: int | None) -> tuple[int | None, int | None]:
    """A raw wait(2) status as slurmctld stores it (768 -> exit 3; 9 -> signal 9)."""
    if status is None or status < 0 or status >= 0xFFFFFFFE:
        return None, None
    return (status >> 8) & 0xFF, status & 0x7F


_GPU_TRES = re.compile(r"(?:^|,)gres/gpu(?::([^=,]+))?=(\d+)")


def gpus_from_tres(tres: str | None) -> tuple[int | None, str | None]:
    """AllocTRES `cpu=8,gres/gpu=8,gres/gpu:a100=8,node=1` -> (8, 'a100').

    The untyped `gres/gpu=N` is the total; a typed entry names the model (and gives the
    total when the untyped one is missing)."""
    total: int | None = None
    model: str | None = None
    typed = 0
    for m in _GPU_TRES.finditer(tres or ""):
        if m.group(1):
            model = model or m.group(1)
            typed += int(m.group(2))
        else:
            total = int(m.group(2))
    if total is None and typed:
        total = typed
    return total, model


def per_node(total: int | None, nodes: int) -> int | None:
    if total is None or nodes <= 0:
        return None
    return math.ceil(total / nodes)


_PATTERN = re.compile(r"%(\d*)([%AajJNnstuxb])")


def expand_output_pattern(
    pattern: str | None,
    *,
    job_id: str,
    job_name: str | None = None,
    user: str | None = None,
    first_node: str | None = None,
    array_job_id: str | None = None,
    array_task_id: str | None = None,
    workdir: str | None = None,
) -> str | None:
    """Slurm's `--output` pattern to the file the batch step wrote (`%j %x %u %N %A %a ...`).

    `%j` is the job's own id (the raw id for an array task), `%A`/`%a` the array's job id
    and task id, `%N` the first node, `%s`/`%t`/`%n` the batch step's (`batch`, 0, 0); a
    number after `%` zero-pads. A relative path is taken from the job's working directory.
    An empty pattern means Slurm's default: `slurm-%j.out`, or `slurm-%A_%a.out` for arrays.
    """
    if pattern is None or not pattern.strip() or pattern.strip() == "(null)":
        if workdir is None:
            return None
        pattern = "slurm-%A_%a.out" if array_task_id else "slurm-%j.out"
    values = {
        "%": "%",
        "A": array_job_id or job_id,
        "a": array_task_id or "4294967294",
        "j": job_id,
        "J": job_id,
        "N": first_node or "",
        "n": "0",
        "s": "batch",
        "t": "0",
        "u": user or "",
        "x": job_name or "",
        "b": str(int(array_task_id) % 10) if (array_task_id or "").isdigit() else "0",
    }

    def sub(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        value = values[key]
        if width and value.isdigit():
            value = value.zfill(min(int(width), 10))
        return value

    path = _PATTERN.sub(sub, pattern.strip())
    if workdir and not path.startswith("/"):
        path = workdir.rstrip("/") + "/" + path
    return path


def _parse_time(text: str | None) -> datetime | None:
    """sacct's ISO time (printed in UTC: we run it with TZ=UTC) -> aware datetime."""
    text = (text or "").strip()
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _epoch(value: Any) -> datetime | None:
    n = _number(value)
    if n is None or n <= 0:
        return None
    return datetime.fromtimestamp(n, timezone.utc)


def _number(value: Any) -> int | None:
    """An int from plain JSON numbers or the `{set, infinite, number}` objects of v0.0.39+."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, dict):
        if value.get("infinite") or value.get("set") is False:
            return None
        return _number(value.get("number"))
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or None
    s = str(value).strip()
    return s or None


# --------------------------------------------------------------------------- records


@dataclass
class SlurmStep:
    step_id: str  # "123.0", "123.batch", "123_4.extern", "123+1.0"
    state: str
    exit_code: int | None = None
    signal: int | None = None
    end: datetime | None = None
    nodes: list[str] = field(default_factory=list)


@dataclass
class SlurmJob:
    """One accounting record (an allocation), whatever the transport."""

    job_id: str  # as users write it: 123, 123_4, 123+0
    raw_id: str  # JobIDRaw: the id Slurm stores
    name: str | None
    state: str  # raw: "CANCELLED by 1000"
    exit_code: int | None
    signal: int | None
    derived_exit_code: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    nodes: list[str] = field(default_factory=list)
    partition: str | None = None
    account: str | None = None
    user: str | None = None
    alloc_tres: str | None = None
    gpus_total: int | None = None
    gpu_model: str | None = None
    reason: str | None = None
    workdir: str | None = None
    stdout: str | None = None  # pattern or path, as Slurm recorded it
    stderr: str | None = None
    slurm_cluster: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    het_job_id: str | None = None
    het_offset: int | None = None
    steps: list[SlurmStep] = field(default_factory=list)
    exit_code_unknown: bool = False  # the transport could not tell (22.05 JSON)
    # the source records output paths (sacct >= 24.05, slurmrestd >= v0.0.41, slurmctld):
    # only then does an empty path mean Slurm's default `slurm-%j.out`
    output_recorded: bool = False


_ARRAY_ID = re.compile(r"^(\d+)_(\d+)$")
_HET_ID = re.compile(r"^(\d+)\+(\d+)$")


def _ids(job_id: str) -> tuple[str | None, str | None, str | None, int | None]:
    m = _ARRAY_ID.match(job_id)
    if m:
        return m.group(1), m.group(2), None, None
    m = _HET_ID.match(job_id)
    if m:
        return None, None, m.group(1), int(m.group(2))
    return None, None, None, None


def failing_step(steps: Sequence[SlurmStep]) -> SlurmStep | None:
    """The step that failed first: not COMPLETED or a non-zero exit, earliest end; a
    numbered (srun) step wins over `batch`, which fails because its srun failed."""
    bad = []
    for s in steps:
        suffix = s.step_id.rsplit(".", 1)[-1]
        if suffix == "extern":
            continue
        state, _ = map_state(s.state)
        if state is JobState.COMPLETED and not s.exit_code and not s.signal:
            continue
        if state is None and not s.exit_code and not s.signal:
            continue
        end = s.end or datetime.max.replace(tzinfo=timezone.utc)
        bad.append((end, suffix == "batch", s.step_id, s))
    if not bad:
        return None
    bad.sort(key=lambda t: (t[0], t[1], t[2]))
    return bad[0][3]


def _merge_het(components: list[SlurmJob]) -> SlurmJob:
    """Heterogeneous job components `123+0`, `123+1` -> one record `123`: nodes in order,
    the earliest start and latest end, the first component that did not complete."""
    comps = sorted(components, key=lambda j: j.het_offset or 0)
    lead = comps[0]
    worst = next((c for c in comps if map_state(c.state)[0] is not JobState.COMPLETED), lead)
    nodes: list[str] = []
    for c in comps:
        nodes.extend(n for n in c.nodes if n not in nodes)
    starts = [c.start for c in comps if c.start]
    ends = [c.end for c in comps if c.end]
    gpus = [c.gpus_total for c in comps if c.gpus_total is not None]
    return replace(
        worst,
        job_id=lead.het_job_id or lead.job_id,
        raw_id=lead.raw_id,
        name=lead.name,
        start=min(starts) if starts else None,
        end=max(ends) if ends else None,
        nodes=nodes,
        gpus_total=sum(gpus) if gpus else None,
        stdout=lead.stdout,
        stderr=lead.stderr,
        steps=[s for c in comps for s in c.steps],
        het_offset=None,
    )


def group_het(jobs: Iterable[SlurmJob]) -> list[SlurmJob]:
    out: list[SlurmJob] = []
    hets: dict[str, list[SlurmJob]] = {}
    for j in jobs:
        if j.het_job_id is not None:
            if j.het_job_id not in hets:
                hets[j.het_job_id] = []
                out.append(j)  # placeholder keeps the order
            hets[j.het_job_id].append(j)
        else:
            out.append(j)
    return [_merge_het(hets[j.het_job_id]) if j.het_job_id is not None else j for j in out]


def to_context(
    job: SlurmJob,
    cluster: str,
    node_addresses: Mapping[str, list[str]] | None = None,
) -> ExecutionContext | None:
    """The execution context of one finished record; None when it is not final or never
    ran (cancelled while pending: no nodes, no start, nothing to analyse)."""
    state, reason = map_state(job.state)
    if state is None or not job.nodes or job.start is None or job.end is None:
        return None
    step = failing_step(job.steps) if state is not JobState.COMPLETED else None
    code = None if job.exit_code_unknown else context_exit_code(job.exit_code, job.signal)
    if code == 0 and job.derived_exit_code and state is not JobState.COMPLETED:
        code = job.derived_exit_code  # the batch script hid a failed srun's exit code
    if reason is None and job.reason and job.reason not in ("None", "(null)"):
        reason = job.reason if state is not JobState.COMPLETED else None
    raw_job = job.raw_id if job.array_task_id is not None else job.job_id
    expand = dict(
        job_id=raw_job,
        job_name=job.name,
        user=job.user,
        first_node=job.nodes[0],
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
        workdir=job.workdir,
    )
    stdout = expand_output_pattern(job.stdout, **expand) if job.output_recorded else None  # type: ignore[arg-type]
    if not job.output_recorded:
        stderr = None
    elif job.stderr and job.stderr.strip() not in ("", "(null)"):
        stderr = expand_output_pattern(job.stderr, **expand)  # type: ignore[arg-type]
    else:
        stderr = stdout  # sbatch sends stderr to the --output file unless --error is given
    addresses = {
        n: list(node_addresses[n]) for n in job.nodes if node_addresses and node_addresses.get(n)
    }
    extra: dict[str, Any] = {"slurm_state": job.state}
    if job.signal:
        extra["exit_signal"] = job.signal
    if job.derived_exit_code is not None:
        extra["derived_exit_code"] = job.derived_exit_code
    if job.array_job_id is not None:
        extra["array_job_id"] = job.array_job_id
        extra["array_task_id"] = job.array_task_id
    if job.slurm_cluster:
        extra["slurm_cluster"] = job.slurm_cluster
    if job.exit_code_unknown:
        extra["exit_code_note"] = "slurmrestd 22.05 reports no usable exit code (Slurm bug)"
    return ExecutionContext(
        job_id=job.job_id,
        scheduler="slurm",
        cluster=cluster,
        state=state,
        exit_code=code,
        start=job.start,
        end=job.end,
        nodes=job.nodes,
        gpu_model=job.gpu_model,
        node_addresses=addresses,
        gpus_per_node=per_node(job.gpus_total, len(job.nodes)),
        job_name=job.name,
        partition=job.partition,
        user=job.user,
        account=job.account,
        reason=reason,
        failing_step=step.step_id if step else None,
        stdout_path=stdout,
        stderr_path=stderr,
        **extra,
    )


def _in_window(job: SlurmJob, query: JobQuery, until: datetime) -> bool:
    """sacct and slurmdbd return jobs that were *active* in the window; we want the ones that
    ENDED in [since, until), and only those matching the filters."""
    if job.end is None or not (query.since <= job.end < until):
        return False
    if job.start is None or not job.nodes:  # cancelled while pending: it never ran
        return False
    state, _ = map_state(job.state)
    if state is None or (query.states and state not in query.states):
        return False
    if query.partitions and job.partition not in query.partitions:
        return False
    if query.accounts and job.account not in query.accounts:
        return False
    if query.users and job.user not in query.users:
        return False
    return True


def _finish(
    jobs: Iterable[SlurmJob],
    query: JobQuery,
    until: datetime,
    cluster: str,
    addresses: Mapping[str, list[str]] | None = None,
) -> list[ExecutionContext]:
    out = []
    for job in jobs:
        ctx = to_context(job, cluster, addresses)
        if ctx is not None:
            out.append(ctx)
    out.sort(key=lambda c: (c.end, c.job_id))
    if query.limit is not None:
        out = out[: query.limit]
    return out


# --------------------------------------------------------------------------- config


class SlurmConfig(BackendConfig):
    """`scheduler: {kind: slurm, ...}`: jobs from Slurm accounting (sacct or slurmrestd)."""

    kind: Literal["slurm"] = "slurm"
    transport: Literal["sacct", "slurmrestd"] = Field(
        default="sacct", description="run sacct/scontrol here, or ask slurmrestd over HTTP"
    )
    # sacct transport
    sacct: str = Field(default="sacct", description="sacct binary (name on PATH or a path)")
    scontrol: str = Field(default="scontrol", description="scontrol binary, for node addresses")
    slurm_conf: str | None = Field(
        default=None, description="SLURM_CONF for the commands (default: theirs)"
    )
    sacct_cluster: str | None = Field(
        default=None, description="sacct -M: the Slurm cluster in a shared slurmdbd"
    )
    # slurmrestd transport
    restd_url: str | None = Field(default=None, description="http://slurmrestd:6820")
    api_version: str = Field(
        default="auto",
        description="v0.0.38 (22.05) ... v0.0.42 (25.11), or auto: newest the server answers",
    )
    jwt_env: str = Field(default="SLURM_JWT", description="NAME of the env var holding the JWT")
    user_name: str | None = Field(
        default=None, description="X-SLURM-USER-NAME; default $USER of this process"
    )
    verify_tls: bool = True
    # both
    node_addresses: bool = Field(
        default=True, description="look up NodeAddr / NodeHostName of the jobs' nodes"
    )
    ctld_details: bool = Field(
        default=True,
        description="fill output paths / exit codes that accounting lacks from slurmctld, "
        "for jobs it still remembers (MinJobAge)",
    )

    def client(self, cluster: str) -> SacctClient | RestClient:
        if self.transport == "slurmrestd":
            if not self.restd_url:
                raise ValueError("scheduler kind slurm with transport slurmrestd needs restd_url")
            return RestClient(self, cluster)
        return SacctClient(self, cluster)


# --------------------------------------------------------------------------- sacct transport

ALLOC_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "State", "ExitCode", "DerivedExitCode", "Start", "End",
    "NodeList", "NNodes", "Partition", "Account", "User", "AllocTRES", "Reason", "WorkDir",
    "Cluster", "StdOut", "StdErr",
)  # fmt: skip
OPTIONAL_FIELDS = frozenset({"StdOut", "StdErr", "Reason", "WorkDir", "Cluster", "DerivedExitCode"})
FIELD_GROUPS = {"StdOut": {"StdOut", "StdErr"}, "StdErr": {"StdOut", "StdErr"}}
STEP_FIELDS = ("JobID", "JobIDRaw", "State", "ExitCode", "End", "NodeList")

_INVALID_FIELD = re.compile(r'Invalid field requested:\s*"?([A-Za-z]+)"?')


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], Mapping[str, str], float], RunResult]


def subprocess_runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> RunResult:
    p = subprocess.run(
        list(argv), env=dict(env), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL, errors="replace",
    )  # fmt: skip
    return RunResult(p.returncode, p.stdout, p.stderr)


def classify_sacct_error(tool: str, stderr: str, returncode: int) -> SchedulerError:
    """One actionable line from a failed sacct/scontrol run."""
    text = stderr.strip()
    low = text.lower()
    if "accounting storage is disabled" in low:
        return SchedulerError(
            f"{tool}: Slurm accounting storage is disabled on this cluster; job history needs "
            "AccountingStorageType=accounting_storage/slurmdbd"
        )
    if (
        "connection refused" in low
        or "problem talking to the database" in low
        or ("unable to contact slurm controller" in low)
    ):
        what = "slurmctld" if "controller" in low else "slurmdbd"
        return SchedulerError(
            f"{tool}: cannot reach {what} ({_first_error_line(text)})", transient=True
        )
    if "timed out" in low or "socket timed out" in low:
        return SchedulerError(f"{tool}: {_first_error_line(text)}", transient=True)
    if "invalid user" in low or "access denied" in low or "permission denied" in low:
        return SchedulerError(f"{tool}: {_first_error_line(text)} (check sacct permissions)")
    line = _first_error_line(text) or f"exited with status {returncode}"
    return SchedulerError(f"{tool}: {line}")


def _first_error_line(text: str) -> str:
    lines = [re.sub(r"^(sacct|scontrol):\s*", "", ln.strip()) for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for ln in lines:
        if "error" in ln.lower() or "fatal" in ln.lower():
            return ln[:300]
    return lines[0][:300] if lines else ""


class SacctClient:
    """SchedulerClient over the sacct / scontrol command line."""

    def __init__(self, config: SlurmConfig, cluster: str, runner: Runner | None = None) -> None:
        self.config = config
        self.cluster = cluster
        self.runner = runner or subprocess_runner
        self.unsupported: set[str] = set()
        self.calls = 0

    # -- running commands
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(TZ="UTC", SLURM_TIME_FORMAT="%Y-%m-%dT%H:%M:%S", LC_ALL="C")
        for var in ("SACCT_FORMAT", "SQUEUE_FORMAT"):
            env.pop(var, None)
        if self.config.slurm_conf:
            env["SLURM_CONF"] = self.config.slurm_conf
        return env

    def _run(self, tool: str, argv: list[str]) -> str:
        self.calls += 1
        try:
            res = self.runner(argv, self._env(), self.config.timeout_seconds)
        except FileNotFoundError:
            raise SchedulerError(
                f"{tool} not found ({argv[0]!r}): install the Slurm client commands or set "
                f"scheduler.{tool} to its path"
            ) from None
        except PermissionError:
            raise SchedulerError(f"{tool} at {argv[0]!r} is not executable") from None
        except subprocess.TimeoutExpired:
            raise SchedulerError(
                f"{tool} did not answer within {self.config.timeout_seconds:g} s",
                transient=True,
            ) from None
        if res.returncode != 0:
            raise _RunFailed(classify_sacct_error(tool, res.stderr, res.returncode), res.stderr)
        return res.stdout

    def _sacct(self, fields: Sequence[str], args: list[str]) -> list[dict[str, str]]:
        """Run sacct with `fields` minus the ones this Slurm rejected; retry without a
        field sacct calls invalid (older versions lack StdOut/StdErr)."""
        for _ in range(len(OPTIONAL_FIELDS) + 1):
            use = [f for f in fields if f not in self.unsupported]
            argv = [self.config.sacct, "--parsable2", "--noheader", "--format", ",".join(use)]
            if self.config.sacct_cluster:
                argv += ["-M", self.config.sacct_cluster]
            try:
                out = self._run("sacct", argv + args)
            except _RunFailed as exc:
                m = _INVALID_FIELD.search(exc.stderr)
                if m and m.group(1) in OPTIONAL_FIELDS and m.group(1) not in self.unsupported:
                    # StdOut and StdErr arrived together (24.05): one rejected, both absent
                    self.unsupported |= FIELD_GROUPS.get(m.group(1), {m.group(1)})
                    continue
                raise exc.error from None
            return parse_parsable(out, use)
        raise SchedulerError("sacct rejected the field list")  # pragma: no cover

    # -- protocol
    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        until = query.until or utc_now()
        args = [
            "-X",
            "--starttime", _sacct_time(query.since),
            "--endtime", _sacct_time(until),
        ]  # fmt: skip
        if query.states:
            args += ["--state", ",".join(_states_for(query.states))]
        if query.partitions:
            args += ["-r", ",".join(query.partitions)]
        if query.accounts:
            args += ["-A", ",".join(query.accounts)]
        args += ["-u", ",".join(query.users)] if query.users else ["-a"]
        rows = self._sacct(ALLOC_FIELDS, args)
        jobs = [j for j in (job_from_row(r) for r in rows) if j is not None]
        jobs = [j for j in jobs if _in_window(j, query, until)]
        jobs = group_het(jobs)
        if query.limit is not None:
            jobs = sorted(jobs, key=lambda j: (j.end, j.job_id))[: query.limit]  # type: ignore[arg-type, return-value]
        self._add_steps(jobs)
        self._add_ctld_details(jobs)
        return _finish(jobs, query, until, self.cluster, self._addresses(jobs))

    def get_job(self, job_id: str) -> ExecutionContext:
        job_id = job_id.strip()
        if not re.match(r"^\d+([_+]\d+)?$", job_id):
            raise JobNotFound(f"{job_id!r} is not a Slurm job id (123, 123_4 or 123+0)")
        rows = self._sacct(ALLOC_FIELDS, ["-X", "-a", "-j", job_id.split("+")[0]])
        jobs = [j for j in (job_from_row(r) for r in rows) if j is not None]
        job = pick_job(jobs, job_id, self.cluster)
        self._add_steps([job])
        self._add_ctld_details([job])
        ctx = to_context(job, self.cluster, self._addresses([job]))
        if ctx is None:
            raise _not_analysable(job, self.cluster)
        return ctx

    # -- enrichment
    def _add_steps(self, jobs: list[SlurmJob]) -> None:
        """One sacct call for the steps of every job that did not complete."""
        want = [j for j in jobs if map_state(j.state)[0] not in (JobState.COMPLETED, None)]
        if not want:
            return
        ids = sorted({j.het_job_id or j.job_id for j in want})
        rows = self._sacct(STEP_FIELDS, ["-a", "-j", ",".join(ids)])
        by_job: dict[str, list[SlurmStep]] = {}
        for r in rows:
            jid = r.get("JobID", "")
            if "." not in jid:
                continue
            owner = jid.split(".", 1)[0]
            code, sig = parse_exit_code(r.get("ExitCode"))
            step = SlurmStep(
                step_id=jid, state=r.get("State", ""), exit_code=code, signal=sig,
                end=_parse_time(r.get("End")), nodes=_safe_hostlist(r.get("NodeList")),
            )  # fmt: skip
            by_job.setdefault(owner, []).append(step)
            het = _HET_ID.match(owner)
            if het:
                by_job.setdefault(het.group(1), []).append(step)
        for j in want:
            j.steps = by_job.get(j.job_id, [])

    def _add_ctld_details(self, jobs: list[SlurmJob]) -> None:
        """Output paths from `scontrol show job` when sacct has no StdOut field (< 24.05),
        for the jobs slurmctld still remembers. Not fatal."""
        if not self.config.ctld_details or "StdOut" not in self.unsupported or not jobs:
            return
        try:
            out = self._run("scontrol", [self.config.scontrol, "-o", "show", "job"])
        except (SchedulerError, _RunFailed):
            return
        info = {r.get("JobId"): r for r in parse_scontrol_records(out)}
        for j in jobs:
            r = info.get(j.raw_id)
            if r is None:
                continue
            j.output_recorded = True
            if r.get("StdOut"):
                j.stdout = r["StdOut"]
            if r.get("StdErr"):
                j.stderr = r["StdErr"]

    def _addresses(self, jobs: list[SlurmJob]) -> dict[str, list[str]]:
        """NodeAddr / NodeHostName of every node of `jobs`, one scontrol call. Not fatal."""
        if not self.config.node_addresses:
            return {}
        nodes = sorted({n for j in jobs for n in j.nodes})
        if not nodes:
            return {}
        argv = [self.config.scontrol, "-o", "show", "node"]
        if len(nodes) <= 2000:
            argv.append(",".join(nodes))
        try:
            out = self._run("scontrol", argv)
        except (SchedulerError, _RunFailed):
            return {}
        return addresses_from_scontrol(out)


class _RunFailed(Exception):
    def __init__(self, error: SchedulerError, stderr: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.stderr = stderr


def _sacct_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _safe_hostlist(expr: str | None) -> list[str]:
    try:
        return expand_hostlist(expr)
    except ValueError:
        return [expr.strip()] if expr and expr.strip() else []


def parse_parsable(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """`sacct --parsable2 --noheader` lines -> one dict per line, keyed by field name."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < len(fields):
            parts += [""] * (len(fields) - len(parts))
        elif len(parts) > len(fields):  # a '|' inside the last free-text field
            parts = parts[: len(fields) - 1] + ["|".join(parts[len(fields) - 1 :])]
        rows.append(dict(zip(fields, parts, strict=True)))
    return rows


def job_from_row(row: Mapping[str, str]) -> SlurmJob | None:
    """One `sacct -X` row -> SlurmJob (None for a step row or an unexpanded array `1_[2-5]`)."""
    jid = row.get("JobID", "").strip()
    if not jid or "." in jid or "[" in jid:
        return None
    array_job, array_task, het_job, het_off = _ids(jid)
    code, sig = parse_exit_code(row.get("ExitCode"))
    derived, dsig = parse_exit_code(row.get("DerivedExitCode"))
    nodes = _safe_hostlist(row.get("NodeList"))
    total, model = gpus_from_tres(row.get("AllocTRES"))
    return SlurmJob(
        job_id=jid,
        raw_id=(row.get("JobIDRaw") or jid).strip(),
        name=row.get("JobName") or None,
        state=row.get("State", "").strip(),
        exit_code=code,
        signal=sig,
        derived_exit_code=context_exit_code(derived, dsig),
        start=_parse_time(row.get("Start")),
        end=_parse_time(row.get("End")),
        nodes=nodes,
        partition=row.get("Partition") or None,
        account=row.get("Account") or None,
        user=row.get("User") or None,
        alloc_tres=row.get("AllocTRES") or None,
        gpus_total=total,
        gpu_model=model,
        reason=row.get("Reason") or None,
        workdir=row.get("WorkDir") or None,
        stdout=row.get("StdOut") or None,
        stderr=row.get("StdErr") or None,
        slurm_cluster=row.get("Cluster") or None,
        output_recorded="StdOut" in row,
        array_job_id=array_job,
        array_task_id=array_task,
        het_job_id=het_job,
        het_offset=het_off,
    )


def pick_job(jobs: list[SlurmJob], job_id: str, cluster: str) -> SlurmJob:
    """The record `job_id` names among what `sacct -j` / the REST job endpoint returned."""
    if "+" not in job_id:
        comps = [j for j in jobs if j.het_job_id == job_id]
        if comps:
            return _merge_het(comps)
    exact = [j for j in jobs if j.job_id == job_id]
    if exact:
        return exact[-1]  # the newest record when a requeued job has several
    tasks = [j for j in jobs if j.array_job_id == job_id]
    if len(tasks) == 1:
        return tasks[0]
    raw = [j for j in jobs if j.raw_id == job_id and j.het_job_id is None]
    if raw and not tasks:  # `sacct -j 9` for array task 4_2 whose JobIDRaw is 9
        return raw[-1]
    if tasks:
        names = ", ".join(t.job_id for t in tasks[:5]) + (" ..." if len(tasks) > 5 else "")
        raise JobNotFound(
            f"job {job_id} on {cluster} is an array of {len(tasks)} tasks ({names}): name one task"
        )
    raise JobNotFound(f"job {job_id} not found in Slurm accounting of {cluster}")


def _not_analysable(job: SlurmJob, cluster: str) -> SchedulerError:
    state, _ = map_state(job.state)
    if state is None:
        return SchedulerError(f"job {job.job_id} on {cluster} has not finished ({job.state})")
    return SchedulerError(
        f"job {job.job_id} on {cluster} never ran ({job.state} before it got nodes): "
        "nothing to analyse"
    )


_KV = re.compile(r"(\S+?)=(.*?)(?=\s+\S+?=|$)")


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """`scontrol -o show node|job` lines (`Key=value Key=value ...`) -> dicts."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        out.append({m.group(1): m.group(2).strip() for m in _KV.finditer(line)})
    return out


def addresses_from_scontrol(text: str) -> dict[str, list[str]]:
    """node -> the other names / addresses it answers to (NodeAddr, NodeHostName)."""
    out: dict[str, list[str]] = {}
    for rec in parse_scontrol_records(text):
        name = rec.get("NodeName")
        if not name:
            continue
        alts = []
        for key in ("NodeAddr", "NodeHostName"):
            v = rec.get(key)
            if v and v != name and v not in alts and v not in ("(null)", "N/A"):
                alts.append(v)
        if alts:
            out[name] = alts
    return out


# --------------------------------------------------------------------------- slurmrestd

REST_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38")


class RestClient:
    """SchedulerClient over slurmrestd's slurmdbd endpoints (`/slurmdb/<version>/jobs`)."""

    def __init__(
        self,
        config: SlurmConfig,
        cluster: str,
        http: Any | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        import httpx

        self.config = config
        self.cluster = cluster
        self.env = os.environ if env is None else env
        self.base = (config.restd_url or "").rstrip("/")
        self.http = http or httpx.Client(
            timeout=config.timeout_seconds, verify=config.verify_tls, follow_redirects=False
        )
        self.version: str | None = (
            None if config.api_version == "auto" else _norm_version(config.api_version)
        )
        self.requests = 0

    # -- HTTP
    def _headers(self) -> dict[str, str]:
        token = self.env.get(self.config.jwt_env, "").strip()
        if token.startswith("SLURM_JWT="):  # pasted straight from `scontrol token`
            token = token.split("=", 1)[1]
        if not token:
            raise SchedulerError(
                f"slurmrestd at {self.base} needs a JWT: set ${self.config.jwt_env} "
                "(e.g. from `scontrol token lifespan=...`)"
            )
        user = self.config.user_name or self.env.get("USER") or "root"
        return {
            "X-SLURM-USER-NAME": user,
            "X-SLURM-USER-TOKEN": token,
            "Accept": "application/json",
        }

    def _get(self, path: str, query: str = "") -> tuple[int, Any]:
        import httpx

        url = f"{self.base}{path}" + (f"?{query}" if query else "")
        headers = self._headers()
        self.requests += 1
        try:
            resp = self.http.get(url, headers=headers)
        except httpx.TimeoutException:
            raise SchedulerError(
                f"slurmrestd at {self.base} did not answer within "
                f"{self.config.timeout_seconds:g} s",
                transient=True,
            ) from None
        except httpx.TransportError as exc:
            raise SchedulerError(
                f"cannot reach slurmrestd at {self.base}: {_one_line(exc)}", transient=True
            ) from None
        status = resp.status_code
        if status in (401, 403):
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status}: check the JWT in "
                f"${self.config.jwt_env} and the user name {headers['X-SLURM-USER-NAME']!r}"
            )
        if status == 404:
            return 404, None
        if status == 429 or status >= 500:
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status}{_rest_error_text(resp)}",
                transient=True,
            )
        try:
            body = resp.json()
        except ValueError:
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status} with a body that is not JSON "
                f"({resp.text[:80]!r})"
            ) from None
        if not isinstance(body, dict):
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status} with unexpected JSON"
            )
        if status >= 400 and not _errors(body):
            raise SchedulerError(f"slurmrestd at {self.base} answered {status}")
        return status, body

    def _versioned(self, build: Callable[[str], tuple[str, str]]) -> tuple[str, dict[str, Any]]:
        """GET `build(version)` -> (path, query) on the configured version, or with
        api_version auto on the newest one the server answers (a 404 means "not served")."""
        versions = [self.version] if self.version else list(REST_VERSIONS)
        for v in versions:
            path, query = build(v)
            status, body = self._get(path, query)
            if status == 404 and body is None:
                continue
            self.version = v
            return v, body
        raise SchedulerError(
            f"slurmrestd at {self.base} does not serve the slurmdbd API "
            f"({', '.join(versions)}): start it with the slurmdbd plugin (-s openapi/slurmdbd "
            "on 23.11+, openapi/dbv0.0.39 on 23.02, openapi/dbv0.0.38 on 22.05) or set api_version"
        )

    # -- protocol
    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        until = query.until or utc_now()
        version, body = self._versioned(
            lambda v: (f"/slurmdb/{v}/jobs", _rest_params(v, query, until))
        )
        errors = _errors(body)
        if errors and not body.get("jobs"):
            if _nothing_found(errors):
                return []
            raise _rest_body_error(self.base, self.config.jwt_env, errors)
        jobs = self._parse_jobs(body, version)
        jobs = [j for j in jobs if _in_window(j, query, until)]
        jobs = group_het(jobs)
        self._fill_from_ctld(jobs, version)
        return _finish(jobs, query, until, self.cluster, self._addresses(jobs, version))

    def get_job(self, job_id: str) -> ExecutionContext:
        job_id = job_id.strip()
        if not re.match(r"^\d+([_+]\d+)?$", job_id):
            raise JobNotFound(f"{job_id!r} is not a Slurm job id (123, 123_4 or 123+0)")
        jid = quote(job_id.split("+")[0], safe="")
        version, body = self._versioned(lambda v: (f"/slurmdb/{v}/job/{jid}", ""))
        errors = _errors(body)
        if errors and not body.get("jobs"):
            if _nothing_found(errors):
                raise JobNotFound(f"job {job_id} not found in Slurm accounting of {self.cluster}")
            raise _rest_body_error(self.base, self.config.jwt_env, errors)
        jobs = self._parse_jobs(body, version)
        job = pick_job(jobs, job_id, self.cluster)
        self._fill_from_ctld([job], version)
        ctx = to_context(job, self.cluster, self._addresses([job], version))
        if ctx is None:
            raise _not_analysable(job, self.cluster)
        return ctx

    def _parse_jobs(self, body: dict[str, Any], version: str) -> list[SlurmJob]:
        raw = body.get("jobs")
        if not isinstance(raw, list):
            raise SchedulerError(f"slurmrestd at {self.base} answered without a 'jobs' list")
        out = []
        for item in raw:
            if not isinstance(item, dict):
                continue
            try:
                job = job_from_rest(item, version)
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                raise SchedulerError(
                    f"slurmrestd at {self.base} ({version}) sent a job this connector cannot "
                    f"read: {_one_line(exc)}"
                ) from None
            if job is not None:
                out.append(job)
        return out

    def _fill_from_ctld(self, jobs: list[SlurmJob], version: str) -> None:
        """22.05: exit codes and output paths from slurmctld's job list (raw wait status),
        for jobs it still remembers; slurmdbd's JSON exit codes are wrong there. Not fatal."""
        if version != "v0.0.38" or not jobs or not self.config.ctld_details:
            return
        try:
            status, body = self._get("/slurm/v0.0.38/jobs")
        except SchedulerError:
            return
        if status != 200 or not isinstance(body, dict):
            return
        info = {str(j.get("job_id")): j for j in body.get("jobs") or [] if isinstance(j, dict)}
        for job in jobs:
            rec = info.get(job.raw_id)
            if rec is None:
                continue
            code, sig = decode_wait_status(_number(rec.get("exit_code")))
            if code is not None:
                job.exit_code, job.signal, job.exit_code_unknown = code, sig, False
            dcode, dsig = decode_wait_status(_number(rec.get("derived_exit_code")))
            if dcode is not None:
                job.derived_exit_code = context_exit_code(dcode, dsig)
            job.output_recorded = True
            if rec.get("standard_output"):
                job.stdout = rec["standard_output"]
            if rec.get("standard_error"):
                job.stderr = rec["standard_error"]

    def _addresses(self, jobs: list[SlurmJob], version: str) -> dict[str, list[str]]:
        """NodeAddr / hostname from `/slurm/<v>/nodes` (one request). Not fatal."""
        if not self.config.node_addresses or not jobs:
            return {}
        wanted = {n for j in jobs for n in j.nodes}
        try:
            status, body = self._get(f"/slurm/{version}/nodes")
        except SchedulerError:
            return {}
        if status != 200 or not isinstance(body, dict):
            return {}
        out: dict[str, list[str]] = {}
        for node in body.get("nodes") or []:
            if not isinstance(node, dict) or node.get("name") not in wanted:
                continue
            alts: list[str] = []
            for key in ("address", "hostname"):
                v = node.get(key)
                if isinstance(v, str) and v and v != node["name"] and v not in alts:
                    alts.append(v)
            if alts:
                out[node["name"]] = alts
        return out


def _norm_version(v: str) -> str:
    v = v.strip().lower().removeprefix("dbv").removeprefix("v")
    return f"v{v}"


def _rest_time(version: str, t: datetime) -> str:
    """dbv0.0.38 wants an ISO time with the colons escaped (a raw ':' is a 400, epoch
    seconds are 'not RFC7320 compliant'); v0.0.39+ take UNIX seconds."""
    t = t.astimezone(timezone.utc)
    if version == "v0.0.38":
        return quote(t.strftime("%Y-%m-%dT%H:%M:%S"), safe="")
    return str(int(t.timestamp()))


def _rest_params(version: str, query: JobQuery, until: datetime) -> str:
    parts = [
        f"start_time={_rest_time(version, query.since)}",
        f"end_time={_rest_time(version, until)}",
    ]
    # state= is unreliable on dbv0.0.38 ('Nothing found' for FAILED); filter locally there.
    if query.states and version != "v0.0.38":
        parts.append("state=" + quote(",".join(_states_for(query.states)), safe=","))
    for key, values in (
        ("partition", query.partitions), ("account", query.accounts), ("users", query.users),
    ):  # fmt: skip
        if values:
            parts.append(f"{key}=" + quote(",".join(values), safe=","))
    return "&".join(parts)


def _errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    errs = body.get("errors")
    return [e for e in errs if isinstance(e, dict)] if isinstance(errs, list) else []


def _nothing_found(errors: list[dict[str, Any]]) -> bool:
    return all(
        e.get("error_number") == 9003 or "nothing found" in str(e.get("error", "")).lower()
        or "not found" in str(e.get("description", "")).lower()
        for e in errors
    )  # fmt: skip


def _rest_body_error(base: str, jwt_env: str, errors: list[dict[str, Any]]) -> SchedulerError:
    e = errors[0]
    text = str(e.get("error") or e.get("description") or e)
    low = text.lower()
    if "authentication" in low or "unauthorized" in low or "token" in low:
        return SchedulerError(
            f"slurmrestd at {base} rejected the request ({text}): check the JWT in ${jwt_env}"
        )
    transient = (
        "connection refused" in low
        or "unable to connect" in low
        or ("database" in low and "problem" in low)
    )
    return SchedulerError(f"slurmrestd at {base}: {_one_line(text)}", transient=transient)


def _rest_error_text(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return ""
    errs = _errors(body) if isinstance(body, dict) else []
    if errs:
        return f" ({_one_line(errs[0].get('error') or errs[0].get('description') or '')})"
    return ""


def _one_line(value: Any) -> str:
    text = str(value).strip()
    return (text.splitlines() or [""])[0][:300]


def _state_text(state: Any) -> str:
    """`{current: "FAILED"}` (dbv0.0.38, v0.0.39) or `{current: ["FAILED", ...]}` (v0.0.40+)
    or a bare string/list (steps) -> the base state name."""
    if isinstance(state, dict):
        state = state.get("current")
    if isinstance(state, list):
        names = [str(s) for s in state]
        base = next((s for s in names if s in STATE_MAP), None)
        return base or (names[0] if names else "")
    return str(state or "")


def _exit_pair(value: Any) -> tuple[int | None, int | None]:
    """exit_code of any version: an int (raw status, /slurm/ ctld), `{status, return_code}`
    (dbv0.0.38), `{status: [..], return_code: {number}, signal: {id|signal_id: {number}}}`."""
    if value is None:
        return None, None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return decode_wait_status(int(value))
    if not isinstance(value, dict):
        return None, None
    code = _number(value.get("return_code"))
    sig_obj = value.get("signal")
    sig = None
    if isinstance(sig_obj, dict):
        sig = _number(sig_obj.get("id", sig_obj.get("signal_id")))
    status = value.get("status")
    statuses = [status] if isinstance(status, str) else list(status or [])
    if "PENDING" in statuses and not code:
        return None, None
    return code, sig or None


def job_from_rest(item: dict[str, Any], version: str) -> SlurmJob | None:
    """One slurmdbd job object (any supported version) -> SlurmJob."""
    raw_id = str(item.get("job_id"))
    array = item.get("array") or {}
    het = item.get("het") or {}
    array_job = _number(array.get("job_id")) or None
    task = _number(array.get("task_id"))
    het_job = _number(het.get("job_id")) or None
    het_off = _number(het.get("job_offset"))
    if array_job and task is not None:
        job_id = f"{array_job}_{task}"
    elif het_job and het_off is not None:
        job_id = f"{het_job}+{het_off}"
    else:
        job_id = raw_id
    state = _state_text(item.get("state"))
    reason = item.get("state", {}).get("reason") if isinstance(item.get("state"), dict) else None
    code, sig = _exit_pair(item.get("exit_code"))
    dcode, dsig = _exit_pair(item.get("derived_exit_code"))
    unknown = False
    if version == "v0.0.38":
        # 22.05 bug: exit_code and derived_exit_code read SUCCESS/0 for failed jobs.
        mapped, _ = map_state(state)
        if mapped is not JobState.COMPLETED and not code and not sig:
            code, sig, unknown = None, None, True
        dcode, dsig = (None, None) if not dcode else (dcode, dsig)
    t = item.get("time") or {}
    tres = item.get("tres") or {}
    alloc = tres.get("allocated") if isinstance(tres, dict) else None
    tres_text = _tres_text(alloc)
    total, model = gpus_from_tres(tres_text)
    nodes_field = item.get("nodes")
    nodes = (
        [str(n) for n in nodes_field]
        if isinstance(nodes_field, list)
        else _safe_hostlist(_text(nodes_field))
    )
    steps = []
    display = job_id
    for s in item.get("steps") or []:
        if not isinstance(s, dict):
            continue
        sid = (s.get("step") or {}).get("id")
        if isinstance(sid, dict):  # v0.0.39: {job_id, step_het_component, step_id}
            sid = sid.get("step_id")
        sid = str(sid) if sid is not None else ""  # "batch" / 0 (dbv0.0.38), "123.0" (v0.0.40+)
        suffix = sid.split(".", 1)[1] if "." in sid else sid
        s_nodes = (s.get("nodes") or {}).get("list")
        if isinstance(s_nodes, str):
            s_nodes = _safe_hostlist(s_nodes)
        scode, ssig = _exit_pair(s.get("exit_code"))
        if version == "v0.0.38" and not scode and not ssig:
            scode = None  # 22.05 bug: a failed step reads SUCCESS/0 (signals are right)
        steps.append(
            SlurmStep(
                step_id=f"{display}.{suffix}",
                state=_state_text(s.get("state")),
                exit_code=scode,
                signal=ssig,
                end=_epoch((s.get("time") or {}).get("end")),
                nodes=[str(n) for n in s_nodes or []],
            )
        )
    return SlurmJob(
        job_id=job_id,
        raw_id=raw_id,
        name=_text(item.get("name")),
        state=state,
        exit_code=code,
        signal=sig,
        derived_exit_code=context_exit_code(dcode, dsig) if dcode is not None else None,
        start=_epoch(t.get("start")),
        end=_epoch(t.get("end")),
        nodes=nodes,
        partition=_text(item.get("partition")),
        account=_text(item.get("account")),
        user=_text(item.get("user")),
        alloc_tres=tres_text,
        gpus_total=total,
        gpu_model=model,
        reason=_text(reason),
        workdir=_text(item.get("working_directory")),
        stdout=_text(item.get("stdout_expanded") or item.get("stdout")),
        stderr=_text(item.get("stderr_expanded") or item.get("stderr")),
        slurm_cluster=_text(item.get("cluster")),
        array_job_id=str(array_job) if array_job and task is not None else None,
        array_task_id=str(task) if array_job and task is not None else None,
        het_job_id=str(het_job) if het_job and het_off is not None else None,
        het_offset=het_off if het_job else None,
        steps=steps,
        exit_code_unknown=unknown,
        output_recorded="stdout" in item or "stdout_expanded" in item,
    )


def _tres_text(alloc: Any) -> str | None:
    """REST tres list -> sacct's AllocTRES text (`cpu=8,gres/gpu:a100=8`), one parser for both."""
    if isinstance(alloc, str):
        return alloc
    if not isinstance(alloc, list):
        return None
    parts = []
    for t in alloc:
        if not isinstance(t, dict):
            continue
        name = f"{t.get('type')}/{t['name']}" if t.get("name") else str(t.get("type"))
        parts.append(f"{name}={_number(t.get('count'))}")
    return ",".join(parts) or None


__all__ = [
    "RestClient",
    "SacctClient",
    "SlurmConfig",
    "expand_hostlist",
    "expand_output_pattern",
    "map_state",
    "parse_exit_code",
]
