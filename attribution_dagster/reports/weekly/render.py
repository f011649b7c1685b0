"""The report as Markdown (PNG links or data URIs) and as one self-contained HTML page.

Both pages are the same sections in the same order (`_sections`): a section is a title,
its tables (a table with no rows says so in words) and its notes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import timedelta

from attribution_dagster.reports.tables import markdown_table
from attribution_dagster.reports.weekly.charts import data_uri
from attribution_dagster.reports.weekly.model import WeeklyReport
from attribution_dagster.reports.weekly.rows import (
    ACCOUNTING_NOTE,
    CABLE_SUSPECT,
    CATEGORY_HEADER,
    FABRIC_HEADER,
    FAILED_JOB_HEADER,
    OFFENDER_HEADER,
    RECOMMENDS,
    SUMMARY_HEADER,
    category_rows,
    fabric_rows,
    failed_job_rows,
    offender_rows,
    summary_rows,
    why_rows,
)

MAX_FAILED_SHOWN = 50  # failed jobs on the pages; report.json and --json hold them all


@dataclass
class _Table:
    header: list[str]
    rows: list[list[str]]
    empty: str  # said instead of an empty table
    more: int = 0  # rows left out


@dataclass
class _Section:
    title: str
    tables: list[_Table]
    charts: list[str] = field(default_factory=list)  # chart names, above the tables
    notes: list[str] = field(default_factory=list)


def _sections(rep: WeeklyReport) -> list[_Section]:
    t = rep.this
    n = t.failed_without_gpu_count
    gpu_note = ([f"{n} failed job{'s' if n != 1 else ''} had no GPU count from the "
                 "scheduler; their GPU-hours are not counted."]
                if t.failed_without_gpu_count else [])
    shown = failed_job_rows(rep, MAX_FAILED_SHOWN)
    return [
        _Section("Failed jobs and GPU-hours lost by category",
                 [_Table(CATEGORY_HEADER, category_rows(rep), "No failed jobs.")],
                 ["failed_by_category", "gpu_hours_lost"], [ACCOUNTING_NOTE, *gpu_note]),
        _Section("Repeat offenders (suspect of an infrastructure failure in two or more jobs)",
                 [_Table(OFFENDER_HEADER, offender_rows(rep), "None this week.")],
                 notes=[RECOMMENDS]),
        _Section(f"Switches, switch ports and NVLink domains over the last {rep.lookback_weeks} "
                 "weeks",
                 [_Table(FABRIC_HEADER, fabric_rows(rep),
                         "None (no switch, switch port or NVLink domain named by the topology "
                         "in two or more jobs).")],
                 notes=["From the results' fault domain (the cluster's topology). "
                        f"\"{CABLE_SUSPECT}\": a switch port that failed on its own (one "
                        "cable, level link) in two or more jobs, in any of these weeks; a port hit "
                        "only with its "
                        f"switch's other ports points at the switch. {RECOMMENDS}"]),
        _Section("Failed jobs and their verdicts",
                 [_Table(FAILED_JOB_HEADER, shown, "No failed jobs.",
                         more=len(rep.failed_jobs) - len(shown))]),
        _Section("Why jobs stayed ambiguous or unattributed", [
            _Table(["ambiguous between", "jobs"], why_rows(t.ambiguous_why), "No ambiguous jobs."),
            _Table(["unattributed because", "jobs"], why_rows(t.unattributed_why),
                   "No unattributed jobs."),
        ]),
        _Section("Jobs per day",
                 [_Table(["status", "jobs"], [[k, str(v)] for k, v in t.by_status.items()],
                         "No jobs.")], ["jobs_per_day"]),
    ]


def _period(rep: WeeklyReport) -> str:
    return (f"{rep.start:%Y-%m-%d} to {rep.end - timedelta(days=1):%Y-%m-%d} (jobs by end time, "
            f"UTC). Generated {rep.generated_at:%Y-%m-%d %H:%M} UTC")


def render_markdown(rep: WeeklyReport, images: dict[str, str]) -> str:
    """Markdown; `images` maps chart name -> link (a file name, or a data URI)."""
    parts = [f"# Weekly failure report: {rep.scope}, {rep.week}", _period(rep) + ".",
             markdown_table(SUMMARY_HEADER, summary_rows(rep))]
    for sec in _sections(rep):
        parts.append(f"## {sec.title}")
        parts += [f"![{n}]({images[n]})" for n in sec.charts if n in images]
        for tab in sec.tables:
            more = f"\n\n… and {tab.more} more (all in report.json)" if tab.more > 0 else ""
            parts.append(markdown_table(tab.header, tab.rows) + more if tab.rows else tab.empty)
        parts += sec.notes
    return "\n\n".join(parts) + "\n"


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;
color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;
padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.charts img{max-width:49%;vertical-align:top}.muted{color:#777;font-size:12px}
"""


def render_html(rep: WeeklyReport, charts: dict[str, bytes]) -> str:
    """One self-contained page: tables plus the charts as inline PNG data URIs."""
    title = f"Weekly failure report: {html.escape(rep.scope)}, {rep.week}"
    body = [f"<h1>{title}</h1>",
            f"<p class=muted>{_period(rep)} by attribution-dagster.</p>",
            _html_table(SUMMARY_HEADER, summary_rows(rep))]
    for sec in _sections(rep):
        body.append(f"<h2>{html.escape(sec.title)}</h2>")
        imgs = "".join(f'<img alt="{n}" src="{data_uri(charts[n])}">'
                       for n in sec.charts if n in charts)
        if imgs:
            body.append(f"<div class=charts>{imgs}</div>")
        for tab in sec.tables:
            body.append(_html_table(tab.header, tab.rows) if tab.rows
                        else f"<p>{html.escape(tab.empty)}</p>")
            if tab.more > 0:
                body.append(f"<p class=muted>… and {tab.more} more (all in report.json)</p>")
        body += [f"<p class=muted>{html.escape(n)}</p>" for n in sec.notes]
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{_CSS}</style></head>\n<body>"
            + "\n".join(body) + "\n</body></html>\n")
