"""Slurm records, whatever the transport: host lists, states, exit codes, output paths,
GPUs, heterogeneous jobs and failing steps, and the one function that turns an accounting
record into an ExecutionContext (connectors/slurm.py has the overview)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from attribution_dagster.connectors.base import JobNotFound, JobQuery, SchedulerError
from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.hostlist import expand_hostlist  # noqa: F401 - re-exported

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


def slurm_states_for(wanted: Iterable[JobState]) -> list[str]:
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


def parse_sacct_time(text: str | None) -> datetime | None:
    """sacct's ISO time (printed in UTC: we run it with TZ=UTC) -> aware datetime."""
    text = (text or "").strip()
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def epoch_time(value: Any) -> datetime | None:
    n = json_int(value)
    if n is None or n <= 0:
        return None
    return datetime.fromtimestamp(n, timezone.utc)


def json_int(value: Any) -> int | None:
    """An int from plain JSON numbers or the `{set, infinite, number}` objects of v0.0.39+."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, dict):
        if value.get("infinite") or value.get("set") is False:
            return None
        return json_int(value.get("number"))
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def json_text(value: Any) -> str | None:
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


ARRAY_ID = re.compile(r"^(\d+)_(\d+)$")
HET_ID = re.compile(r"^(\d+)\+(\d+)$")


def split_job_id(job_id: str) -> tuple[str | None, str | None, str | None, int | None]:
    m = ARRAY_ID.match(job_id)
    if m:
        return m.group(1), m.group(2), None, None
    m = HET_ID.match(job_id)
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


def ended_in_window(job: SlurmJob, query: JobQuery, until: datetime) -> bool:
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


def contexts_for(
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


def hostlist_or_raw(expr: str | None) -> list[str]:
    try:
        return expand_hostlist(expr)
    except ValueError:
        return [expr.strip()] if expr and expr.strip() else []


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


def not_analysable(job: SlurmJob, cluster: str) -> SchedulerError:
    state, _ = map_state(job.state)
    if state is None:
        return SchedulerError(f"job {job.job_id} on {cluster} has not finished ({job.state})")
    return SchedulerError(
        f"job {job.job_id} on {cluster} never ran ({job.state} before it got nodes): "
        "nothing to analyse"
    )
