"""Materialization metadata a person can read in the Dagster UI (Markdown tables, counts)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import RawEvidence, SourceCoverage
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult, ChainLink
from attribution_dagster.core.topology import Topology
from attribution_dagster.reports.render import look_first_at, suspects_text
from attribution_dagster.reports.tables import markdown_cell, markdown_table

MAX_ROWS = 50
KEY_LINKS = 8  # the inline table: every root cause, then the earliest symptoms

_KEY_SCHEMA = TableSchema(
    columns=[
        TableColumn("time", "string"),
        TableColumn("node", "string"),
        TableColumn("role", "string"),
        TableColumn("summary", "string"),
        TableColumn("evidence", "string"),
    ]
)


def _time(t: datetime | None) -> str:
    return t.isoformat() if t is not None else "?"


def md_table(header: list[str], rows: list[list[Any]], more: int = 0) -> str:
    """A metadata table: cells cut at 160 characters (reports/tables.py)."""
    return markdown_table(header, rows, limit=160, more=more)


def coverage_table(coverage: list[SourceCoverage]) -> str:
    rows = [
        [
            c.source,
            c.status,
            ", ".join(c.nodes_read),
            ", ".join(c.nodes_missing),
            c.records,
            c.lines or c.samples,
            c.queries,
            c.bytes,
            c.problems,
            "; ".join(c.errors),
        ]
        for c in coverage
    ]
    return md_table(
        [
            "source",
            "status",
            "nodes read",
            "nodes missing",
            "kept",
            "lines/samples",
            "queries",
            "bytes",
            "bad lines",
            "errors",
        ],
        rows,
    )


def partial_sources(coverage: list[SourceCoverage]) -> list[str]:
    """Sources that failed or delivered only part of what was asked."""
    return [c.source for c in coverage if c.status in ("partial", "failed") or c.errors]


def context_metadata(ctx: ExecutionContext, case_dir: str | None) -> dict[str, Any]:
    """What the job was; `case_dir` when it came from a case, else the scheduler named."""
    origin: dict[str, Any] = (
        {"case_dir": MetadataValue.path(case_dir)}
        if case_dir
        else {"from": f"{ctx.scheduler} scheduler of cluster {ctx.cluster or '?'}"}
    )
    return {
        "job_id": ctx.job_id,
        "cluster": ctx.cluster or "",
        "scheduler": ctx.scheduler,
        "state": ctx.state.value,
        "exit_code": ctx.exit_code if ctx.exit_code is not None else "",
        "nodes": MetadataValue.int(len(ctx.nodes)),
        "node names": ", ".join(ctx.nodes[:MAX_ROWS]),
        "gpu_model": ctx.gpu_model or "",
        "start": ctx.start.isoformat(),
        "end": ctx.end.isoformat(),
        **({"reason": ctx.reason} if ctx.reason else {}),
        **origin,
    }


def evidence_metadata(ctx: ExecutionContext, raw: RawEvidence) -> dict[str, Any]:
    per_node = Counter(r.node for r in raw.records) + Counter(s.node for s in raw.samples)
    silent = [n for n in ctx.nodes if per_node.get(n, 0) == 0]
    partial = partial_sources(raw.coverage)
    return {
        "records": MetadataValue.int(len(raw.records)),
        "metric samples": MetadataValue.int(len(raw.samples)),
        "coverage": MetadataValue.md(coverage_table(raw.coverage)),
        "partial data": MetadataValue.bool(bool(partial)),
        "failed or partial sources": ", ".join(partial) or "none",
        "nodes with no kept lines": ", ".join(silent) or "none",
        **topology_metadata(raw.topology),
    }


def topology_metadata(topology: Topology | None) -> dict[str, Any]:
    """Which topology snapshot a job was read against (its time and sources), so the
    lineage of a verdict shows it (issue 23)."""
    if topology is None:
        return {"topology": "none"}
    return {
        "topology": f"{len(topology.switches)} switches, {len(topology.cables)} cables, "
        f"{len(topology.all_nodes)} nodes",
        "topology taken at": _time(topology.taken_at) if topology.taken_at else "unknown",
        "topology sources": ", ".join(topology.sources[:10])
        + (f" (+{len(topology.sources) - 10})" if len(topology.sources) > 10 else ""),
    }


def observations_metadata(observations: list[Observation]) -> dict[str, Any]:
    kinds: dict[str, set[str]] = {}
    counts = Counter(o.kind for o in observations)
    for o in observations:
        kinds.setdefault(o.kind, set()).add(o.node)
    rows = [[k, n, ", ".join(sorted(kinds[k]))] for k, n in counts.most_common(MAX_ROWS)]
    return {
        "observations": MetadataValue.int(len(observations)),
        "kinds": MetadataValue.md(md_table(["kind", "count", "nodes"], rows)) if rows else "none",
    }


def link_time(link: ChainLink) -> str:
    """`2026-11-02 10:12:40`, a range `..10:22:41` for a line written between two timed
    lines, or `>T` for one logged at T or later."""
    if link.time is None:
        return "?"
    when = link.time.strftime("%Y-%m-%d %H:%M:%S")
    if link.time_latest is not None and link.time_latest != link.time:
        return when + link.time_latest.strftime("..%H:%M:%S")
    return (">" + when) if link.time_quality == "inherited" else when


def key_links_table(result: AttributionResult) -> Any:
    """Root causes, then the earliest symptoms (UTC), as a table the UI shows inline: Markdown
    over 1,000 characters hides behind a link, so the full chain is a second entry."""
    chain = result.symptom_chain
    causes = [i for i, link in enumerate(chain) if link.role == "root_cause"][:KEY_LINKS]
    rest = [i for i, link in enumerate(chain) if link.role != "root_cause"]
    keep = causes + rest[: max(KEY_LINKS - len(causes), 0)]  # causes first, each part in time order
    records = []
    for i in keep:
        link = chain[i]
        records.append(
            TableRecord(
                {
                    "time": link_time(link),
                    "node": link.node,
                    "role": link.role,
                    "summary": markdown_cell(link.summary, 120),
                    "evidence": link.evidence.locator,
                }
            )
        )
    return MetadataValue.table(records=records, schema=_KEY_SCHEMA)


def verdict_metadata(result: AttributionResult) -> dict[str, Any]:
    """The verdict at a glance, first on the page: what, where to look, how sure, whose job.

    `look first at` is the CLI's best line (reports/render.py); `job` is the full
    `cluster/job_id`, which a long or cleaned partition key only abbreviates."""
    md: dict[str, Any] = {
        "status": result.status,
        "category": result.category
        or (" or ".join(dict.fromkeys(c.category for c in result.candidates)) or "—"),
        # the CLI's line; for an ambiguous result, the nodes its candidates name
        "look first at": look_first_at(result)
        or (", ".join(result.suspect_nodes) if result.status == "ambiguous" else "")
        or "—",
        "suspects": suspects_text(result),
    }
    if result.confidence is not None:
        md["confidence"] = MetadataValue.float(round(float(result.confidence), 4))
    md["job"] = f"{result.cluster}/{result.job_id}" if result.cluster else result.job_id
    if result.remediation:
        md["remediation"] = result.remediation
    return md


def attribution_metadata(result: AttributionResult) -> dict[str, Any]:
    """The verdict first (status, category, look first at, suspects, confidence), then the
    summary and chain, then counts: the UI lists entries in this order."""
    chain = result.symptom_chain
    rows = [
        [
            link_time(link),
            link.node,
            link.kind,
            link.role,
            link.count,
            link.summary,
            link.evidence.locator,
        ]
        for link in chain[:MAX_ROWS]
    ]
    partial = partial_sources(result.coverage)
    md: dict[str, Any] = {
        **verdict_metadata(result),
        "partial data": MetadataValue.bool(bool(partial)),
        "summary": result.summary or "",
        "suspect nodes": ", ".join(result.suspect_nodes) or "none",
        "root cause, then first symptoms": key_links_table(result),
        "symptom chain": MetadataValue.md(
            md_table(
                ["time", "node", "kind", "role", "count", "summary", "evidence"],
                rows,
                more=max(0, len(chain) - MAX_ROWS),
            )
            if rows
            else "_no observations_"
        ),
        "evidence items": MetadataValue.int(len(result.evidence)),
        "root causes": MetadataValue.int(sum(1 for x in chain if x.role == "root_cause")),
        "symptoms": MetadataValue.int(sum(1 for x in chain if x.role == "symptom")),
        "failed or partial sources": ", ".join(partial) or "none",
        "rules_version": result.rules_version,
    }
    if result.candidates:
        md["candidates"] = MetadataValue.md(
            md_table(
                ["category", "nodes", "score"],
                [[c.category, ", ".join(c.nodes), f"{c.score:.2f}"] for c in result.candidates],
            )
        )
    if result.notes:
        notes = (f"- {markdown_cell(n, 300)}" for n in result.notes)
        md["notes"] = MetadataValue.md("\n".join(notes))
    return md


_JOBS_SCHEMA = TableSchema(
    columns=[
        TableColumn("job", "string"),
        TableColumn("status", "string"),
        TableColumn("category", "string"),
        TableColumn("look first at", "string"),
        TableColumn("confidence", "float"),
        TableColumn("partial data", "bool"),
    ]
)


def jobs_table(results: list[AttributionResult]) -> Any:
    """A window's jobs as a typed table, in the order given (those needing a look first)."""
    records = [
        TableRecord(
            {
                "job": r.job_id,
                "status": r.status,
                "category": verdict_metadata(r)["category"],
                "look first at": markdown_cell(look_first_at(r) or "—", 120),
                "confidence": float(r.confidence) if r.confidence is not None else None,
                "partial data": bool(partial_sources(r.coverage)),
            }
        )
        for r in results
    ]
    return MetadataValue.table(records=records, schema=_JOBS_SCHEMA)
