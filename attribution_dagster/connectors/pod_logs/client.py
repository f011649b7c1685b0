"""Kubernetes pod logs and Events as an evidence source (`kind: pod_logs`).

On a Kubernetes cluster without a log store, what a failed job said is still in the API
while its pods exist: the container logs (current and, after a restart, the previous
container's) and the Events about its pods and nodes (NodeNotReady, SystemOOM, Evicted, ...;
kept about an hour by default). This source reads both for one job:

- pods: the context's `pods` (the Kueue connector fills them in), else pods found by
  `pod_selector` on the job's nodes;
- logs: `GET pods/{name}/log?timestamps=true&sinceSeconds=..&limitBytes=..` per container,
  streamed line by line; only lines holding a catalog anchor are kept (plus the continuation
  lines an anchor asks for). The RFC 3339 timestamp kubelet puts before each line is the
  record's time; reading a stream stops at the first line after the window;
- events: `list events` with field selectors `involvedObject.name=<pod>` (per pod) and
  `involvedObject.kind=Node,involvedObject.name=<node>` (per node), kept when they overlap
  the window, each rendered as ONE line in the `kubectl get events -A -o wide` layout
  (connectors/kube_events.py) so that the catalog reads an Event from the API and from a
  `kubectl get events` listing the same way.

Every record keeps a locator a person can reopen: `pod <ns>/<pod> container <c> [previous] @
<kubelet timestamp>` (`kubectl logs -n <ns> <pod> -c <c> [--previous] --timestamps`) or
`event <ns>/<name>` (`kubectl get event -n <ns> <name> -o yaml`).

Where each container log stops and its last training-progress line (the engine's silence and
progress tests, rules/liveness.py) are remembered on the way, one line each, and land in the
batch's `tails` / `progress` as the files connector puts a file's: one entry per
container log (pod, container, current or previous), `stream` the container name (pods of
one job differ by name, their containers do not: like is compared with like), times exact
(kubelet's). A log cut at `max_bytes_per_pod` or broken midway did not stop there: it gets
neither; nor does a previous container's log when its container's current log could not be
read to its end (its tail would pass for where the node stopped).

What could not be read is said in the coverage: a pod that no longer exists (404), a log cut
at `max_bytes_per_pod`, a request the API refused (401/403: not retryable) or that failed
(5xx, timeouts: retryable). No Dagster import here.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from attribution_dagster.connectors.base import BackendConfig, SourceError, SourceLimits, utc_now
from attribution_dagster.connectors.kubernetes.api import KubeConfigError, build_api_client
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, LogBatch, RawRecord, SourceCoverage
from attribution_dagster.core.formats.kube_events import event_time, render_event
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.locators import KubeObject
from attribution_dagster.core.settings import Window

MiB = 1024 * 1024
_KUBELET_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")
_PAGE = 500  # events per list request


class PodLogsConfig(BackendConfig):
    """`{kind: pod_logs, ...}` under `clusters.<name>.logs` in attribution.yaml.

    The API is reached, in this order of precedence, at `api_url` (tests, `kubectl proxy`),
    from inside the cluster (`in_cluster`: the pod's service account), or through a
    kubeconfig (`kubeconfig` / `context`, default $KUBECONFIG or ~/.kube/config).
    """

    kind: Literal["pod_logs"] = "pod_logs"
    kubeconfig: str | None = Field(default=None, description="kubeconfig path; default $KUBECONFIG")
    context: str | None = Field(default=None, description="kubeconfig context; default current")
    in_cluster: bool = Field(default=False, description="use the pod's service account")
    api_url: str | None = Field(
        default=None, description="API server URL used as is (kubectl proxy, tests)"
    )
    token_env: str | None = Field(
        default=None, description="with api_url: env var holding a bearer token"
    )
    verify_tls: bool = Field(default=True, description="with api_url: verify the server cert")
    namespaces: list[str] = Field(
        default_factory=list,
        description="read pods only in these namespaces (and search them with pod_selector); "
        "empty = any",
    )
    max_bytes_per_pod: int = Field(
        default=8 * MiB, ge=1024, description="log bytes read per pod, all containers together"
    )
    previous: bool = Field(
        default=True, description="also read the previous (restarted) containers"
    )
    events: bool = Field(default=True, description="also read Events of the pods and nodes")
    pod_selector: str | None = Field(
        default=None,
        description="label selector finding the job's pods when the context lists none; "
        "{job_name}, {job_id}, {namespace} are filled in, e.g. "
        "'jobset.sigs.k8s.io/jobset-name={job_name}'",
    )
    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")

    def client(self, cluster: str) -> PodLogsClient:
        return PodLogsClient(self, cluster=cluster)


# --- building the Kubernetes API client ------------------------------------------------------


def build_core_api(config: PodLogsConfig) -> Any:
    """A kubernetes CoreV1Api for the configured cluster (connectors/kubernetes/api.py).
    Raises SourceError (not transient) when no configuration can be loaded."""
    from kubernetes.client import CoreV1Api

    try:
        api = build_api_client(
            api_url=config.api_url, in_cluster=config.in_cluster, kubeconfig=config.kubeconfig,
            context=config.context, token_env=config.token_env, verify_tls=config.verify_tls,
        )  # fmt: skip
    except KubeConfigError as exc:
        raise SourceError(f"pod_logs: {exc}") from None
    return CoreV1Api(api)


# --- the client -------------------------------------------------------------------------------


@dataclass
class _Pod:
    namespace: str
    name: str
    k8s_node: str | None  # spec.nodeName
    node: str  # the job node it resolves to (or the Kubernetes name when it does not)
    containers: list[str]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class _Run:
    """What one fetch_logs call has read so far."""

    ctx: ExecutionContext
    window: Window
    index: NodeIndex
    cov: SourceCoverage
    records: list[RawRecord] = field(default_factory=list)
    tails: list[RawRecord] = field(default_factory=list)  # LogBatch.tails
    progress: list[RawRecord] = field(default_factory=list)  # LogBatch.progress
    ok_queries: int = 0
    transient: bool = False
    auth_failed: bool = False

    def error(self, message: str, *, transient: bool = False) -> None:
        self.cov.errors.append(message[:500])
        self.transient = self.transient or transient


@dataclass
class _Ends:
    """Where one container log stops: its last timed line and its last progress line (the
    records the engine's liveness reads), until the container's logs are known whole."""

    previous: bool
    tail: RawRecord | None = None
    progress: RawRecord | None = None


class _Matcher:
    """Which lines to keep: any anchor literal, and how many continuation lines it asks for;
    which lines are training progress (`last_only` anchors: only a log's last one is kept)."""

    def __init__(self, anchors: Sequence[Anchor]) -> None:
        last = sorted({a.literal for a in anchors if a.last_only}, key=len, reverse=True)
        self._progress_rx = re.compile("|".join(map(re.escape, last))) if last else None
        anchors = [a for a in anchors if not a.last_only]  # progress: not every line of it
        lits = sorted({a.literal for a in anchors}, key=len, reverse=True)
        self._rx = re.compile("|".join(map(re.escape, lits))) if lits else None
        self._context = [(a.literal, a.context_after) for a in anchors if a.context_after]

    def hit(self, text: str) -> bool:
        return self._rx is not None and self._rx.search(text) is not None

    def progress(self, text: str) -> bool:
        return self._progress_rx is not None and self._progress_rx.search(text) is not None

    def context_after(self, text: str) -> int:
        return max((n for lit, n in self._context if lit in text), default=0)


class PodLogsClient:
    """Reads one job's pod logs and Events through the Kubernetes API (LogSource).

    `api` is a kubernetes CoreV1Api (built from the config on first use when not given);
    `now` is injectable so that `sinceSeconds` is reproducible in tests.
    """

    def __init__(
        self,
        config: PodLogsConfig,
        *,
        cluster: str | None = None,
        api: Any | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.name = config.source_name
        self._api = api
        self._now = now

    @property
    def api(self) -> Any:
        if self._api is None:
            self._api = build_core_api(self.config)
        return self._api

    @property
    def _where(self) -> str:
        host = getattr(getattr(self._api, "api_client", None), "configuration", None)
        url = getattr(host, "host", None)
        return f"Kubernetes API at {url}" if url else "Kubernetes API"

    def with_max_line_bytes(self, limit: int) -> PodLogsClient:
        """This client cutting lines at `limit` when that is below its own `max_line_bytes`
        (the analysis setting can lower a source's cap, not raise it)."""
        if limit >= self.config.max_line_bytes:
            return self
        other = copy.copy(self)
        other._api = self.api  # one API client for both (raises SourceError like fetch_logs)
        other.config = self.config.model_copy(update={"max_line_bytes": limit})
        return other

    # -- LogSource ------------------------------------------------------------------------
    def fetch_logs(
        self,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        limits: SourceLimits | None = None,
    ) -> LogBatch:
        if limits is not None and limits.max_line_bytes is not None:
            capped = self.with_max_line_bytes(limits.max_line_bytes)
            if capped is not self:
                return capped.fetch_logs(ctx, anchors, window)
        self.api  # noqa: B018 - a configuration that cannot load raises SourceError here
        run = _Run(ctx, window, NodeIndex.of(ctx), SourceCoverage(source=self.name))
        matcher = _Matcher(anchors)
        pods = self._pods(run)
        for pod in pods:
            if run.auth_failed:
                break
            self._read_pod(run, pod, matcher)
        if self.config.events and not run.auth_failed:
            self._read_events(run, pods, matcher)
        cov = self._finish(run, pods)
        return LogBatch(records=run.records, tails=run.tails, progress=run.progress, coverage=cov)

    # -- pods -----------------------------------------------------------------------------
    def _pods(self, run: _Run) -> list[_Pod]:
        ctx, ns_ok = run.ctx, set(self.config.namespaces)
        pods: list[_Pod] = []
        if ctx.pods:
            for ref in ctx.pods:
                if run.auth_failed:
                    break
                if ns_ok and ref.namespace not in ns_ok:
                    continue
                containers, k8s_node = list(ref.containers), ref.node
                if not containers or not k8s_node:
                    spec = self._describe_pod(run, ref.namespace, ref.name)
                    if spec is None:
                        continue
                    containers = containers or spec[0]
                    k8s_node = k8s_node or spec[1]
                node = run.index.resolve(k8s_node) or run.index.resolve(ref.host_ip) or k8s_node
                pods.append(_Pod(ref.namespace, ref.name, k8s_node, node or "unknown", containers))
            return pods
        if not self.config.pod_selector:
            run.error(
                "pod_logs: the context lists no pods and pod_selector is not set: "
                "no pod logs read (set clusters.<name>.logs[].pod_selector)"
            )
            return pods
        return self._select_pods(run)

    def _describe_pod(self, run: _Run, namespace: str, name: str) -> tuple[list[str], str] | None:
        """(containers, nodeName) of a pod the context names without them; None when gone."""
        data = self._get_json(
            run,
            f"get pod {namespace}/{name}",
            lambda: self.api.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=self._timeout
            ),
            pod=f"{namespace}/{name}",
        )
        if not isinstance(data, dict):
            return None
        spec = data.get("spec") or {}
        containers = [c.get("name") for c in spec.get("containers") or [] if c.get("name")]
        return containers, spec.get("nodeName") or ""

    def _select_pods(self, run: _Run) -> list[_Pod]:
        ctx = run.ctx
        job_name = ctx.job_name or ctx.job_id.rsplit("/", 1)[-1]
        namespace = ctx.job_id.split("/", 1)[0] if "/" in ctx.job_id else ""
        try:
            selector = self.config.pod_selector.format(  # type: ignore[union-attr]
                job_name=job_name, job_id=ctx.job_id, namespace=namespace
            )
        except (KeyError, IndexError, ValueError) as exc:
            run.error(f"pod_logs: pod_selector {self.config.pod_selector!r} is invalid ({exc})")
            return []
        items: list[dict[str, Any]] = []
        for ns in self.config.namespaces or [None]:
            what = f"list pods -l {selector}" + (f" -n {ns}" if ns else " -A")
            if ns:
                call = lambda ns=ns: self.api.list_namespaced_pod(  # noqa: E731
                    ns, label_selector=selector, _preload_content=False,
                    _request_timeout=self._timeout,
                )
            else:
                call = lambda: self.api.list_pod_for_all_namespaces(  # noqa: E731
                    label_selector=selector, _preload_content=False,
                    _request_timeout=self._timeout,
                )
            data = self._get_json(run, what, call)
            if isinstance(data, dict):
                items.extend(i for i in data.get("items") or [] if isinstance(i, dict))
        pods = []
        for item in items:
            meta, spec = item.get("metadata") or {}, item.get("spec") or {}
            node = run.index.resolve(spec.get("nodeName"))
            if node is None:  # a pod of that name elsewhere: not this run's
                continue
            containers = [c.get("name") for c in spec.get("containers") or [] if c.get("name")]
            pods.append(
                _Pod(meta.get("namespace", ""), meta.get("name", ""), spec.get("nodeName"),
                     node, containers)
            )
        if not pods:
            run.error(f"pod_logs: no pod matching {selector!r} ran on the job's nodes")
        return pods

    # -- logs -----------------------------------------------------------------------------
    @property
    def _timeout(self) -> float:
        return self.config.timeout_seconds

    def _since_seconds(self, window: Window) -> int:
        return max(1, math.ceil((self._now() - window.start).total_seconds()))

    def _read_pod(self, run: _Run, pod: _Pod, matcher: _Matcher) -> None:
        budget = self.config.max_bytes_per_pod
        read_any = False
        for container in pod.containers:
            ends: list[_Ends] = []  # previous, then current: kept when the current one ended
            for previous in ([True, False] if self.config.previous else [False]):
                if budget <= 0:
                    run.error(
                        f"pod {pod.ref}: log read stopped at max_bytes_per_pod "
                        f"({self.config.max_bytes_per_pod} bytes); container {container}"
                        f"{' (previous)' if previous else ''} not read"
                    )
                    continue
                got = self._read_stream(run, pod, container, previous, budget, matcher, ends)
                if got is None:  # the pod is gone or the API refused: stop with this pod
                    return
                if got >= 0:
                    read_any = True
                    budget -= got
            current_whole = bool(ends) and not ends[-1].previous  # the current log: whole
            if current_whole:  # where each of the container's logs stops (engine: liveness)
                for e in ends:
                    if e.tail is not None:
                        run.tails.append(e.tail)
                    if e.progress is not None:
                        run.progress.append(e.progress)
        if read_any:
            run.cov.pods_read.append(pod.ref)
        elif pod.ref not in run.cov.pods_missing:
            run.cov.pods_missing.append(pod.ref)

    def _read_stream(
        self, run: _Run, pod: _Pod, container: str, previous: bool, budget: int,
        matcher: _Matcher, ends: list[_Ends],
    ) -> int | None:
        """Bytes read from one container log (-1: nothing to read there; None: stop this pod).
        A log read to its end appends where it stops to `ends`."""
        what = f"logs of pod {pod.ref} container {container}" + (" (previous)" if previous else "")
        run.cov.queries += 1
        try:
            resp = self.api.read_namespaced_pod_log(
                pod.name,
                pod.namespace,
                container=container,
                previous=previous,
                timestamps=True,
                since_seconds=self._since_seconds(run.window),
                limit_bytes=budget,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes coverage
            status, message = _api_error(exc)
            if status == 400 and "previous terminated container" in message:
                run.ok_queries += 1
                return -1  # the container never restarted: no previous log
            if status == 404:
                run.ok_queries += 1
                run.error(f"pod {pod.ref} no longer exists (404): its logs are gone")
                if pod.ref not in run.cov.pods_missing:
                    run.cov.pods_missing.append(pod.ref)
                return None
            self._fail(run, what, exc, pod=pod.ref)
            return None if status in (401, 403) else -1
        run.ok_queries += 1
        got, stopped, end = self._scan_stream(run, resp, pod, container, previous, matcher, what)
        if got >= budget and not stopped:
            run.error(
                f"pod {pod.ref} container {container}{' (previous)' if previous else ''}: "
                f"log cut at max_bytes_per_pod ({self.config.max_bytes_per_pod} bytes); "
                "later lines not read, where it stops is not known"
            )
        elif end is not None:  # read to its end (or past the window): where it stops is known
            ends.append(end)
        run.cov.files += 1
        return got

    def _scan_stream(
        self, run: _Run, resp: Any, pod: _Pod, container: str, previous: bool,
        matcher: _Matcher, what: str,
    ) -> tuple[int, bool, _Ends | None]:
        """(bytes read, stopped early because a line was past the window end, where the log
        stops: its last timed line and last progress line; None when the stream broke)."""
        cov, window = run.cov, run.window
        def where(field: str) -> KubeObject:  # this container log's line at `field`
            return KubeObject(
                kind="pod_log", namespace=pod.namespace, name=pod.name, container=container,
                previous=previous, field=field,
            )  # fmt: skip

        recs: list[dict[str, Any]] = []  # RawRecord fields; continuation lines still come
        pending: list[list[Any]] = []  # [record fields, lines still wanted]
        got, stopped, lineno = 0, False, 0
        # the last timed line and the last progress line: (stamp, time, text); one each
        tail: tuple[str, datetime, str] | None = None
        prog: tuple[str | None, datetime | None, str, int] | None = None
        broken = False
        try:
            for raw in _lines(resp):
                got += len(raw) + 1
                lineno += 1
                cov.lines += 1
                if len(raw) > self.config.max_line_bytes:
                    cov.overlong_lines += 1
                    raw = raw[: self.config.max_line_bytes]
                m = _KUBELET_TS.match(raw)
                stamp = m.group(1).decode() if m else None
                body = raw[m.end() :] if m else raw
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError:
                    cov.invalid_utf8_lines += 1
                    text = body.decode("utf-8", "replace")
                text = text.rstrip("\r")
                when = _parse_ts(stamp)
                if when is not None:
                    tail = (stamp, when, text)  # type: ignore[assignment]
                if matcher.progress(text):
                    prog = (stamp, when, text, lineno)
                if pending:
                    for item in pending:
                        item[0]["text"] += "\n" + text
                        item[1] -= 1
                    pending = [p for p in pending if p[1] > 0]
                if when is not None and when > window.end:
                    cov.out_of_window += 1  # and everything after it: stop reading
                    stopped = True
                    break
                if when is not None and when < window.start:
                    cov.out_of_window += 1
                    continue
                if not matcher.hit(text):
                    continue
                rec = {
                    "source": self.name,
                    "node": pod.node,
                    "locator": where(stamp or f"line {lineno}"),
                    "time": when,
                    "time_quality": "exact" if when is not None else "unknown",
                    "text": text,
                    "stream": container,
                }
                recs.append(rec)
                need = matcher.context_after(text)
                if need:
                    pending.append([rec, need])
        except Exception as exc:  # noqa: BLE001 - a stream cut midway keeps what it gave
            self._fail(run, what + " (stream cut)", exc, pod=pod.ref)
            broken = True
        finally:
            _close(resp)
            cov.bytes += got
        run.records.extend(RawRecord(**rec) for rec in recs)
        cov.records += len(recs)
        if broken:
            return got, stopped, None
        end = _Ends(previous=previous)
        if tail is not None:
            stamp, when, text = tail
            end.tail = RawRecord(
                source=self.name, node=pod.node, locator=where(stamp), time=when,
                text=text, stream=container, last_of_file=True,
            )  # fmt: skip
        if prog is not None:
            stamp, when, text, at = prog
            end.progress = RawRecord(
                source=self.name, node=pod.node, locator=where(stamp or f"line {at}"),
                time=when, time_quality="exact" if when is not None else "unknown",
                text=text, stream=container,
            )  # fmt: skip
        return got, stopped, end

    # -- events ---------------------------------------------------------------------------
    def _read_events(self, run: _Run, pods: list[_Pod], matcher: _Matcher) -> None:
        seen: set[str] = set()
        for pod in pods:
            self._list_events(
                run,
                f"list events -n {pod.namespace} --field-selector involvedObject.name={pod.name}",
                lambda cont, pod=pod: self.api.list_namespaced_event(
                    pod.namespace,
                    field_selector=f"involvedObject.name={pod.name}",
                    limit=_PAGE,
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
                    limit=_PAGE,
                    _continue=cont,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
                matcher,
                seen,
            )

    def _list_events(
        self, run: _Run, what: str, call: Callable[[str | None], Any], matcher: _Matcher,
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
        self, run: _Run, ev: dict[str, Any], matcher: _Matcher, seen: set[str]
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
    def _get_json(
        self, run: _Run, what: str, call: Callable[[], Any], pod: str | None = None
    ) -> Any:
        """One request answering JSON (read with _preload_content=False, so the body is the
        API's own camelCase shape); None after a failure, which is recorded."""
        run.cov.queries += 1
        try:
            resp = call()
            try:
                body = resp.data
            finally:
                _close(resp)
        except Exception as exc:  # noqa: BLE001
            status, _ = _api_error(exc)
            if status == 404 and pod is not None:
                run.ok_queries += 1
                run.error(f"pod {pod} no longer exists (404): its logs are gone")
                if pod not in run.cov.pods_missing:
                    run.cov.pods_missing.append(pod)
                return None
            self._fail(run, what, exc, pod=pod)
            return None
        run.ok_queries += 1
        run.cov.bytes += len(body or b"")
        try:
            return json.loads(body or b"null")
        except ValueError:
            run.error(f"{self._where}: {what}: the answer is not JSON")
            return None

    def _fail(self, run: _Run, what: str, exc: BaseException, pod: str | None = None) -> None:
        status, message = _api_error(exc)
        if status in (401, 403):
            hint = (
                "check the credentials (kubeconfig user, service account token)"
                if status == 401
                else "grant the RBAC permission (docs/kubernetes-logs.md: get pods/log, "
                "get/list pods, list events)"
            )
            run.error(f"{self._where} answered {status} for {what}: {message}; {hint}")
            run.auth_failed = run.auth_failed or status == 401
        elif status is None or status == 429 or status >= 500:
            label = f"answered {status}" if status else "failed"
            run.error(f"{self._where} {label} for {what}: {message}", transient=True)
        else:
            run.error(f"{self._where} answered {status} for {what}: {message}")
        if pod is not None and status in (401, 403) and pod not in run.cov.pods_missing:
            run.cov.pods_missing.append(pod)

    def _finish(self, run: _Run, pods: list[_Pod]) -> SourceCoverage:
        cov = run.cov
        read_nodes = {p.node for p in pods if p.ref in cov.pods_read}
        cov.nodes_read = [n for n in run.ctx.nodes if n in read_nodes]
        cov.nodes_missing = [n for n in run.ctx.nodes if n not in read_nodes]
        cov.retryable = run.transient
        if cov.errors and run.ok_queries == 0:
            cov.status = "failed"
        elif cov.errors or cov.pods_missing:
            cov.status = "partial"
        elif not pods and not cov.records:
            cov.status = "empty"
        else:
            cov.status = "ok"
        return cov


# --- helpers ----------------------------------------------------------------------------------


def _parse_ts(stamp: str | None) -> datetime | None:
    from attribution_dagster.core.formats.kube_events import parse_time

    return parse_time(stamp) if stamp else None


def _lines(resp: Any, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """Lines of a streamed urllib3 response, without their newline."""
    carry = b""
    stream = resp.stream(chunk) if hasattr(resp, "stream") else iter([resp.data])
    for block in stream:
        if not block:
            continue
        carry += block
        parts = carry.split(b"\n")
        carry = parts.pop()
        yield from parts
    if carry:
        yield carry


def _close(resp: Any) -> None:
    for name in ("release_conn", "close"):
        fn = getattr(resp, name, None)
        if callable(fn):
            try:
                fn()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def _api_error(exc: BaseException) -> tuple[int | None, str]:
    """(HTTP status or None for a transport failure, one-line message) of a client error."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        body = getattr(exc, "body", None)
        message = ""
        if body:
            try:
                data = json.loads(body)
                message = str(data.get("message") or "") if isinstance(data, dict) else ""
            except (ValueError, TypeError):
                message = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        message = message or str(getattr(exc, "reason", "") or "")
        return status, " ".join(message.split())[:300]
    reason = getattr(exc, "reason", None)  # urllib3 MaxRetryError wraps the cause
    text = str(reason or exc) or type(exc).__name__
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        text = f"timed out ({text})"
    return None, " ".join(text.split())[:300]
