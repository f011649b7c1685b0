"""Scheduler and orchestrator decoders: Slurm cancel reasons, Kubernetes evictions and Events.

Kubernetes Events come as `kubectl get events` rows or JSON items (core/formats/kube_events.py
reads every form); the decoders keep the ones whose REASON says the node went down, ran out
of memory, evicted the pod or ran out of disk, and move them to the node they are about.
"""

from __future__ import annotations

import re
from typing import Any

from attribution_dagster.rules.decoders.registry import Draft, decoder

_EVENT_ATTRS = [
    "event_reason", "event_type", "object", "namespace", "source", "first_seen", "last_seen",
    "host", "pod", "logged_on",
]  # fmt: skip


_CANCEL_REASONS = {
    "TIME LIMIT": "time_limit",
    "PREEMPTION": "preemption",
    "NODE FAILURE": "node_failure",
    "JOB REQUEUE": "requeue",
}


@decoder("slurm_cancel", attrs=["reason"])
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


@decoder("k8s_evicted", attrs=["reason", "resource"])
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


@decoder("k8s_event_node_down", attrs=[*_EVENT_ATTRS, "what"])
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


@decoder("k8s_event_host_oom", attrs=[*_EVENT_ATTRS, "victim", "victim_pid", "process", "pid"])
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


@decoder("k8s_event_evicted", attrs=[*_EVENT_ATTRS, "reason", "resource"])
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


@decoder("k8s_event_disk_pressure", attrs=[*_EVENT_ATTRS, "condition"])
def decode_k8s_event_disk_pressure(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """NodeHasDiskPressure (kubelet): the node's filesystem fell below the eviction
    threshold. attrs.condition = DiskPressure."""
    if _event(groups, text, draft, frozenset({"NodeHasDiskPressure"})) is None:
        return False
    draft["attrs"]["condition"] = "DiskPressure"
    return True
