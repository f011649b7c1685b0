"""Human-readable views of results: the CLI's text, summary tables, Markdown for the UI."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.result import AttributionResult, ChainLink
from attribution_dagster.reports.tables import Code, markdown_table

_STATUS_MARK = {
    "attributed": "ATTRIBUTED",
    "ambiguous": "AMBIGUOUS",
    "unattributed": "UNATTRIBUTED",
    "not_failed": "NOT FAILED",
}


def fmt_time(t: datetime | None) -> str:
    if t is None:
        return "?"
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if t.utcoffset() is not None else "")


def _where(link: ChainLink) -> str:
    parts = [link.node]
    if link.gpu is not None:
        parts.append(f"GPU {link.gpu}")
    elif link.pci:
        parts.append(f"PCI {link.pci}")
    if link.port:
        parts.append(link.port)
    return " ".join(parts)


def suspects_text(result: AttributionResult) -> str:
    if result.suspects:
        out = []
        for s in result.suspects:
            bits = [s.node]
            if s.gpu is not None:
                bits.append(f"GPU {s.gpu}")
            if s.pci:
                bits.append(f"PCI {s.pci}")
            if s.port:
                bits.append(f"port {s.port}")
            out.append(" ".join(bits))
        return ", ".join(out)
    if result.suspect_nodes:
        return ", ".join(result.suspect_nodes)
    return "shared (no single node)" if result.scope == "shared" else "-"


def _lead_where(result: AttributionResult) -> list[str]:
    """Each lead as `node GPU g (rank r, pg p, seq s)`."""
    out = []
    for lead in result.leads:
        where = lead.node + (f" GPU {lead.gpu}" if lead.gpu is not None else "")
        what = [f"rank {lead.rank}"] if lead.rank is not None else []
        if lead.process_group is not None:
            what.append(f"pg {lead.process_group}")
        if lead.seq is not None:
            what.append(f"seq {lead.seq}")
        out.append(where + (f" ({', '.join(what)})" if what else ""))
    return out


def look_first_at(result: AttributionResult) -> str:
    """The CLI's best line without its label: the suspects of an attributed result, else
    its first lead; empty when the result names nowhere to look."""
    if result.status == "attributed" and result.fault_domain is not None:
        # where the cause sits in the fabric (issue 23): the switch and its ports
        return result.fault_domain.describe()
    if result.status == "attributed":
        return suspects_text(result)
    leads = _lead_where(result)
    return leads[0] if leads else ""


def leads_lines(result: AttributionResult) -> list[str]:
    """`look first at` lines of an unattributed result's leads (issue 18: the rank that did
    not arrive at the collective the others wait in)."""
    out = []
    for lead, where in zip(result.leads, _lead_where(result), strict=True):
        out.append(f"  look first at: {where}")
        out.append(f"    why: {lead.why}")
        for loc in lead.evidence:
            out.append(f"    at {loc}")
    return out


def coverage_lines(coverage: Sequence[SourceCoverage]) -> list[str]:
    lines = []
    for c in coverage:
        what = f"{c.lines:,} lines" if c.lines or not c.samples else f"{c.samples:,} samples"
        line = f"{c.source}: {c.status}, {c.files} files, {what}, {c.records:,} kept"
        if c.nodes_missing:
            line += f"; no data for {', '.join(c.nodes_missing)}"
        if c.problems:
            line += (
                f"; bad lines: {c.invalid_utf8_lines} invalid UTF-8, "
                f"{c.overlong_lines} overlong, {c.binary_lines} binary"
            )
        if c.files_skipped:
            line += f"; {c.files_skipped} rotated file(s) outside the window not read"
        if c.context_lines:
            line += f"; {c.context_lines} cluster-level line(s) naming no job node"
        lines.append(line)
        lines.extend(f"  ! {e}" for e in c.errors)
    return lines


def _visible_links(chain: Sequence[ChainLink], max_links: int) -> list[ChainLink]:
    """Every root-cause link, then the earliest symptoms, shown in time order."""
    causes = [i for i, link in enumerate(chain) if link.role == "root_cause"]
    rest = [i for i, link in enumerate(chain) if link.role != "root_cause"]
    keep = sorted(causes + rest[: max(max_links - len(causes), 0)])
    return [chain[i] for i in keep]


def render_result(result: AttributionResult, *, max_links: int = 12) -> str:
    """A few lines an SRE can act on: what, where, why we think so, where to look."""
    out: list[str] = []
    head = f"job {result.job_id}"
    if result.cluster:
        head += f" ({result.cluster})"
    if result.state:
        head += f"  state {result.state}"
    out.append(head)
    status = _STATUS_MARK.get(result.status, result.status)
    conf = f"  confidence {result.confidence:.2f}" if result.confidence is not None else ""
    if result.category:
        out.append(f"  {status}: {result.category}{conf}")
    elif result.candidates:
        fits = dict.fromkeys(c.category for c in result.candidates)
        out.append(f"  {status}: " + " or ".join(fits))
    else:
        out.append(f"  {status}")
    if result.summary:
        out.append(f"  {result.summary}")
    if result.status == "attributed":
        out.append(f"  look first at: {look_first_at(result)}")
        if result.fault_domain is not None and (result.suspects or result.suspect_nodes):
            out.append(f"  suspects: {suspects_text(result)}")
    elif result.leads:
        out.extend(leads_lines(result))
    if result.candidates:
        out.append("  candidates:")
        for c in result.candidates:
            nodes = ", ".join(c.nodes) or "shared"
            out.append(f"    {c.category:<22} {nodes:<30} score {c.score:.2f}")
    if result.remediation:
        out.append(f"  next step: {result.remediation}")
    if result.symptom_chain:
        out.append("  chain:")
        for link in _visible_links(result.symptom_chain, max_links):
            mark = "CAUSE  " if link.role == "root_cause" else "symptom"
            count = f" x{link.count}" if link.count > 1 else ""
            when = fmt_time(link.time)
            if link.time_latest is not None and link.time is not None:
                when = f" {when}..{link.time_latest.astimezone(timezone.utc):%H:%M:%S}"
            elif link.time_quality == "inherited":
                when = f">{when}"
            else:
                when = f" {when}"
            out.append(
                f"   {when}  {mark}  {_where(link):<24} {link.summary}{count}"
            )
            out.append(f"        at {link.evidence.locator}")
        if len(result.symptom_chain) > max_links:
            out.append(f"    ... {len(result.symptom_chain) - max_links} more (use --json)")
        if any(link.time_latest is not None for link in result.symptom_chain):
            out.append("    (T1..T2: the line carries no time; it was logged between T1 and T2)")
        elif any(link.time_quality == "inherited" for link in result.symptom_chain):
            out.append("    (>T: the line carries no time; it was logged after T)")
    for note in result.notes:
        out.append(f"  note: {note}")
    cov = coverage_lines(result.coverage)
    if cov:
        out.append("  evidence read:")
        out.extend(f"    {c}" for c in cov)
    out.append(f"  rules {result.rules_version}")
    return "\n".join(out)


def summary_rows(results: Iterable[AttributionResult]) -> list[list[str]]:
    """One row per job: where it ran, what we concluded, and when the cause began (UTC)."""
    rows = []
    for r in results:
        first = next((c for c in r.symptom_chain if c.role == "root_cause" and c.time), None)
        when = "-"
        if first is not None and first.time is not None:
            stamp = first.time.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            when = (">" if first.time_quality == "inherited" else "") + stamp
        rows.append(
            [
                f"{r.cluster}/{r.job_id}" if r.cluster else r.job_id,
                r.status,
                r.category or ("|".join(c.category for c in r.candidates) or "-"),
                ",".join(r.suspect_nodes) or ("shared" if r.scope == "shared" else "-"),
                when,
            ]
        )
    return rows


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines.extend(fmt.format(*row) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def chain_markdown(result: AttributionResult, *, max_links: int = 40) -> str:
    """The symptom chain as a Markdown table, for Dagster materialization metadata."""
    rows = []
    for link in result.symptom_chain[:max_links]:
        when = fmt_time(link.time)
        if link.time_latest is not None and link.time is not None:
            when += f"..{link.time_latest.astimezone(timezone.utc):%H:%M:%S}"
        rows.append([when, _where(link), link.role, link.kind, link.summary,
                     Code(str(link.evidence.locator))])  # fmt: skip
    return markdown_table(["time", "node", "role", "kind", "summary", "evidence"], rows)
