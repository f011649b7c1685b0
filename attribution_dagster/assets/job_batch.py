"""`for_each_job`: run one per-job asset step over every partition of the run.

A run costs Dagster about a second and a job's work milliseconds, so backfills put up to
`max_partitions_per_run` jobs in one run. This helper (`for_each_job`, then
`materialize_result` for what the step reports) is the only place that knows it, and it
uses Dagster's public API only:

- values persist per (asset, partition) in the asset store (`AssetValueStore`), not
  through an IO manager, which cannot store a multi-partition output;
- one job failing does not stop the others: in a batch its failure is stored and the
  later assets skip it and say why; alone (the sensor path) it fails its own run;
- a transient error (`SourceError(transient=True)`: timeout, 429, 5xx; an `OSError`
  reading evidence) is tried again: alone, by `RetryRequested` so the UI shows the
  retry; in a batch, inline.
  Anything else is not retried: a 401 or a bad context will not heal by waiting.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dagster import AssetExecutionContext, Failure, MaterializeResult, MetadataValue, RetryRequested
from pydantic import BaseModel

from attribution_dagster.connectors.base import SourceError
from attribution_dagster.resources.value_store import AssetValueStore

# compute(partition_key, upstream payload or None, last_try) -> (value, metadata)
Compute = Callable[[str, str | None, bool], tuple[BaseModel, dict[str, Any]]]
M = TypeVar("M", bound=BaseModel)


class Handoff:
    """The values a step of this process just stored, for the next step of the same process
    (Dagster's in-process executor, `attribution run`) to take without parsing the stored
    JSON back: validating a big job's raw evidence and observations again cost ~0.4 s of a
    per-job run (9,400 records, 9,500 observations). A value is taken once (its taker may
    consume it: normalize empties the records), only when the text read from the store is
    the text stored with it, and at most `budget` characters of stored text are held;
    otherwise, and in a step of another process, the text is parsed as before."""

    def __init__(self, budget: int = 128 * 1024 * 1024) -> None:
        self.budget = budget
        self._held: OrderedDict[tuple[type, str], tuple[str, BaseModel]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def keep(self, key: str, text: str, value: BaseModel) -> None:
        with self._lock:
            old = self._held.pop((type(value), key), None)
            self._size -= len(old[0]) if old else 0
            if len(text) > self.budget:
                return
            self._held[(type(value), key)] = (text, value)
            self._size += len(text)
            while self._size > self.budget:
                _, (dropped, _) = self._held.popitem(last=False)
                self._size -= len(dropped)

    def take(self, model: type[M], key: str, text: str) -> M:
        with self._lock:
            held = self._held.pop((model, key), None)
            self._size -= len(held[0]) if held else 0
        if held is not None and held[0] == text:
            return held[1]  # type: ignore[return-value]
        return model.model_validate_json(text)


HANDOFF = Handoff()


@dataclass
class JobBatch:
    """What one step produced: values and metadata per job, and why the others failed."""

    keys: list[str]
    values: dict[str, BaseModel] = field(default_factory=dict)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def batched(self) -> bool:
        return len(self.keys) > 1


def reason(exc: BaseException) -> str:
    """One line: the exception's type and first line."""
    if isinstance(exc, Failure) and exc.description:
        return exc.description.strip().splitlines()[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


BATCH_JOBS_TAG = "attribution/batch_jobs"
BATCH_FIRST_TAG = "attribution/batch_first_job"
BATCH_LAST_TAG = "attribution/batch_last_job"


def batch_run_tags(keys: list[str]) -> dict[str, str]:
    """What a batch run covered, for the runs list: job count, first and last job."""
    return {BATCH_JOBS_TAG: str(len(keys)), BATCH_FIRST_TAG: keys[0], BATCH_LAST_TAG: keys[-1]}


def tag_batch_run(context: AssetExecutionContext, keys: list[str]) -> None:
    """Tag the run with `batch_run_tags`: a backfill launches the run, so the tags are added
    when it starts (a run of several assets tags it once)."""
    tags = batch_run_tags(keys)
    run = context.instance.get_run_by_id(context.run.run_id)
    if run is not None and all(run.tags.get(k) == v for k, v in tags.items()):
        return
    context.instance.add_run_tags(context.run.run_id, tags)


def for_each_job(
    context: AssetExecutionContext,
    store: AssetValueStore,
    compute: Compute,
    *,
    upstream: str | None = None,
    retries: int = 0,
    retry_delay: float = 0.0,
    hand_on: bool = False,
) -> JobBatch:
    """Run `compute` for each partition of the step, isolating failures (see module doc).
    `hand_on`: the next step takes the values through HANDOFF when it runs in this process."""
    asset_name = context.asset_key.to_user_string()
    batch = JobBatch(keys=list(context.partition_keys))
    if batch.batched:
        tag_batch_run(context, batch.keys)
    inputs = store.get(upstream, batch.keys) if upstream else {}
    for key in batch.keys:
        payload: str | None = None
        if upstream:
            up = inputs.get(key)
            if up is None or not up.ok:
                why = (
                    f"upstream {upstream} failed: {up.error}"
                    if up is not None
                    else f"upstream {upstream} has no value for this job; materialize it first"
                )
                if not batch.batched:
                    store.put(asset_name, failures={key: why})
                    raise Failure(description=f"{key}: {why}", allow_retries=False)
                batch.failures[key] = why
                continue
            payload = up.payload
        attempt = 0
        while True:
            last_try = attempt >= retries if batch.batched else context.retry_number >= retries
            try:
                batch.values[key], batch.metadata[key] = compute(key, payload, last_try)
                break
            except (SourceError, OSError) as exc:
                if _transient(exc) and not last_try:
                    context.log.warning(f"{asset_name} {key}: {reason(exc)}; trying again")
                    if not batch.batched:
                        raise RetryRequested(
                            max_retries=retries,
                            seconds_to_wait=retry_delay * 2**context.retry_number,
                        ) from exc
                    attempt += 1
                    time.sleep(retry_delay * 2 ** (attempt - 1))
                    continue
                _fail(context, store, batch, asset_name, key, exc)
                break
            except Exception as exc:  # noqa: BLE001 - one job's failure is isolated
                _fail(context, store, batch, asset_name, key, exc)
                break
    texts = {k: v.model_dump_json() for k, v in batch.values.items()}
    store.put(asset_name, values=texts, failures=batch.failures)
    for k, text in texts.items() if hand_on else ():
        HANDOFF.keep(k, text, batch.values[k])
    return batch


def _transient(exc: Exception) -> bool:
    """Worth another try: a back-end's transient error, or an I/O error reading evidence
    (an NFS hiccup, a timeout), unlike a bad context or a refused login."""
    if isinstance(exc, SourceError):
        return exc.transient
    return isinstance(exc, OSError)


def _fail(
    context: AssetExecutionContext,
    store: AssetValueStore,
    batch: JobBatch,
    asset_name: str,
    key: str,
    exc: Exception,
) -> None:
    if not batch.batched:
        store.put(asset_name, failures={key: reason(exc)})
        if isinstance(exc, Failure):
            raise exc
        raise Failure(description=f"{key}: {reason(exc)}", allow_retries=False) from exc
    batch.failures[key] = reason(exc)
    context.log.warning(f"{asset_name} {key} failed: {reason(exc)}")


def materialize_result(context: AssetExecutionContext, batch: JobBatch) -> MaterializeResult:
    """One job: its metadata. Several: each job's metadata on its own partition through
    Dagster's public `add_asset_metadata(..., partition_key=k)`, plus the batch's counts, so
    a job's page in the UI lists its own facts first.

    Dagster 1.13 checks each call's key against the run's range by listing the keys of the
    dynamic partitions definition (a few ms per job at hundreds of partitions, growing with
    their count); the check is kept rather than reaching into the step's private metadata
    accumulator (issue 20). Retention (sensors/retention.py) bounds the key count."""
    if not batch.batched:
        return MaterializeResult(metadata=batch.metadata.get(batch.keys[0], {}))
    summary = {
        "batch: partitions": MetadataValue.int(len(batch.keys)),
        "batch: failed": MetadataValue.int(len(batch.failures)),
    }
    per_key = {key: {**meta, **summary} for key, meta in batch.metadata.items()}
    per_key.update({key: {"FAILED": why, **summary} for key, why in batch.failures.items()})
    for key, meta in per_key.items():
        context.add_asset_metadata(meta, partition_key=key)
    return MaterializeResult()
