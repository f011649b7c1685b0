"""The checks on every attribution: plain functions (tests call them directly), and at the
end the Dagster events the assets yield for them.

- the result satisfies the result contract (spec section 2);
- every node of the job produced some evidence, or the result states the gap;
- the verdict needs no look: not `ambiguous`, not `unattributed`, read from complete data
  (a WARN per job partition, and per window for its jobs, so the UI marks those that do).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetRecordsFilter,
    Output,
)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (  # not exported
    AssetCheckEvaluationTargetMaterializationData,
)

from attribution_dagster.assets.metadata import partial_sources
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import CONTRACT_FIELDS, AttributionResult
from attribution_dagster.rules.vocabulary import vocabulary

CONTRACT_CHECK = "result_matches_contract"
COVERAGE_CHECK = "every_node_has_evidence_or_gap_stated"
VERDICT_CHECK = "verdict_needs_no_look"

_STATUSES = {"attributed", "ambiguous", "unattributed", "not_failed"}


def contract_problems(result: AttributionResult) -> list[str]:
    """What in this result breaks the contract; empty when it holds."""
    problems: list[str] = []
    try:
        text = result.contract_json()
        AttributionResult.model_validate_json(text)
        missing = CONTRACT_FIELDS - set(json.loads(text))
        if missing:
            problems.append(f"contract fields missing: {', '.join(sorted(missing))}")
    except Exception as e:  # noqa: BLE001 - any failure to round-trip is a contract break
        problems.append(f"does not round-trip through JSON: {e}")
    if not result.job_id:
        problems.append("job_id is empty")
    if not result.rules_version:
        problems.append("rules_version is empty")
    if result.status not in _STATUSES:
        problems.append(f"status {result.status!r} is not one of {sorted(_STATUSES)}")
    if result.status == "attributed":
        if result.category not in vocabulary().categories:
            problems.append(f"attributed with category {result.category!r} outside the taxonomy")
    elif result.category is not None:
        problems.append(f"category {result.category!r} set although status is {result.status}")
    if result.status == "ambiguous" and not result.candidates:
        problems.append("ambiguous without candidates")
    for c in result.candidates:
        if c.category not in vocabulary().categories:
            problems.append(f"candidate category {c.category!r} outside the taxonomy")
    if (result.status == "not_failed") == result.failed:
        problems.append(f"failed={result.failed} contradicts status {result.status}")
    for i, link in enumerate(result.symptom_chain):
        if link.role not in ("root_cause", "symptom"):
            problems.append(f"symptom_chain[{i}].role is {link.role!r}")
        if not link.evidence.locator:
            problems.append(f"symptom_chain[{i}] has no evidence locator")
    for i, ev in enumerate(result.evidence):
        if not ev.locator:
            problems.append(f"evidence[{i}] has no locator")
    return problems


def coverage_gaps(ctx: ExecutionContext, result: AttributionResult) -> tuple[list[str], list[str]]:
    """(nodes with no evidence whose gap the result states, nodes silently missing).

    A node "produced evidence" when some source read something for it. A gap is
    "stated" when a source lists the node in `nodes_missing` or a note names it.
    """
    read: set[str] = set()
    stated: set[str] = set()
    for cov in result.coverage:
        read.update(cov.nodes_read)
        stated.update(cov.nodes_missing)
    notes = " ".join(result.notes)
    stated_gaps, silent = [], []
    for node in ctx.nodes:
        if node in read:
            continue
        if node in stated or node in notes:
            stated_gaps.append(node)
        else:
            silent.append(node)
    return stated_gaps, silent


def needs_a_look(result: AttributionResult) -> list[str]:
    """Why a person should look at this verdict; empty when it stands on its own.

    `ambiguous` (two causes fit), `unattributed` (no cause proven) and partial coverage
    (a source failed or delivered part of the window) each give one reason."""
    why: list[str] = []
    if result.status == "ambiguous":
        fits = " or ".join(dict.fromkeys(c.category for c in result.candidates))
        why.append(f"ambiguous: {fits}" if fits else "ambiguous")
    elif result.status == "unattributed":
        why.append("unattributed: no cause proven")
    partial = partial_sources(result.coverage)
    if partial:
        why.append(f"partial data: {', '.join(partial)}")
    return why


# -- as Dagster events ----------------------------------------------------------------------


def partitioned_check(name: str, asset: str, partitions: Any, description: str) -> AssetCheckSpec:
    """A check evaluated per partition, so each partition shows its own result in the UI.
    Partitioned checks are a Dagster preview (1.13): its warning says so at every import."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*")
        return AssetCheckSpec(
            name, asset=asset, partitions_def=partitions, description=description
        )


def verdict_evaluations(
    context: AssetExecutionContext, verdicts: dict[str, tuple[list[str], dict[str, Any]]]
) -> Iterator[Any]:
    """VERDICT_CHECK's result per partition, a WARN naming why the partition needs a look;
    yielded after the step's materializations.

    Each evaluation names the materialization it checked (this run's, of its partition), so
    the check's partition bar counts it as current. Dagster 1.13 does neither by itself: a
    check result of a key range is filed under no partition, and a result handed over with
    the materialization points at none (the event is not stored yet), so the bar shows every
    partition as missing. Hence one `AssetCheckEvaluation` per partition, after the check's
    empty output that the step must yield."""
    asset_key = context.asset_key
    selected = context.assets_def.check_specs_by_output_name.items()
    output = next((n for n, s in selected if s.key.name == VERDICT_CHECK), None)
    if output is None:
        return  # a run that leaves the check out of its selection
    yield Output(None, output_name=output)
    targets = _this_runs_materializations(context, list(verdicts))
    for key, (why, meta) in verdicts.items():
        r = _verdict_result(why, meta, asset_key)
        yield AssetCheckEvaluation(
            asset_key=asset_key,
            check_name=VERDICT_CHECK,
            passed=r.passed,
            metadata=r.metadata,
            severity=r.severity,
            description=r.description,
            partition=key,
            target_materialization_data=targets.get(key),
        )


def _this_runs_materializations(
    context: AssetExecutionContext, keys: list[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """partition -> this run's materialization of it (one query for the whole batch)."""
    records = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=keys),
        limit=len(keys),
    ).records
    run_id = context.run.run_id
    return {
        r.partition_key: AssetCheckEvaluationTargetMaterializationData(
            storage_id=r.storage_id, run_id=r.run_id, timestamp=r.timestamp
        )
        for r in records
        if r.run_id == run_id and r.partition_key is not None
    }


def _verdict_result(why: list[str], meta: dict[str, Any], asset_key: Any) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=VERDICT_CHECK,
        asset_key=asset_key,
        passed=not why,
        severity=AssetCheckSeverity.WARN,
        description="; ".join(why) or "the verdict stands on complete data",
        metadata={"needs a look because": "; ".join(why) or "—", **meta},
    )
