"""The two checks on every attribution, as plain functions (the asset turns them into
`AssetCheckResult`s; tests call them directly).

- the result satisfies the result contract (spec section 2);
- every node of the job produced some evidence, or the result states the gap.
"""

from __future__ import annotations

import json

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import CONTRACT_FIELDS, AttributionResult
from attribution_dagster.rules.vocabulary import vocabulary

CONTRACT_CHECK = "result_matches_contract"
COVERAGE_CHECK = "every_node_has_evidence_or_gap_stated"

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
