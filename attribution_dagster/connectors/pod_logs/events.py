"""Reading the Kubernetes Events of a job's pods and nodes (paged lists, one record per
Event in the window). A mixin of PodLogsClient, which provides `api`, `name`, `_timeout`
and `_get_json`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attribution_dagster.connectors.pod_logs.state import (
    EVENTS_PAGE,
    Matcher,
    Pod,
    Run,
)
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.formats.kube_events import event_time, render_event
from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.core.locators import KubeObject


class EventReads:
    """The Event reads of PodLogsClient (see the module docstring)."""

    name: str

    def _read_events(self, run: Run, pods: list[Pod], matcher: Matcher) -> None:
        seen: set[str] = set()
        for pod in pods:
            self._list_events(
                run,
                f"list events -n {pod.namespace} --field-selector involvedObject.name={pod.name}",
                lambda cont, pod=pod: self.api.list_namespaced_event(
                    pod.namespace,
                    field_selector=f"involvedObject.name={pod.name}",
                    limit=EVENTS_PAGE,
                    _continue=cont,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
                matcher,
                seen,
            )
        k8s_nodes = list(dict.fromkeys([p.k8s_node for p in pods if p.k8s_node] + run.ctx.nodes))
        for name in k8s_nodes:
            selector = f"involvedObject.kind=Node,involvedObject.name={name}"
            self._list_events(
                run,
                f"list events -A --field-selector {selector}",
                lambda cont, selector=selector: self.api.list_event_for_all_namespaces(
                    field_selector=selector,
                    limit=EVENTS_PAGE,
                    _continue=cont,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
                matcher,
                seen,
            )

    def _list_events(
        self, run: Run, what: str, call: Callable[[str | None], Any], matcher: Matcher,
        seen: set[str],
    ) -> None:
        cont: str | None = None
        while not run.auth_failed:
            data = self._get_json(run, what, lambda cont=cont: call(cont))
            if not isinstance(data, dict):
                return
            for ev in data.get("items") or []:
                if isinstance(ev, dict):
                    self._keep_event(run, ev, matcher, seen)
            cont = (data.get("metadata") or {}).get("continue") or None
            if not cont:
                return

    def _keep_event(
        self, run: Run, ev: dict[str, Any], matcher: Matcher, seen: set[str]
    ) -> None:
        meta = ev.get("metadata") or {}
        ref = KubeObject(
            kind="event", namespace=str(meta.get("namespace", "")), name=str(meta.get("name", ""))
        )
        key = f"{ref.namespace}/{ref.name}"
        if key in seen:
            return
        seen.add(key)
        run.cov.lines += 1
        first, last = event_time(ev)
        window = run.window
        if first is not None and (first > window.end or (last or first) < window.start):
            run.cov.out_of_window += 1
            return
        line = render_event(ev)
        if not matcher.hit(line):
            return
        # An Event is the control plane writing about a node or pod, not a line the node
        # wrote: it is a cluster-level record, exactly as when a case holds the same Events
        # in a cluster-level file (logs/<dir>/events.txt). The parser catalog then names the
        # node from the Event (Node object, reporting kubelet, pod) and tags every observation
        # of the line as logged elsewhere, so liveness does not count it as the node writing,
        # whichever door the Event came through.
        run.records.append(
            RawRecord(
                source=self.name,
                node=CLUSTER_NODE,
                locator=ref,
                time=first,
                time_quality="exact" if first is not None else "unknown",
                text=line,
                stream="events",
            )
        )
        run.cov.records += 1

    # -- errors and coverage --------------------------------------------------------------
