"""Reading Kueue, Job, JobSet and Pod objects as the Kubernetes API serves them (plain
dicts): conditions, owners, when a workload ended, how each container terminated, the
first failure, pod references, GPUs, and the final state a workload's evidence gives.
No API calls here (kueue/client.py makes them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from attribution_dagster.core.context import JobState, PodRef
from attribution_dagster.core.formats.kube_events import parse_time

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        str(c.get("type")): c
        for c in ((obj.get("status") or {}).get("conditions") or [])
        if isinstance(c, dict)
    }


def is_true(cond: dict[str, Any] | None) -> bool:
    return bool(cond) and str(cond.get("status")) == "True"  # type: ignore[union-attr]


def metadata_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def controller_owner(obj: dict[str, Any]) -> tuple[str, str] | None:
    refs = metadata_of(obj).get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return str(chosen.get("kind", "")), str(chosen.get("name", ""))


def workload_end(wl: dict[str, Any]) -> tuple[datetime, str] | None:
    """When and how the workload's run ended: ('finished' | 'evicted'), or None if running."""
    conds = conditions(wl)
    fin = conds.get("Finished")
    if is_true(fin):
        t = parse_time(fin.get("lastTransitionTime"))  # type: ignore[union-attr]
        if t is not None:
            return t, "finished"
    ev = conds.get("Evicted")
    if is_true(ev) and not is_true(conds.get("QuotaReserved")):
        t = parse_time(ev.get("lastTransitionTime"))  # type: ignore[union-attr]
        if t is not None:
            return t, "evicted"
    return None


def workload_running(wl: dict[str, Any]) -> bool:
    """Admitted (or holding quota) and not finished: its pods should be recorded."""
    conds = conditions(wl)
    if is_true(conds.get("Finished")):
        return False
    return is_true(conds.get("Admitted")) or is_true(conds.get("QuotaReserved"))


@dataclass(frozen=True)
class Termination:
    """One container's non-zero (or OOM) termination, current or last state."""

    pod: str
    container: str
    exit_code: int | None
    reason: str
    signal: int | None
    finished: datetime | None
    disruption: str | None  # the pod's DisruptionTarget reason, if any
    pod_reason: str | None  # pod status.reason (`Evicted`, `NodeLost`, ...)

    @property
    def oom(self) -> bool:
        return self.reason == "OOMKilled"

    @property
    def teardown(self) -> bool:
        """Killed by a signal on purpose (JobSet / Job tearing the rest down), not a cause."""
        return not self.oom and (self.exit_code in (137, 143) or self.disruption is not None)


def pod_terminations(pod: dict[str, Any]) -> list[Termination]:
    status = pod.get("status") or {}
    name = str(metadata_of(pod).get("name", ""))
    disruption = None
    for c in status.get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and str(c.get("status")) == "True":
            disruption = str(c.get("reason") or "DisruptionTarget")
    out = []
    for cs in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        state = cs.get("state") or {}
        last = (cs.get("lastState") or {}).get("terminated")
        terms = [state["terminated"]] if state.get("terminated") else []
        # The previous crash counts when the container was crash-looping as the job ended
        # (waiting) or was then killed by the teardown; a crash that was restarted and
        # went on running or finished cleanly did not end the job.
        if last and (
            "waiting" in state
            or (
                terms
                and terms[0].get("exitCode") in (137, 143)
                and terms[0].get("reason") != "OOMKilled"
            )
        ):
            terms.append(last)
        for term in terms:
            code = term.get("exitCode")
            reason = str(term.get("reason") or "")
            if code in (0, None) and reason != "OOMKilled":
                continue
            out.append(
                Termination(
                    pod=name,
                    container=str(cs.get("name", "")),
                    exit_code=int(code) if code is not None else None,
                    reason=reason,
                    signal=term.get("signal"),
                    finished=parse_time(term.get("finishedAt")),
                    disruption=disruption,
                    pod_reason=status.get("reason"),
                )
            )
    if not out and status.get("phase") == "Failed":
        # Pod failed without a terminated container (evicted, node lost): still a failure.
        out.append(
            Termination(
                pod=name,
                container="",
                exit_code=None,
                reason=str(status.get("reason") or "Failed"),
                signal=None,
                finished=pod_finished(pod),
                disruption=disruption,
                pod_reason=status.get("reason"),
            )
        )
    return out


def pod_finished(pod: dict[str, Any]) -> datetime | None:
    times = [
        parse_time(c.get("lastTransitionTime"))
        for c in (pod.get("status") or {}).get("conditions") or []
        if c.get("type") in ("DisruptionTarget", "Ready")
    ]
    times = [t for t in times if t is not None]
    return max(times) if times else None


def first_failure(pods: Iterable[dict[str, Any]]) -> Termination | None:
    """The failure that came first; at equal times a teardown kill loses to a real exit."""
    far = datetime.max.replace(tzinfo=timezone.utc)
    terms = [t for p in pods for t in pod_terminations(p)]
    if not terms:
        return None
    return min(terms, key=lambda t: (t.finished or far, t.teardown, t.pod, t.container))


def pod_ref(pod: dict[str, Any]) -> PodRef:
    meta, spec, status = metadata_of(pod), pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    started = parse_time(status.get("startTime"))
    return PodRef(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        node=spec.get("nodeName") or None,
        host_ip=status.get("hostIP") or None,
        pod_ip=status.get("podIP") or None,
        containers=[str(c.get("name")) for c in spec.get("containers") or [] if c.get("name")],
        restarts=sum(int(c.get("restartCount") or 0) for c in statuses),
        started=started,
    )


def pod_ips(pod: dict[str, Any]) -> list[str]:
    status = pod.get("status") or {}
    ips = [status.get("podIP")] + [p.get("ip") for p in status.get("podIPs") or []]
    return [ip for ip in ips if ip]


def pod_gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
            GPU_RESOURCE
        )
        try:
            total += int(value or 0)
        except (TypeError, ValueError):
            pass
    return total


def workload_gpus(wl: dict[str, Any]) -> int | None:
    """GPUs the Workload asked for in all: the admitted `resourceUsage` of its pod sets
    (`nvidia.com/gpu`, a total per pod set), else `count` x the pod template's request. For
    a workload whose pods are gone (preempted, cleaned up); None when it names none."""
    admission = (wl.get("status") or {}).get("admission") or {}
    total = 0
    for psa in admission.get("podSetAssignments") or []:
        try:
            total += int(((psa.get("resourceUsage") or {}).get(GPU_RESOURCE)) or 0)
        except (TypeError, ValueError):
            pass
    if not total:
        for ps in (wl.get("spec") or {}).get("podSets") or []:
            try:
                count = int(ps.get("count") or 1)
            except (TypeError, ValueError):
                count = 1
            total += count * pod_gpus(ps.get("template") or {})
    return total or None


def failed_job_reasons(jobs: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(reason, message) of every Job whose `Failed` condition is True."""
    out = []
    for job in jobs:
        cond = conditions(job).get("Failed")
        if is_true(cond):
            out.append((str(cond.get("reason") or ""), str(cond.get("message") or "")))  # type: ignore[union-attr]
    return out


def classify(
    wl: dict[str, Any],
    how: str,
    owner: dict[str, Any] | None,
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
) -> tuple[JobState, int | None, str | None, str | None]:
    """(state, exit_code, reason, failing_step) of an ended workload; see the module table."""
    conds = conditions(wl)
    first = first_failure(pods)
    exit_code = first.exit_code if first else None
    step = first.pod if first else None
    if how == "evicted":
        ev = conds.get("Evicted") or {}
        reason = str(ev.get("message") or ev.get("reason") or "evicted")
        pre = conds.get("Preempted")
        if is_true(pre) and pre.get("message") and pre.get("message") not in reason:  # type: ignore[union-attr]
            reason = f"{reason}; {pre['message']}"  # type: ignore[index]
        if ev.get("reason") in ("InactiveWorkload", "Deactivated"):
            return JobState.CANCELLED, exit_code, reason, step
        return JobState.PREEMPTED, exit_code, reason, step
    fin = conds.get("Finished") or {}
    message = str(fin.get("message") or fin.get("reason") or "")
    if fin.get("reason") == "Succeeded":
        return JobState.COMPLETED, 0, message or None, None
    failed_jobs = failed_job_reasons(jobs)
    owner_failed = conditions(owner).get("Failed") if owner else None
    detail = [r for r, _ in failed_jobs if r]
    if is_true(owner_failed) and owner_failed.get("reason"):  # type: ignore[union-attr]
        detail.insert(0, str(owner_failed["reason"]))  # type: ignore[index]
    detail = list(dict.fromkeys(detail))
    restarts = int(((owner or {}).get("status") or {}).get("restarts") or 0)
    if restarts:
        detail.append(f"{restarts} JobSet restart{'s' if restarts != 1 else ''}")
    reason = f"{message} ({', '.join(detail)})" if detail and message else message or None
    if "DeadlineExceeded" in detail or "DeadlineExceeded" in message:
        return JobState.TIMEOUT, exit_code, reason, step
    if first is not None and first.oom:
        return JobState.OUT_OF_MEMORY, exit_code if exit_code is not None else 137, reason, step
    if first is not None and (
        first.disruption == "DeletionByTaintManager" or first.pod_reason == "NodeLost"
    ):
        return JobState.NODE_FAIL, exit_code, reason, step
    if first is not None and first.disruption == "PreemptionByScheduler":
        return JobState.PREEMPTED, exit_code, reason, step
    return JobState.FAILED, exit_code, reason, step


def start_time(
    wl: dict[str, Any], jobs: list[dict[str, Any]], pods: list[PodRef]
) -> datetime | None:
    conds = conditions(wl)
    for kind in ("Admitted", "QuotaReserved"):
        if is_true(conds.get(kind)):
            t = parse_time(conds[kind].get("lastTransitionTime"))
            if t is not None:
                return t
    starts = [parse_time((j.get("status") or {}).get("startTime")) for j in jobs]
    starts = [t for t in starts if t is not None]
    if starts:
        return min(starts)
    pod_starts = [p.started for p in pods if p.started is not None]
    if pod_starts:
        return min(pod_starts)
    return parse_time(metadata_of(wl).get("creationTimestamp"))


def topology_hosts(wl: dict[str, Any]) -> list[str]:
    """Host names from Kueue topology-aware scheduling (`topologyAssignment`), if used."""
    hosts: list[str] = []
    admission = (wl.get("status") or {}).get("admission") or {}
    for psa in admission.get("podSetAssignments") or []:
        ta = psa.get("topologyAssignment") or {}
        levels = ta.get("levels") or []
        if not levels or levels[-1] != "kubernetes.io/hostname":
            continue
        for d in ta.get("domains") or []:
            values = d.get("values") or []
            if values and values[-1] not in hosts:
                hosts.append(str(values[-1]))
    return hosts


def gpu_model(pods: list[dict[str, Any]]) -> str | None:
    for p in pods:
        selector = (p.get("spec") or {}).get("nodeSelector") or {}
        for key in GPU_PRODUCT_LABELS:
            if selector.get(key):
                return str(selector[key])
    return None
