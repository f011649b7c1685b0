"""The fleet path without Dagster: one (cluster, time window) of finished jobs at a time.

    list_window(sink, cluster, key)           scheduler -> attribution_jobs   (finished_jobs)
    attribute_window(sink, cluster, key)      attribution_jobs -> results     (window_attributions)

A window's jobs are independent, so they run over a process pool in chunks, and only the
parent process writes (one writer keeps SQLite happy and PostgreSQL connections few).
A job that already has a result under the current rules version is skipped, so running a
window again, or resuming a killed backfill, neither redoes nor duplicates work; rows are
upserts on (cluster, job_id, rules_version) either way, the same rows the per-job path
writes. Memory stays flat in the number of jobs: pending jobs are read in pages and at most
two chunks per worker are in flight.

The Dagster assets (assets/per_window.py) and `attribution backfill` call these functions.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from sqlalchemy import and_, case, exists, func, select

from attribution_dagster import pipeline
from attribution_dagster.connectors.base import JobQuery
from attribution_dagster.connectors.clusters import Cluster
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.sinks.sql import SqlSink, jobs_table, results_table, windows_table

Granularity = Literal["hourly", "daily"]

# Dagster's own key formats for daily and hourly partitions, so keys mean the same here.
KEY_FORMATS = {"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d-%H:%M"}
STEPS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1)}
PAGE = 1000  # pending jobs read per query
WRITE_BATCH = 250  # results per write transaction

# Set by `attribution backfill` so the bar moves while Dagster runs the window in-process.
PROGRESS_HOOK: Callable[[int], None] | None = None


class WindowError(Exception):
    """A window could not be listed or attributed; the message says which and why."""


def window_bounds(key: str, granularity: Granularity) -> tuple[datetime, datetime]:
    """[start, end) of the window with this partition key (UTC)."""
    try:
        start = datetime.strptime(key, KEY_FORMATS[granularity]).replace(tzinfo=timezone.utc)
    except ValueError:
        raise WindowError(
            f"window key {key!r} is not a {granularity} key ({KEY_FORMATS[granularity]})"
        ) from None
    return start, start + STEPS[granularity]


def window_keys(granularity: Granularity, since: datetime, until: datetime) -> list[str]:
    """Keys of the windows that overlap [since, until)."""
    step = STEPS[granularity]
    since = since.astimezone(timezone.utc)
    t = since.replace(minute=0, second=0, microsecond=0)
    if granularity == "daily":
        t = t.replace(hour=0)
    keys = []
    while t < until:
        keys.append(t.strftime(KEY_FORMATS[granularity]))
        t += step
    return keys


@dataclass
class WindowOutcome:
    """What one window run did."""

    cluster: str
    window: str
    jobs: int = 0  # listed in the window
    attributed: int = 0  # results written by this run
    skipped: int = 0  # already had a result under this rules version
    unreachable: dict[str, str] = field(default_factory=dict)  # job -> evidence error
    failed: dict[str, str] = field(default_factory=dict)  # job -> error
    by_status: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.unreachable and not self.failed

    @property
    def reason(self) -> str:
        """One line: why the window failed (empty when it did not)."""
        parts = []
        if self.unreachable:
            first = next(iter(self.unreachable.values()))
            parts.append(
                f"evidence unreachable for {len(self.unreachable)} of {self.jobs} jobs "
                f"(first: {first}); their results were not written, rerun the window"
            )
        if self.failed:
            job, why = next(iter(self.failed.items()))
            parts.append(f"{len(self.failed)} jobs failed (first: {job}: {why})")
        return f"{self.cluster} {self.window}: " + "; ".join(parts) if parts else ""


def _now() -> datetime:
    return datetime.now(timezone.utc)


def record_window(
    sink: SqlSink,
    cluster: str,
    key: str,
    granularity: Granularity,
    status: str,
    **values: Any,
) -> None:
    """Upsert the window's row in `attribution_windows`."""
    start, end = window_bounds(key, granularity)
    row = {
        "cluster": cluster,
        "window_key": key,
        "window_start": start,
        "window_end": end,
        "status": status,
        "updated_at": _now(),
        **values,
    }
    t = windows_table
    with sink.engine.begin() as conn:
        dialect = conn.dialect.name
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:  # pragma: no cover - other databases: delete + insert
            conn.execute(
                t.delete().where((t.c.cluster == cluster) & (t.c.window_key == key))
            )
            conn.execute(t.insert().values(jobs=0, attributed=0, failed_jobs=0, **row))
            return
        stmt = dialect_insert(t).values({"jobs": 0, "attributed": 0, "failed_jobs": 0, **row})
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.c.cluster, t.c.window_key],
            set_={k: stmt.excluded[k] for k in row if k not in ("cluster", "window_key")},
        )
        conn.execute(stmt)


def window_status(sink: SqlSink, cluster: str) -> dict[str, dict[str, Any]]:
    """window key -> its `attribution_windows` row, for one cluster."""
    t = windows_table
    with sink.engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.cluster == cluster)).mappings().all()
    return {r["window_key"]: dict(r) for r in rows}


def list_window(
    sink: SqlSink, cluster: Cluster, key: str, granularity: Granularity = "daily"
) -> int:
    """Ask the cluster's scheduler which jobs ended in the window; keep them in the warehouse.

    Raises WindowError naming the cluster, the window and the scheduler's answer.
    """
    start, end = window_bounds(key, granularity)
    try:
        contexts = cluster.scheduler.finished_jobs(JobQuery(since=start, until=end))
    except Exception as exc:  # noqa: BLE001 - ConfigError, SchedulerError, anything: this window fails
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        reason = f"{cluster.name} {key}: scheduler unreachable: {text}"
        record_window(sink, cluster.name, key, granularity, "failed", error=reason)
        raise WindowError(reason) from None
    contexts = [
        c if c.cluster == cluster.name else c.model_copy(update={"cluster": cluster.name})
        for c in contexts
    ]
    sink.write_jobs(contexts, key)
    record_window(
        sink, cluster.name, key, granularity, "listed", jobs=len(contexts), error=None
    )
    return len(contexts)


def _pending_clause(cluster: str, key: str, rules_version: str, redo: bool) -> Any:
    j, r = jobs_table, results_table
    clause = and_(j.c.cluster == cluster, j.c.window_key == key)
    if not redo:
        done = exists().where(
            r.c.cluster == j.c.cluster,
            r.c.job_id == j.c.job_id,
            r.c.rules_version == rules_version,
        )
        clause = and_(clause, ~done)
    return clause


def _pending_pages(
    sink: SqlSink, cluster: str, key: str, rules_version: str, redo: bool
) -> Iterator[list[str]]:
    """Context JSON of the window's jobs still to attribute, in pages (keyset on job_id)."""
    j = jobs_table
    last = ""
    while True:
        q = (
            select(j.c.job_id, j.c.context_json)
            .where(_pending_clause(cluster, key, rules_version, redo), j.c.job_id > last)
            .order_by(j.c.job_id)
            .limit(PAGE)
        )
        with sink.engine.connect() as conn:
            rows = conn.execute(q).all()
        if not rows:
            return
        last = rows[-1][0]
        yield [r[1] for r in rows]


def count_jobs(sink: SqlSink, cluster: str, key: str, rules_version: str) -> tuple[int, int]:
    """(jobs listed in the window, of which still without a result under rules_version)."""
    j = jobs_table
    with sink.engine.connect() as conn:
        total = conn.execute(
            select(func.count()).where(j.c.cluster == cluster, j.c.window_key == key)
        ).scalar_one()
        pending = conn.execute(
            select(func.count()).where(_pending_clause(cluster, key, rules_version, False))
        ).scalar_one()
    return int(total), int(pending)


# -- the pool --------------------------------------------------------------------------------

_worker: dict[str, Any] = {}


def _init_worker(cluster: Cluster, settings: AnalysisSettings) -> None:
    _worker["cluster"] = cluster
    _worker["settings"] = settings
    pipeline.catalog()
    pipeline.engine()


def _unreachable(result: AttributionResult) -> str | None:
    """The error when every evidence source of the job failed (nothing was read at all)."""
    cov = [c for c in result.coverage if c.status != "empty"]
    if cov and all(c.status == "failed" for c in cov):
        return "; ".join(e for c in cov for e in c.errors[:1]) or "every source failed"
    return None


JobOutcome = tuple[str, AttributionResult | None, str | None, str | None]


def _attribute_chunk(contexts: list[str]) -> list[JobOutcome]:
    """(job_id, result, evidence error, failure) for each context of a chunk."""
    cluster: Cluster = _worker["cluster"]
    settings: AnalysisSettings = _worker["settings"]
    out: list[JobOutcome] = []
    for text in contexts:
        job_id = "?"
        try:
            ctx = ExecutionContext.model_validate_json(text)
            job_id = ctx.job_id
            result = pipeline.analyze_context(ctx, settings, sources=cluster.sources)
        except Exception as exc:  # noqa: BLE001 - one job's failure is reported, not raised
            out.append((job_id, None, None, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        bad = _unreachable(result)
        out.append((job_id, None if bad else result, bad, None))
    return out


def _usable_cpus() -> int:
    """CPUs this process may run on (a cpuset), else the machine's. A pod's CPU *limit* is a
    quota neither sees: set `fleet.workers` in a pod."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _chunks(pages: Iterator[list[str]], size: int) -> Iterator[list[str]]:
    for page in pages:
        for i in range(0, len(page), size):
            yield page[i : i + size]


def attribute_window(
    sink: SqlSink,
    cluster: Cluster,
    key: str,
    granularity: Granularity = "daily",
    *,
    settings: AnalysisSettings | None = None,
    workers: int | None = None,
    chunk_size: int = 50,
    redo: bool = False,
    progress: Callable[[int], None] | None = None,
) -> WindowOutcome:
    """Attribute every listed job of the window that has no result yet; record the window.

    `progress(n)` is called after each chunk with the number of jobs it finished. The
    outcome says which jobs could not be done; the caller decides whether that fails.
    """
    # Long on purpose: one window's run: contexts, analysis, isolation of failures and the write
    # are one transaction of work
    t0 = time.perf_counter()
    progress = progress or PROGRESS_HOOK
    settings = settings or AnalysisSettings(workers=1)
    if settings.workers != 1:
        settings = settings.model_copy(update={"workers": 1})  # the pool is the parallelism
    rules = pipeline.engine().rules_version
    total, _ = count_jobs(sink, cluster.name, key, rules)
    out = WindowOutcome(cluster=cluster.name, window=key, jobs=total)
    # The parent unpickles and writes every result: it needs a core of its own.
    workers = workers or max(1, _usable_cpus() - 1)
    chunks = _chunks(_pending_pages(sink, cluster.name, key, rules, redo), chunk_size)

    pending: list[AttributionResult] = []

    def flush() -> None:
        out.attributed += sink.write(pending)
        pending.clear()

    def take(batch: list[JobOutcome]) -> None:
        for job_id, result, bad, error in batch:
            if error is not None:
                out.failed[job_id] = error
            elif bad is not None:
                out.unreachable[job_id] = bad
            elif result is not None:
                pending.append(result)
                out.by_status[result.status] = out.by_status.get(result.status, 0) + 1
        if len(pending) >= WRITE_BATCH:  # one transaction (one fsync) per few hundred jobs
            flush()
        if progress is not None:
            progress(len(batch))

    if workers <= 1:
        _init_worker(cluster, settings)
        for chunk in chunks:
            take(_attribute_chunk(chunk))
    else:
        fork = "fork" in multiprocessing.get_all_start_methods()
        pipeline.catalog()  # loaded once here, inherited by forked workers
        pipeline.engine()
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("fork" if fork else None),
            initializer=_init_worker,
            # forked workers inherit the cluster's clients; spawned ones rebuild them
            initargs=(cluster if fork else Cluster(cluster.name, cluster.config), settings),
        ) as pool:
            inflight: set[Future[list[JobOutcome]]] = set()
            for chunk in chunks:
                inflight.add(pool.submit(_attribute_chunk, chunk))
                if len(inflight) >= 2 * workers:
                    done, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                    for f in done:
                        take(f.result())
            for f in inflight:
                take(f.result())
    flush()
    out.skipped = total - out.attributed - len(out.failed) - len(out.unreachable)
    if redo:
        out.skipped = 0
    out.seconds = time.perf_counter() - t0
    record_window(
        sink,
        cluster.name,
        key,
        granularity,
        "done" if out.ok else "failed",
        rules_version=rules,
        jobs=total,
        attributed=total - len(out.failed) - len(out.unreachable),
        failed_jobs=len(out.failed) + len(out.unreachable),
        error=out.reason or None,
        seconds=round(out.seconds, 3),
    )
    return out


@dataclass
class WindowVerdicts:
    """The window's verdicts under the current rules: counts, and the jobs to show first."""

    by_status: dict[str, int] = field(default_factory=dict)
    partial: int = 0  # jobs whose evidence was partial
    shown: list[AttributionResult] = field(default_factory=list)

    @property
    def needs_a_look(self) -> int:
        return self.by_status.get("ambiguous", 0) + self.by_status.get("unattributed", 0)


_LOOK_ORDER = {"ambiguous": 0, "unattributed": 1, "attributed": 2, "not_failed": 3}


def window_verdicts(sink: SqlSink, cluster: str, key: str, limit: int = 50) -> WindowVerdicts:
    """Every result of the window's jobs (current rules version) counted, and up to `limit`
    of them read: ambiguous, unattributed, attributed, not failed; within each, those read
    from partial data first, then by job id."""
    j, r = jobs_table, results_table
    rules = pipeline.engine().rules_version
    joined = and_(
        j.c.cluster == cluster,
        j.c.window_key == key,
        r.c.cluster == j.c.cluster,
        r.c.job_id == j.c.job_id,
        r.c.rules_version == rules,
    )
    out = WindowVerdicts()
    order = case(_LOOK_ORDER, value=r.c.status, else_=9)
    with sink.engine.connect() as conn:
        for status, partial, n in conn.execute(
            select(r.c.status, r.c.partial, func.count()).where(joined)
            .group_by(r.c.status, r.c.partial)
        ):
            out.by_status[status] = out.by_status.get(status, 0) + int(n)
            out.partial += int(n) if partial else 0
        rows = conn.execute(
            select(r.c.result_json).where(joined)
            .order_by(order, r.c.partial.desc(), r.c.job_id).limit(limit)
        ).scalars().all()
    out.shown = [AttributionResult.model_validate_json(x) for x in rows]
    return out
