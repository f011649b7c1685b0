"""Kueue scheduler: finished Workloads, their JobSet / Job, and where their pods ran.

One Kueue `Workload` (`kueue.x-k8s.io`) is one job run: `job_id` is `<namespace>/<name>`.
The client reads the Workload's conditions, the owning JobSet (`jobset.x-k8s.io`) or
batch Job (and a JobSet's child Jobs), and the pods (by the `jobset.sigs.k8s.io/jobset-name`
or `batch.kubernetes.io/job-name` label) through the official `kubernetes` client, with an
`ApiClient` of its own so two clusters (two kubeconfig contexts) coexist in one process.

Long on purpose (about 630 lines): the state mapping below reads the Workload, its JobSet or
Job and its pods together; the object readers (objects.py) and placements (placements.py)
are already apart, and what is left is one decision table and the queries it needs.

When a workload "ended" (`finished_jobs` lists those that ended in the window):

- `Finished=True`: end is that condition's `lastTransitionTime`;
- otherwise `Evicted=True` (preempted, PodsReady timeout, deactivated, admission check):
  the run ended at the eviction even if Kueue may requeue the workload later.

Start is the admission (`Admitted`, else `QuotaReserved` condition time while True), else
the Job's `status.startTime`, else the earliest pod start, else the Workload's creation.

State mapping (Slurm vocabulary, checked in this order):

| Kubernetes | state |
| --- | --- |
| `Finished` reason `Succeeded` | COMPLETED |
| failed; a Job (or JobSet child Job) failed with `DeadlineExceeded` | TIMEOUT |
| failed; the FIRST failed container was `OOMKilled` (exit 137) | OUT_OF_MEMORY |
| failed; the first failed pod lost its node (`DeletionByTaintManager`, `NodeLost`) | NODE_FAIL |
| failed; the first failed pod was preempted by the kube-scheduler | PREEMPTED |
| any other failure (`BackoffLimitExceeded`, JobSet `FailedJobs`, ...) | FAILED |
| `Evicted` `InactiveWorkload` / `Deactivated` (a user or the requeue limit) | CANCELLED |
| `Evicted` otherwise (`Preempted`, `PodsReadyTimeout`, `AdmissionCheck`, ...) | PREEMPTED |

("failed" = `Finished` True with reason `Failed`; pod conditions are `DisruptionTarget`.)

An OOM kill that did not end the job (a restarted container, or a pod that died after the
first failure) does not make the job OUT_OF_MEMORY. `exit_code` and `failing_step` come from
the first failed container (earliest `finishedAt`; a SIGTERM/SIGKILL teardown exit loses a
tie); `reason` is the Kueue condition's message with the Job/JobSet failure reason.

Pods of finished jobs are garbage-collected within minutes. The client takes an optional
`placements` reader (`(cluster, namespace, workload) -> list[PodRef]`, e.g.
`connectors.kueue.placements.PlacementStore.pods_for`) and merges the recorded placements
in for pods that are gone; `running_placements()` lists what to record while workloads run.

Modules: kueue/objects.py reads the API's objects (no calls), kueue/placements.py holds the
placement record; this one (about 620 lines, a third of them this docstring and the API
error mapping) is the client: connection, paged calls, errors, workload -> context.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from attribution_dagster.connectors.base import (
    BackendConfig,
    JobNotFound,
    JobQuery,
    SchedulerError,
    utc_now,
)
from attribution_dagster.connectors.http import is_transient
from attribution_dagster.connectors.kubernetes.api import KubeConfigError, build_api_client
from attribution_dagster.connectors.kueue.objects import (
    classify,
    controller_owner,
    gpu_model,
    metadata_of,
    pod_gpus,
    pod_ips,
    pod_ref,
    start_time,
    topology_hosts,
    workload_end,
    workload_gpus,
    workload_running,
)
from attribution_dagster.connectors.kueue.placements import (
    PlacementReader,
    PodPlacement,
    store_reader,
)
from attribution_dagster.core.context import ExecutionContext

if TYPE_CHECKING:  # the kubernetes package is imported when a client first talks to a cluster
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)

KUEUE_GROUP = "kueue.x-k8s.io"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"

"""(cluster, namespace, workload name) -> the recorded pods of that workload."""


class KueueConfig(BackendConfig):
    """`scheduler: {kind: kueue, ...}`: a Kubernetes cluster whose batch jobs Kueue admits.

    Authentication comes from a kubeconfig (a file and context) or, inside a pod, from the
    service account (`in_cluster: true`). No secret is written here.
    """

    kind: Literal["kueue"] = "kueue"
    kubeconfig: str | None = Field(
        default=None, description="kubeconfig path; default $KUBECONFIG or ~/.kube/config"
    )
    context: str | None = Field(default=None, description="kubeconfig context; default current")
    in_cluster: bool = Field(default=False, description="use the pod's service account")
    namespaces: tuple[str, ...] = Field(default=(), description="empty = every namespace")
    api_url: str | None = Field(
        default=None, description="API server URL overriding the kubeconfig's (kubectl proxy)"
    )
    kueue_version: str = Field(default="v1beta1", description="Workload API version")
    jobset_version: str = Field(default="v1alpha2", description="JobSet API version")
    page_size: int = Field(default=500, ge=1, le=10000, description="list page size (`limit`)")
    placements_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the pod placement record (usually the results "
        "database); enables the fallback for garbage-collected pods",
    )
    placements_password_env: str | None = Field(
        default=None, description="NAME of the env var holding that database's password"
    )

    @field_validator("placements_url")
    @classmethod
    def _no_password(cls, v: str | None) -> str | None:
        if v:
            from sqlalchemy.engine import make_url

            if make_url(v).password:
                raise ValueError(
                    "placements_url must not hold a password: name the environment "
                    "variable holding it in placements_password_env"
                )
        return v

    def client(
        self,
        cluster: str,
        *,
        api_client: ApiClient | None = None,
        placements: PlacementReader | None = None,
    ) -> KueueClient:
        if placements is None and self.placements_url:
            placements = store_reader(self.placements_url, self.placements_password_env)
        return KueueClient(self, cluster, api_client=api_client, placements=placements)


class _Unplaced(Exception):
    """A workload whose pods are gone and whose placement was never recorded."""


# -- the client -------------------------------------------------------------------------------


class KueueClient:
    """A `SchedulerClient` over one cluster's Kubernetes API (see the module docstring)."""

    def __init__(
        self,
        config: KueueConfig,
        cluster: str,
        *,
        api_client: ApiClient | None = None,
        placements: PlacementReader | None = None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.placements = placements
        self._api_client = api_client
        self.unplaced: list[str] = []  # workloads the last listing had to leave out

    # -- connection ---------------------------------------------------------------------------

    @property
    def api_client(self) -> ApiClient:
        if self._api_client is None:
            self._api_client = self._build_api_client()
        return self._api_client

    def _build_api_client(self) -> ApiClient:
        c = self.config
        try:
            return build_api_client(
                api_url=c.api_url, in_cluster=c.in_cluster, kubeconfig=c.kubeconfig,
                context=c.context,
            )  # fmt: skip
        except KubeConfigError as exc:
            raise SchedulerError(f"cluster {self.cluster}: {exc}") from None

    @property
    def host(self) -> str:
        return str(getattr(self.api_client.configuration, "host", "") or "the API server")

    def _call(self, what: str, resource: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run one API call (raw JSON); map every failure to a one-line SchedulerError.

        `what` is the RBAC verb (`list`, `get`), `resource` is `<plural>.<group>` or `pods`.
        """
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(
                *args, _preload_content=False, _request_timeout=self.config.timeout_seconds, **kw
            )
            data = resp.data if hasattr(resp, "data") else resp
            return json.loads(data) if isinstance(data, (bytes, str)) else data
        except ApiException as exc:
            raise self._api_error(exc, what, resource) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError):
            raise SchedulerError(
                f"Kubernetes API at {self.host} did not answer within "
                f"{self.config.timeout_seconds:g}s ({what} {resource})",
                transient=True,
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            timed_out = (
                "timed out" in str(exc).lower()
                or "timeout" in type(getattr(exc, "reason", None)).__name__.lower()
            )
            if timed_out:
                raise SchedulerError(
                    f"Kubernetes API at {self.host} did not answer within "
                    f"{self.config.timeout_seconds:g}s ({what} {resource})",
                    transient=True,
                ) from None
            cause = getattr(exc, "reason", None) or exc
            errno = re.search(r"\[Errno -?\d+\][^'\"()]*", str(cause))
            detail = errno.group(0).strip() if errno else type(cause).__name__
            # A name that does not resolve is a configuration problem, not a passing one.
            unknown_name = "Name or service not known" in detail or "[Errno -2]" in detail
            raise SchedulerError(
                f"Kubernetes API at {self.host} is unreachable ({what} {resource}): {detail}",
                transient=not unknown_name,
            ) from None
        except ValueError as exc:
            raise SchedulerError(
                f"Kubernetes API at {self.host} answered {what} {resource} with invalid JSON "
                f"({exc})"
            ) from None

    def _api_error(self, exc: Any, what: str, resource: str) -> SchedulerError:
        status = int(getattr(exc, "status", 0) or 0)
        body: dict[str, Any] = {}
        try:
            body = json.loads(getattr(exc, "body", None) or "{}")
        except (TypeError, ValueError):
            pass
        message = (
            str(body.get("message") or getattr(exc, "reason", "") or "").splitlines() or [""]
        )[0][:300]
        prefix = f"Kubernetes API at {self.host} answered {status}"
        if status == 401:
            return SchedulerError(
                f"{prefix} Unauthorized to {what} {resource}: the credentials of "
                f"{self._credentials()} are missing, invalid or expired"
            )
        if status == 403:
            return SchedulerError(
                f"{prefix} Forbidden: grant verb '{what}' on resource '{resource}' to "
                f"{self._credentials()} (docs/kubernetes.md, RBAC): {message}"
            )
        if status == 404:
            details = body.get("details") or {}
            if not details.get("name") and resource.endswith(KUEUE_GROUP):
                return SchedulerError(
                    f"Kueue is not installed on cluster {self.cluster}: {self.host} has no "
                    f"{resource}/{self.config.kueue_version} API (install Kueue, or set "
                    "kueue_version)"
                )
            if not details.get("name") and resource.endswith(JOBSET_GROUP):
                return SchedulerError(
                    f"JobSet is not installed on cluster {self.cluster}: {self.host} has no "
                    f"{resource}/{self.config.jobset_version} API"
                )
            return JobNotFound(f"{prefix} Not Found for {what} {resource}: {message}")
        if status == 410:  # an expired `continue` token: listing again from the start works
            return SchedulerError(f"{prefix} Gone to {what} {resource}: {message}", transient=True)
        if is_transient(status):
            return SchedulerError(f"{prefix} to {what} {resource}: {message}", transient=True)
        if status == 0:
            return SchedulerError(f"Kubernetes API at {self.host}: {message}")
        return SchedulerError(f"{prefix} to {what} {resource}: {message}")

    def _credentials(self) -> str:
        c = self.config
        if c.in_cluster:
            return "the pod's service account"
        if c.kubeconfig or not c.api_url:
            return f"kubeconfig {c.kubeconfig or '(default)'} context {c.context or '(current)'}"
        return f"the client of {c.api_url}"

    # -- listing ------------------------------------------------------------------------------

    def _paged(
        self, what: str, resource: str, fn: Callable[..., Any], *args: Any, **kw: Any
    ) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self._call(
                what,
                resource,
                fn,
                *args,
                limit=self.config.page_size,
                **({"_continue": token} if token else {}),
                **kw,
            )
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def _custom(self) -> Any:
        from kubernetes.client import CustomObjectsApi

        return CustomObjectsApi(self.api_client)

    def _core(self) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.api_client)

    def _batch(self) -> Any:
        from kubernetes.client import BatchV1Api

        return BatchV1Api(self.api_client)

    def _namespaces(self, wanted: Iterable[str] = ()) -> list[str]:
        """The namespaces to list: the query's within the configured ones; [] = all."""
        wanted = tuple(wanted)
        conf = self.config.namespaces
        if conf and wanted:
            keep = [n for n in wanted if n in conf]
            if not keep:
                raise SchedulerError(
                    f"cluster {self.cluster}: namespaces {', '.join(wanted)} are outside the "
                    f"configured ones ({', '.join(conf)})"
                )
            return keep
        return list(wanted or conf)

    def workloads(self, namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
        api, v = self._custom(), self.config.kueue_version
        resource = f"workloads.{KUEUE_GROUP}"
        nss = self._namespaces(namespaces)
        if not nss:
            return list(
                self._paged(
                    "list", resource, api.list_cluster_custom_object, KUEUE_GROUP, v, "workloads"
                )
            )
        out: list[dict[str, Any]] = []
        for ns in nss:
            out.extend(
                self._paged(
                    "list",
                    resource,
                    api.list_namespaced_custom_object,
                    KUEUE_GROUP,
                    v,
                    ns,
                    "workloads",
                )
            )
        return out

    def _pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return list(
            self._paged(
                "list", "pods", self._core().list_namespaced_pod, namespace, label_selector=selector
            )
        )

    def _owner_objects(
        self, wl: dict[str, Any]
    ) -> tuple[str | None, dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
        """(owner 'Kind/name', owner object, Jobs, pods) of a workload; gone objects are empty."""
        ns = str(metadata_of(wl).get("namespace", ""))
        owner = controller_owner(wl)
        if owner is None:
            return None, None, [], []
        kind, name = owner
        if kind == "JobSet":
            try:
                obj = self._call(
                    "get",
                    f"jobsets.{JOBSET_GROUP}",
                    self._custom().get_namespaced_custom_object,
                    JOBSET_GROUP,
                    self.config.jobset_version,
                    ns,
                    "jobsets",
                    name,
                )
            except JobNotFound:
                obj = None
            selector = f"{JOBSET_NAME_LABEL}={name}"
            jobs = list(
                self._paged(
                    "list",
                    "jobs.batch",
                    self._batch().list_namespaced_job,
                    ns,
                    label_selector=selector,
                )
            )
            return f"JobSet/{name}", obj, jobs, self._pods(ns, selector)
        if kind == "Job":
            try:
                obj = self._call("get", "jobs.batch", self._batch().read_namespaced_job, name, ns)
            except JobNotFound:
                obj = None
            pods = self._pods(ns, f"{JOB_NAME_LABEL}={name}") or self._pods(
                ns, f"{LEGACY_JOB_NAME_LABEL}={name}"
            )
            return f"Job/{name}", obj, [obj] if obj else [], pods
        if kind == "Pod":  # Kueue's plain-pod integration: one pod or a pod group
            pods = []
            for ref in metadata_of(wl).get("ownerReferences") or []:
                if ref.get("kind") == "Pod":
                    try:
                        pods.append(
                            self._call(
                                "get",
                                "pods",
                                self._core().read_namespaced_pod,
                                str(ref.get("name", "")),
                                ns,
                            )
                        )
                    except JobNotFound:
                        pass
            return f"Pod/{name}", None, [], pods
        return f"{kind}/{name}", None, [], []

    # -- contexts -----------------------------------------------------------------------------

    def context(self, wl: dict[str, Any]) -> ExecutionContext:
        """The execution context of one ended workload. Raises _Unplaced without nodes."""
        meta = metadata_of(wl)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        ended = workload_end(wl)
        if ended is None:
            raise SchedulerError(f"workload {ns}/{name} has not finished (no Finished/Evicted)")
        end, how = ended
        owner_name, owner, jobs, pods = self._owner_objects(wl)
        refs = {r.name: r for r in (pod_ref(p) for p in pods)}
        if self.placements is not None:
            try:
                recorded = self.placements(self.cluster, ns, name)
            except Exception as exc:  # the record is a fallback: never fail the job for it
                log.warning("placement record unreadable for %s/%s: %s", ns, name, exc)
                recorded = []
            for r in recorded:
                refs.setdefault(r.name, r)
        pod_list = sorted(refs.values(), key=lambda r: r.name)
        addresses: dict[str, list[str]] = {}
        for r in pod_list:
            if r.node:
                addrs = addresses.setdefault(r.node, [])
                for ip in (r.host_ip, r.pod_ip):
                    if ip and ip not in addrs:
                        addrs.append(ip)
        for p in pods:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                for ip in pod_ips(p):
                    if ip not in addresses[node]:
                        addresses[node].append(ip)
        nodes = list(addresses) or topology_hosts(wl)
        if not nodes:
            raise _Unplaced(
                f"workload {ns}/{name}: its pods are gone and no placement was recorded "
                "(run the pod placement sensor to keep them)"
            )
        state, exit_code, reason, step = classify(wl, how, owner, jobs, pods)
        start = start_time(wl, jobs, pod_list) or end
        gpus: dict[str, int] = {}
        for p in pods:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                gpus[node] = gpus.get(node, 0) + pod_gpus(p)
        admission = (wl.get("status") or {}).get("admission") or {}
        per_node = max(gpus.values()) if gpus else 0
        if not per_node:  # the pods are gone: what the workload asked for, over its nodes
            asked = workload_gpus(wl)
            per_node = math.ceil(asked / len(nodes)) if asked else 0
        return ExecutionContext(
            job_id=f"{ns}/{name}",
            scheduler="kueue",
            cluster=self.cluster,
            state=state,
            exit_code=exit_code,
            start=min(start, end),
            end=end,
            nodes=nodes,
            node_addresses={n: a for n, a in addresses.items() if a},
            gpus_per_node=per_node or None,
            gpu_model=gpu_model(pods),
            job_name=owner_name.split("/", 1)[1] if owner_name else name,
            partition=admission.get("clusterQueue") or (wl.get("spec") or {}).get("queueName"),
            reason=reason,
            failing_step=step,
            pods=pod_list,
        )

    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        until = query.until or utc_now()
        ended = []
        for wl in self.workloads(query.namespaces):
            e = workload_end(wl)
            if e is None or not (query.since <= e[0] < until):
                continue
            if query.partitions:
                queues = {
                    ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue"),
                    (wl.get("spec") or {}).get("queueName"),
                }
                if not queues & set(query.partitions):
                    continue
            m = metadata_of(wl)
            ended.append((e[0], m.get("namespace", ""), m.get("name", ""), wl))
        ended.sort(key=lambda t: t[:3])
        out: list[ExecutionContext] = []
        self.unplaced = []
        for _, ns, name, wl in ended:
            try:
                ctx = self.context(wl)
            except _Unplaced as exc:
                log.warning("%s", exc)
                self.unplaced.append(f"{ns}/{name}")
                continue
            if query.states and ctx.state not in query.states:
                continue
            out.append(ctx)
            if query.limit is not None and len(out) >= query.limit:
                break
        return out

    def get_job(self, job_id: str) -> ExecutionContext:
        ns, sep, name = job_id.partition("/")
        if not sep or not ns or not name:
            raise JobNotFound(f"Kueue job ids are '<namespace>/<workload>', got {job_id!r}")
        if self.config.namespaces and ns not in self.config.namespaces:
            raise JobNotFound(f"namespace {ns} is not among cluster {self.cluster}'s namespaces")
        try:
            wl = self._call(
                "get",
                f"workloads.{KUEUE_GROUP}",
                self._custom().get_namespaced_custom_object,
                KUEUE_GROUP,
                self.config.kueue_version,
                ns,
                "workloads",
                name,
            )
        except JobNotFound:
            raise JobNotFound(f"cluster {self.cluster} has no Kueue workload {ns}/{name}") from None
        try:
            return self.context(wl)
        except _Unplaced as exc:
            raise SchedulerError(str(exc)) from None

    # -- placements ---------------------------------------------------------------------------

    def running_placements(self) -> list[PodPlacement]:
        """Where the pods of admitted, unfinished workloads run now (for the placement record).

        Two pod listings per namespace (JobSet pods, Job pods), not one per workload.
        """
        by_ns: dict[str, list[tuple[str, str, str]]] = {}
        for wl in self.workloads():
            if not workload_running(wl):
                continue
            owner = controller_owner(wl)
            if owner is None:
                continue
            meta = metadata_of(wl)
            by_ns.setdefault(str(meta.get("namespace", "")), []).append(
                (owner[0], owner[1], str(meta.get("name", "")))
            )
        out: list[PodPlacement] = []
        for ns, owners in sorted(by_ns.items()):
            jobsets = {n: w for k, n, w in owners if k == "JobSet"}
            jobs = {n: w for k, n, w in owners if k == "Job"}
            seen: set[str] = set()
            candidates: list[tuple[dict[str, Any], str, str]] = []
            if jobsets:
                for p in self._pods(ns, JOBSET_NAME_LABEL):
                    js = (metadata_of(p).get("labels") or {}).get(JOBSET_NAME_LABEL)
                    if js in jobsets:
                        candidates.append((p, jobsets[js], f"JobSet/{js}"))
            if jobs:
                for p in self._pods(ns, JOB_NAME_LABEL):
                    labels = metadata_of(p).get("labels") or {}
                    jn = labels.get(JOB_NAME_LABEL) or labels.get(LEGACY_JOB_NAME_LABEL)
                    if jn in jobs:
                        candidates.append((p, jobs[jn], f"Job/{jn}"))
            for p, workload, owner_name in candidates:
                ref = pod_ref(p)
                if not ref.node or ref.name in seen:
                    continue
                seen.add(ref.name)
                out.append(
                    PodPlacement(
                        cluster=self.cluster,
                        namespace=ns,
                        workload=workload,
                        pod=ref.name,
                        node=ref.node,
                        host_ip=ref.host_ip,
                        pod_ip=ref.pod_ip,
                        started=ref.started,
                        restarts=ref.restarts,
                        owner=owner_name,
                    )
                )
        return out
