"""The slurmrestd transport of the Slurm connector (overview: connectors/slurm.py)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx

from attribution_dagster.connectors.base import JobNotFound, JobQuery, SchedulerError, utc_now
from attribution_dagster.connectors.http import attempts_of, build_client, is_transient, send
from attribution_dagster.connectors.slurm.config import SlurmKeys
from attribution_dagster.connectors.slurm.records import (
    STATE_MAP,
    SlurmJob,
    SlurmStep,
    context_exit_code,
    contexts_for,
    decode_wait_status,
    ended_in_window,
    epoch_time,
    gpus_from_tres,
    group_het,
    hostlist_or_raw,
    json_int,
    json_text,
    map_state,
    not_analysable,
    pick_job,
    slurm_states_for,
    to_context,
)
from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.secrets import remember

# --------------------------------------------------------------------------- slurmrestd

REST_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38")


class RestClient:
    """SchedulerClient over slurmrestd's slurmdbd endpoints (`/slurmdb/<version>/jobs`)."""

    def __init__(
        self,
        config: SlurmKeys,
        cluster: str,
        http: Any | None = None,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._sleep = sleep
        self.cluster = cluster
        self.env = os.environ if env is None else env
        self.base = (config.restd_url or "").rstrip("/")
        self.http = http or build_client(timeout=config.timeout_seconds, verify=config.verify_tls)
        self.version: str | None = (
            None if config.api_version == "auto" else _norm_version(config.api_version)
        )
        self.requests = 0

    # -- HTTP
    def _headers(self) -> dict[str, str]:
        token = self.env.get(self.config.jwt_env, "").strip()
        if token.startswith("SLURM_JWT="):  # pasted straight from `scontrol token`
            token = token.split("=", 1)[1]
        remember(token)
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
        """One GET with retries on 429 / 5xx / timeouts (connectors/http.py); (status, body)."""
        url = f"{self.base}{path}" + (f"?{query}" if query else "")
        headers = self._headers()

        def get() -> httpx.Response:
            self.requests += 1
            return self.http.get(url, headers=headers)

        try:
            resp, attempts = send(get, self.config.retry, sleep=self._sleep)
        except httpx.TimeoutException as exc:
            raise SchedulerError(
                f"slurmrestd at {self.base} did not answer within "
                f"{self.config.timeout_seconds:g} s{_tries(attempts_of(exc))}",
                transient=True,
            ) from None
        except httpx.TransportError as exc:
            raise SchedulerError(
                f"cannot reach slurmrestd at {self.base}: {_one_line(exc)}"
                f"{_tries(attempts_of(exc))}",
                transient=is_transient(exc),
            ) from None
        status = resp.status_code
        if status in (401, 403):
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status}: check the JWT in "
                f"${self.config.jwt_env} and the user name {headers['X-SLURM-USER-NAME']!r}"
            )
        if status == 404:
            # slurmrestd's "no such path" is plain text; a JSON body with errors comes from
            # a served endpoint (newer versions answer a missing job that way)
            try:
                body = resp.json()
            except ValueError:
                return 404, None
            if isinstance(body, dict) and ("errors" in body or "meta" in body):
                body.setdefault("jobs", [])
                if not _errors(body):
                    body["errors"] = [{"error_number": 9003, "error": "Nothing found (404)"}]
                return 404, body
            return 404, None
        if is_transient(status):
            raise SchedulerError(
                f"slurmrestd at {self.base} answered {status}{_rest_error_text(resp)}"
                f"{_tries(attempts)}",
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

    def _versioned(
        self, build: Callable[[str], tuple[str, str]]
    ) -> tuple[str, int, dict[str, Any]]:
        """GET `build(version)` -> (path, query) on the configured version, or with
        api_version auto on the newest one the server answers (a 404 means "not served")."""
        versions = [self.version] if self.version else list(REST_VERSIONS)
        for v in versions:
            path, query = build(v)
            status, body = self._get(path, query)
            if status == 404 and body is None:
                continue
            self.version = v
            return v, status, body
        raise SchedulerError(
            f"slurmrestd at {self.base} does not serve the slurmdbd API "
            f"({', '.join(versions)}): start it with the slurmdbd plugin (-s openapi/slurmdbd "
            "on 23.11+, openapi/dbv0.0.39 on 23.02, openapi/dbv0.0.38 on 22.05) or set api_version"
        )

    # -- protocol
    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        until = query.until or utc_now()
        version, _, body = self._versioned(
            lambda v: (f"/slurmdb/{v}/jobs", _rest_params(v, query, until))
        )
        errors = _errors(body)
        if errors and not body.get("jobs"):
            if _nothing_found(errors):
                return []
            raise _rest_body_error(self.base, self.config.jwt_env, errors)
        jobs = self._parse_jobs(body, version)
        jobs = [j for j in jobs if ended_in_window(j, query, until)]
        jobs = group_het(jobs)
        self._fill_from_ctld(jobs, version)
        return contexts_for(jobs, query, until, self.cluster, self._addresses(jobs, version))

    def get_job(self, job_id: str) -> ExecutionContext:
        job_id = job_id.strip()
        if not re.match(r"^\d+([_+]\d+)?$", job_id):
            raise JobNotFound(f"{job_id!r} is not a Slurm job id (123, 123_4 or 123+0)")
        jid = quote(job_id.split("+")[0], safe="")
        version, status, body = self._versioned(lambda v: (f"/slurmdb/{v}/job/{jid}", ""))
        errors = _errors(body)
        if errors and not body.get("jobs"):
            if status == 404 or _nothing_found(errors):
                raise JobNotFound(f"job {job_id} not found in Slurm accounting of {self.cluster}")
            raise _rest_body_error(self.base, self.config.jwt_env, errors)
        jobs = self._parse_jobs(body, version)
        job = pick_job(jobs, job_id, self.cluster)
        self._fill_from_ctld([job], version)
        ctx = to_context(job, self.cluster, self._addresses([job], version))
        if ctx is None:
            raise not_analysable(job, self.cluster)
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
            code, sig = decode_wait_status(json_int(rec.get("exit_code")))
            if code is not None:
                job.exit_code, job.signal, job.exit_code_unknown = code, sig, False
            dcode, dsig = decode_wait_status(json_int(rec.get("derived_exit_code")))
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
        parts.append("state=" + quote(",".join(slurm_states_for(query.states)), safe=","))
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
        e.get("error_number") in (9003, 2017)  # nothing found / invalid job id
        or "nothing found" in str(e.get("error", "")).lower()
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


def _tries(attempts: int) -> str:
    return f" (after {attempts} attempts)" if attempts > 1 else ""


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
    code = json_int(value.get("return_code"))
    sig_obj = value.get("signal")
    sig = None
    if isinstance(sig_obj, dict):
        sig = json_int(sig_obj.get("id", sig_obj.get("signal_id")))
    status = value.get("status")
    statuses = [status] if isinstance(status, str) else list(status or [])
    if "PENDING" in statuses and not code:
        return None, None
    return code, sig or None


def job_from_rest(item: dict[str, Any], version: str) -> SlurmJob | None:
    """One slurmdbd job object (any supported version) -> SlurmJob."""
    # Long on purpose: one flat mapping of slurmrestd's job fields to a context, field by field,
    # as the API documents them
    # Over 80 lines on purpose: one flat field-by-field mapping of one record across five
    # API versions; reading it top to bottom against the OpenAPI schema is the review.
    raw_id = str(item.get("job_id"))
    array = item.get("array") or {}
    het = item.get("het") or {}
    array_job = json_int(array.get("job_id")) or None
    task = json_int(array.get("task_id"))
    het_job = json_int(het.get("job_id")) or None
    het_off = json_int(het.get("job_offset"))
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
        else hostlist_or_raw(json_text(nodes_field))
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
            s_nodes = hostlist_or_raw(s_nodes)
        scode, ssig = _exit_pair(s.get("exit_code"))
        if version == "v0.0.38" and not scode and not ssig:
            scode = None  # 22.05 bug: a failed step reads SUCCESS/0 (signals are right)
        steps.append(
            SlurmStep(
                step_id=f"{display}.{suffix}",
                state=_state_text(s.get("state")),
                exit_code=scode,
                signal=ssig,
                end=epoch_time((s.get("time") or {}).get("end")),
                nodes=[str(n) for n in s_nodes or []],
            )
        )
    return SlurmJob(
        job_id=job_id,
        raw_id=raw_id,
        name=json_text(item.get("name")),
        state=state,
        exit_code=code,
        signal=sig,
        derived_exit_code=context_exit_code(dcode, dsig) if dcode is not None else None,
        start=epoch_time(t.get("start")),
        end=epoch_time(t.get("end")),
        nodes=nodes,
        partition=json_text(item.get("partition")),
        account=json_text(item.get("account")),
        user=json_text(item.get("user")),
        alloc_tres=tres_text,
        gpus_total=total,
        gpu_model=model,
        reason=json_text(reason),
        workdir=json_text(item.get("working_directory")),
        stdout=json_text(item.get("stdout_expanded") or item.get("stdout")),
        stderr=json_text(item.get("stderr_expanded") or item.get("stderr")),
        slurm_cluster=json_text(item.get("cluster")),
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
        parts.append(f"{name}={json_int(t.get('count'))}")
    return ",".join(parts) or None
