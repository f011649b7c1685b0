"""The sacct / scontrol transport of the Slurm connector (overview: connectors/slurm.py)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from attribution_dagster.connectors.base import JobNotFound, JobQuery, SchedulerError, utc_now
from attribution_dagster.connectors.slurm.config import SlurmKeys
from attribution_dagster.connectors.slurm.records import (
    HET_ID,
    SlurmJob,
    SlurmStep,
    context_exit_code,
    contexts_for,
    ended_in_window,
    gpus_from_tres,
    group_het,
    hostlist_or_raw,
    map_state,
    not_analysable,
    parse_exit_code,
    parse_sacct_time,
    pick_job,
    slurm_states_for,
    split_job_id,
    to_context,
)
from attribution_dagster.core.context import ExecutionContext, JobState

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

    def __init__(self, config: SlurmKeys, cluster: str, runner: Runner | None = None) -> None:
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

    def show_topology(self) -> str:
        """`scontrol show topology` as slurmctld prints it (the topology connector reads it
        with core/formats/topology/slurm.py). SchedulerError when scontrol fails."""
        try:
            return self._run("scontrol", [self.config.scontrol, "show", "topology"])
        except _RunFailed as exc:
            raise exc.error from None

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
            args += ["--state", ",".join(slurm_states_for(query.states))]
        if query.partitions:
            args += ["-r", ",".join(query.partitions)]
        if query.accounts:
            args += ["-A", ",".join(query.accounts)]
        args += ["-u", ",".join(query.users)] if query.users else ["-a"]
        rows = self._sacct(ALLOC_FIELDS, args)
        jobs = [j for j in (job_from_row(r) for r in rows) if j is not None]
        jobs = [j for j in jobs if ended_in_window(j, query, until)]
        jobs = group_het(jobs)
        if query.limit is not None:
            jobs = sorted(jobs, key=lambda j: (j.end, j.job_id))[: query.limit]  # type: ignore[arg-type, return-value]
        self._add_steps(jobs)
        self._add_ctld_details(jobs)
        return contexts_for(jobs, query, until, self.cluster, self._addresses(jobs))

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
            raise not_analysable(job, self.cluster)
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
                end=parse_sacct_time(r.get("End")), nodes=hostlist_or_raw(r.get("NodeList")),
            )  # fmt: skip
            by_job.setdefault(owner, []).append(step)
            het = HET_ID.match(owner)
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
    array_job, array_task, het_job, het_off = split_job_id(jid)
    code, sig = parse_exit_code(row.get("ExitCode"))
    derived, dsig = parse_exit_code(row.get("DerivedExitCode"))
    nodes = hostlist_or_raw(row.get("NodeList"))
    total, model = gpus_from_tres(row.get("AllocTRES"))
    return SlurmJob(
        job_id=jid,
        raw_id=(row.get("JobIDRaw") or jid).strip(),
        name=row.get("JobName") or None,
        state=row.get("State", "").strip(),
        exit_code=code,
        signal=sig,
        derived_exit_code=context_exit_code(derived, dsig),
        start=parse_sacct_time(row.get("Start")),
        end=parse_sacct_time(row.get("End")),
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
