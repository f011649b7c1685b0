"""What every connector promises: the three roles, their errors and the job query.

A scheduler connector answers "which jobs finished, and what was each one's context";
a log source and a metric source answer "what did these nodes say in this window".
Connectors are plain clients (no Dagster import); `pipeline.py` and the assets call them
through these protocols only, so a new back-end is one module that satisfies one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import (
    Anchor,
    LogBatch,
    MetricFamily,
    MetricSample,
    SourceCoverage,
)
from attribution_dagster.core.secrets import redact
from attribution_dagster.core.settings import Window


class SourceError(Exception):
    """A back-end could not answer. The message is one line a user can act on.

    `transient` says whether trying again may help (timeouts, 429, 5xx, connection
    refused); an authentication or configuration problem is not transient. A credential
    the message quotes from a back-end's answer is masked (core/secrets.py).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(redact(message))
        self.transient = transient


class SchedulerError(SourceError):
    """The scheduler (sacct, slurmrestd, the Kubernetes API) could not list or describe jobs."""


class JobNotFound(SchedulerError):
    """The scheduler does not know this job (or no longer does)."""


class JobQuery(BaseModel):
    """Finished jobs to list: those that ENDED in [since, until), optionally filtered."""

    model_config = ConfigDict(frozen=True)

    since: AwareDatetime
    until: AwareDatetime | None = Field(default=None, description="None = now")
    states: tuple[JobState, ...] = Field(default=(), description="empty = every final state")
    partitions: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    limit: int | None = Field(default=None, ge=1, description="at most this many, oldest end first")


@runtime_checkable
class SchedulerClient(Protocol):
    """Execution contexts from a scheduler. Contexts carry `cluster` set to the cluster name."""

    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        """Jobs that ended in the query window, sorted by end time. Raises SchedulerError."""
        ...

    def get_job(self, job_id: str) -> ExecutionContext:
        """One job's context. Raises JobNotFound or SchedulerError."""
        ...


_Capped = TypeVar("_Capped", bound="OwnLineCap")


class OwnLineCap:
    """A source with a line cap of its own (`max_line_bytes` in its settings): the analysis
    cap (`SourceLimits`) can lower it, never raise it. `capped(limits)` is the source to read
    with: itself, or a copy cutting at the lower cap. A source says what its cap is and how
    to copy itself with another one; the rule lives here once."""

    @property
    def own_max_line_bytes(self) -> int:  # pragma: no cover - every source overrides
        raise NotImplementedError

    def _with_cap(self: _Capped, limit: int) -> _Capped:  # pragma: no cover
        raise NotImplementedError

    def with_max_line_bytes(self: _Capped, limit: int) -> _Capped:
        return self if limit >= self.own_max_line_bytes else self._with_cap(limit)

    def capped(self: _Capped, limits: SourceLimits | None) -> _Capped:
        if limits is None or limits.max_line_bytes is None:
            return self
        return self.with_max_line_bytes(limits.max_line_bytes)


class SourceLimits(BaseModel):
    """The analysis's limits a source must honour, passed explicitly on every fetch.

    `max_line_bytes`: a line longer than this (UTF-8) is cut, and counted in the coverage's
    `overlong_lines`. A source with its own configured cap cuts at the smaller of the two
    (either setting can only lower the cap). None: the source's own cap only.
    """

    model_config = ConfigDict(frozen=True)

    max_line_bytes: int | None = Field(default=None, ge=1)


@runtime_checkable
class LogSource(Protocol):
    """Prefiltered log lines for the job's nodes and window.

    `name` is what the coverage record calls the source (`loki:main`, `files:shared`).
    A source returns a LogBatch (models.py), stating everything the engine reads from it:

    - `records`: the lines holding an anchor (plus the continuation lines an anchor asks
      for), each with a typed, reopenable `locator`; anchors are pushed down where the
      back-end can filter (LogQL `|~`);
    - `tails`: where each file / stream / container log stops (its last timed line, or an
      interval when only a bucket is known), `last_of_file` set: the engine's silence test;
    - `progress`: the last line of each file holding a `last_only` anchor: the engine's
      progress test;
    - `coverage`: what it read and could not read (nodes, pods, errors, status, counts).

    It honours `limits` (SourceLimits) and raises SourceError only when nothing could be
    read at all. connectors/conformance.py checks all of this over the same recorded lines
    for every connector: a new connector passes it or does not ship.
    """

    name: str

    def fetch_logs(
        self,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        limits: SourceLimits | None = None,
    ) -> LogBatch: ...


@runtime_checkable
class MetricSource(Protocol):
    """Metric samples for the job's nodes and window: (samples, coverage). `families` are
    the metric families the rules want (core MetricFamily, as `anchors` for a log source);
    a back-end that can select reads only those. Samples carry a typed locator (the series
    and its time); a metric source has no tails or progress. It raises SourceError only
    when nothing could be read at all."""

    name: str

    def fetch_metrics(
        self, ctx: ExecutionContext, families: Sequence[MetricFamily], window: Window
    ) -> tuple[list[MetricSample], SourceCoverage]: ...


def failed_coverage(source: str, error: BaseException) -> SourceCoverage:
    """The coverage record of a source that raised: status failed, the error in one line."""
    text = (str(error).strip().splitlines() or [""])[0] or type(error).__name__
    if not isinstance(error, SourceError):
        text = f"{type(error).__name__}: {text}"
    return SourceCoverage(
        source=source,
        status="failed",
        errors=[text[:500]],
        retryable=bool(getattr(error, "transient", False)),
    )


def utc_now() -> datetime:
    from datetime import timezone

    return datetime.now(timezone.utc)


class BackendConfig(BaseModel):
    """Keys every `{kind: ...}` block shares. Back-ends subclass it with their own keys,
    `kind` narrowed to a Literal, and a `client(cluster)` method building the client."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    name: str | None = Field(
        default=None, description="shown in coverage as '<kind>:<name>'; default the kind"
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="per request")

    @property
    def source_name(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind

    def client(self, cluster: str) -> object:  # pragma: no cover - every back-end overrides
        raise NotImplementedError
