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
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from attribution_dagster.connectors.base import (
    BackendConfig,
    OwnLineCap,
    SourceError,
    SourceLimits,
    utc_now,
)
from attribution_dagster.connectors.http import is_transient
from attribution_dagster.connectors.kubernetes.api import KubeConfigError, build_api_client
from attribution_dagster.connectors.pod_logs.events import EventReads
from attribution_dagster.connectors.pod_logs.state import (
    Matcher,
    MiB,
    Pod,
    Run,
    api_error,
    close_response,
)
from attribution_dagster.connectors.pod_logs.streams import StreamReads
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, LogBatch, SourceCoverage
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.settings import Window


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


class PodLogsClient(OwnLineCap, StreamReads, EventReads):
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

    @property
    def own_max_line_bytes(self) -> int:
        return self.config.max_line_bytes

    def _with_cap(self, limit: int) -> PodLogsClient:
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
        source = self.capped(limits)
        if source is not self:  # the analysis cap is below this source's own
            return source.fetch_logs(ctx, anchors, window)
        self.api  # noqa: B018 - a configuration that cannot load raises SourceError here
        run = Run(ctx, window, NodeIndex.of(ctx), SourceCoverage(source=self.name))
        matcher = Matcher(anchors)
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
    def _pods(self, run: Run) -> list[Pod]:
        ctx, ns_ok = run.ctx, set(self.config.namespaces)
        pods: list[Pod] = []
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
                pods.append(Pod(ref.namespace, ref.name, k8s_node, node or "unknown", containers))
            return pods
        if not self.config.pod_selector:
            run.error(
                "pod_logs: the context lists no pods and pod_selector is not set: "
                "no pod logs read (set clusters.<name>.logs[].pod_selector)"
            )
            return pods
        return self._select_pods(run)

    def _describe_pod(self, run: Run, namespace: str, name: str) -> tuple[list[str], str] | None:
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

    def _select_pods(self, run: Run) -> list[Pod]:
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
                Pod(meta.get("namespace", ""), meta.get("name", ""), spec.get("nodeName"),
                     node, containers)
            )
        if not pods:
            run.error(f"pod_logs: no pod matching {selector!r} ran on the job's nodes")
        return pods

    # -- logs -----------------------------------------------------------------------------
    def _get_json(
        self, run: Run, what: str, call: Callable[[], Any], pod: str | None = None
    ) -> Any:
        """One request answering JSON (read with _preload_content=False, so the body is the
        API's own camelCase shape); None after a failure, which is recorded."""
        run.cov.queries += 1
        try:
            resp = call()
            try:
                body = resp.data
            finally:
                close_response(resp)
        except Exception as exc:  # noqa: BLE001
            status, _ = api_error(exc)
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

    def _fail(self, run: Run, what: str, exc: BaseException, pod: str | None = None) -> None:
        status, message = api_error(exc)
        if status in (401, 403):
            hint = (
                "check the credentials (kubeconfig user, service account token)"
                if status == 401
                else "grant the RBAC permission (docs/kubernetes-logs.md: get pods/log, "
                "get/list pods, list events)"
            )
            run.error(f"{self._where} answered {status} for {what}: {message}; {hint}")
            run.auth_failed = run.auth_failed or status == 401
        elif status is None or is_transient(status):
            label = f"answered {status}" if status else "failed"
            run.error(f"{self._where} {label} for {what}: {message}", transient=True)
        else:
            run.error(f"{self._where} answered {status} for {what}: {message}")
        if pod is not None and status in (401, 403) and pod not in run.cov.pods_missing:
            run.cov.pods_missing.append(pod)

    def _finish(self, run: Run, pods: list[Pod]) -> SourceCoverage:
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
