"""Attribute every case under a directory THROUGH Dagster, in-process (`make run`).

The same definitions as the UI: every case becomes a partition of the `jobs` dynamic
partitions definition, and `attribute_job` materializes the four per-job assets for all
of them, several partitions per run (a run costs about a second, a job milliseconds),
writing through the configured sink. Results are read back from the sink.

The Dagster instance is ephemeral by default; pass `instance_dir` (e.g. the `.dagster`
directory `make ui` uses) to keep the runs, partitions and metadata for the UI.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from dagster import DagsterInstance
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from sqlalchemy.exc import SQLAlchemyError

from attribution_dagster.assets.per_job import ASSET_NAMES, JOBS_PARTITIONS
from attribution_dagster.connectors.static.client import StaticContextClient
from attribution_dagster.core.config import (
    AnalysisConfig,
    AttributionConfig,
    ConfigError,
    load_config,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sinks.sql import SqlSink

log = logging.getLogger(__name__)

# Dagster's per-run console logger: keep the user's terminal for the summary table.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


INSTANCE_YAML = """\
# Local Dagster instance of attribution-dagster (SQLite storage under this directory).
# For a production instance see dagster.yaml.example in the repository.
telemetry:
  enabled: false
# A batched run's materializations in one transaction, each SQLite file on one kept
# connection: attribution_dagster/instance/storage.py, run_storage.py and tuning.py
event_log_storage:
  module: attribution_dagster.instance.storage
  class: BatchedSqliteEventLogStorage
  config:
    base_dir: {event_log_dir}
run_storage:
  module: attribution_dagster.instance.run_storage
  class: KeptSqliteRunStorage
  config:
    base_dir: {run_dir}
# Step output captured to files (the UI's stdout / stderr tabs) without Dagster's live mirror
# processes: attribution_dagster/instance/compute_logs.py
compute_logs:
  module: attribution_dagster.instance.compute_logs
  class: FileComputeLogManager
  config:
    base_dir: {compute_log_dir}
"""


def write_instance_yaml(instance_dir: Path) -> None:
    """A new local instance's settings: no telemetry, no banner, batched event writes, kept
    SQLite connections (the files where Dagster's defaults put them)."""
    settings = instance_dir / "dagster.yaml"
    if not settings.exists():
        history = instance_dir.resolve() / "history"
        settings.write_text(
            INSTANCE_YAML.format(
                event_log_dir=history / "runs",
                run_dir=history,
                compute_log_dir=instance_dir.resolve() / "storage",  # Dagster's default place
            ),
            encoding="utf-8",
        )


@dataclass
class RunReport:
    """What `run_cases_report` did: results, per-job failures, cases it could not read."""

    results: list[AttributionResult] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # partition key -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # case dir -> reason
    partitions: list[str] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0


def run_cases(
    case_root: Path,
    sink_url: str,
    *,
    instance_dir: Path | None = None,
    batch: bool = True,
    settings: AnalysisSettings | None = None,
) -> list[AttributionResult]:
    """Register, materialize and persist every case under `case_root`; return the results.

    `settings` (the CLI's --lead/--lag/--skew/--workers) override the configured analysis.
    """
    return run_cases_report(
        case_root, sink_url, instance_dir=instance_dir, batch=batch, settings=settings
    ).results


def open_instance(instance_dir: Path | None) -> DagsterInstance:
    if instance_dir is None:
        return DagsterInstance.ephemeral()
    instance_dir = Path(instance_dir).resolve()
    instance_dir.mkdir(parents=True, exist_ok=True)
    write_instance_yaml(instance_dir)
    return DagsterInstance.from_config(str(instance_dir))


def discover_cases(
    case_root: Path,
) -> tuple[dict[str, tuple[Path, ExecutionContext]], dict[str, str]]:
    """partition key -> (case dir, context) for every readable case; unreadable ones apart."""
    client = StaticContextClient()
    cases: dict[str, tuple[Path, ExecutionContext]] = {}
    skipped: dict[str, str] = {}
    try:
        dirs = client.list_cases(case_root)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {}, {str(case_root): str(exc)}
    for case_dir in dirs:
        try:
            ctx = client.load(case_dir)
        except Exception as exc:  # noqa: BLE001 - one bad case never stops the others
            skipped[str(case_dir)] = str(exc)
            continue
        key = ctx.partition_key
        if key in cases:
            skipped[str(case_dir)] = f"partition key {key} already used by {cases[key][0]}"
            continue
        cases[key] = (case_dir.resolve(), ctx)
    return cases, skipped


def _contiguous_chunks(order: list[str], wanted: set[str], size: int) -> list[list[str]]:
    """Runs target a key *range* of the dynamic partitions (in registration order): cut the
    wanted keys into ranges that contain no other key and at most `size` keys."""
    chunks: list[list[str]] = []
    current: list[str] = []
    for key in order:
        if key in wanted and len(current) < size:
            current.append(key)
            continue
        if current:
            chunks.append(current)
        current = [key] if key in wanted else []
    if current:
        chunks.append(current)
    return chunks


def run_cases_report(
    case_root: Path,
    sink_url: str,
    *,
    instance_dir: Path | None = None,
    batch: bool = True,
    config: AttributionConfig | None = None,
    max_partitions_per_run: int | None = None,
    instance: DagsterInstance | None = None,
    settings: AnalysisSettings | None = None,
) -> RunReport:
    # Long on purpose: the steps of one `attribution run` (config, stores, partitions, runs,
    # results) share the instance's lifetime; split, they would pass it all around
    from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions

    started = time.perf_counter()
    report = RunReport()
    base = config or load_config()
    config = base.model_copy(
        update={
            "case_root": str(Path(case_root).resolve()),
            "sink": base.sink.model_copy(
                update={"url": sink_url, "url_env": None, "password_env": None, "store_url": None}
            ),
            "max_partitions_per_run": max_partitions_per_run or base.max_partitions_per_run,
        }
    )
    if settings is not None:
        analysis = AnalysisConfig.model_validate(settings.model_dump())
        config = config.model_copy(update={"analysis": analysis})
    cases, report.skipped = discover_cases(Path(case_root))
    for case_dir, reason in report.skipped.items():
        log.warning("skipped case %s: %s", case_dir, reason)
    if not cases:
        report.seconds = time.perf_counter() - started
        return report

    try:
        store = AssetValueStore(sink_url)
        sink = SqlSink(sink_url)
    except (SQLAlchemyError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"cannot open the results database {_safe_url(sink_url)}: {first}"
        ) from None
    store.index_cases({k: str(d) for k, (d, _) in cases.items()})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dagster beta/preview notices are not for the user
        defs = build_definitions(config)
        job = defs.resolve_job_def(ATTRIBUTE_JOB)
        inst = instance or open_instance(instance_dir)
        try:
            known = set(inst.get_dynamic_partitions(JOBS_PARTITIONS.name))
            new = [k for k in cases if k not in known]
            if new:
                inst.add_dynamic_partitions(JOBS_PARTITIONS.name, new)
            report.partitions = list(cases)
            if batch:
                order = inst.get_dynamic_partitions(JOBS_PARTITIONS.name)
                groups = _contiguous_chunks(order, set(cases), config.max_partitions_per_run)
            else:
                groups = [[k] for k in cases]
            for group in groups:
                if len(group) == 1:
                    kwargs: dict = {"partition_key": group[0]}
                else:
                    kwargs = {
                        "tags": {
                            ASSET_PARTITION_RANGE_START_TAG: group[0],
                            ASSET_PARTITION_RANGE_END_TAG: group[-1],
                        }
                    }
                outcome = job.execute_in_process(
                    instance=inst, raise_on_error=False, run_config=QUIET_RUN_CONFIG, **kwargs
                )
                report.runs += 1
                if not outcome.success:
                    _record_failures(report, store, group, outcome)
        finally:
            if instance is None:
                inst.dispose()

    wanted = {(ctx.cluster or "", ctx.job_id): key for key, (_, ctx) in cases.items()}
    by_key: dict[str, AttributionResult] = {}
    for result in sink.read():  # newest analysis first
        key = wanted.get((result.cluster or "", result.job_id))
        if key is not None and key not in by_key and key not in report.failed:
            by_key[key] = result
    report.results = [by_key[k] for k in cases if k in by_key]
    for key, reason in report.failed.items():
        log.warning("job %s failed: %s", key, reason)
    report.seconds = time.perf_counter() - started
    return report


def _safe_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL at all: show nothing of it
        return "<unparseable URL>"


def _record_failures(report: RunReport, store: AssetValueStore, group: list[str], outcome) -> None:
    """Name the reason per failed job: the first asset of its chain whose value failed."""
    failures = store.failures()
    run_error = ""
    for event in outcome.all_events:
        if event.is_failure and event.step_failure_data is not None:
            run_error = event.step_failure_data.error.message.strip().splitlines()[0]
            break
    for key in group:
        for name in ASSET_NAMES:
            reason = failures.get((name, key))
            if reason is not None:
                report.failed[key] = f"{name}: {reason}"
                break
    if not any(k in report.failed for k in group) and run_error:
        # The run failed outside any one job (e.g. the sink): every job of the run failed.
        for key in group:
            report.failed[key] = run_error
