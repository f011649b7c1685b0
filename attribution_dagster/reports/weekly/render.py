"""The report as Markdown (PNG links or data URIs) and as one self-contained HTML page."""

from __future__ import annotations

import html
from datetime import timedelta

from attribution_dagster.reports.tables import markdown_table
from attribution_dagster.reports.weekly.charts import data_uri
from attribution_dagster.reports.weekly.model import WeeklyReport
from attribution_dagster.reports.weekly.rows import (
    ACCOUNTING_NOTE,
    CATEGORY_HEADER,
    OFFENDER_HEADER,
    SUMMARY_HEADER,
    category_rows,
    offender_rows,
    summary_rows,
    why_rows,
)


def render_markdown(rep: WeeklyReport, images: dict[str, str]) -> str:
    """Markdown; `images` maps chart name -> link (a file name, or a data URI)."""
    t = rep.this
    parts = [
        f"# Weekly failure report: {rep.scope}, {rep.week}",
        f"{rep.start:%Y-%m-%d} to {rep.end - timedelta(days=1):%Y-%m-%d} (jobs by end time, "
        f"UTC). Generated {rep.generated_at:%Y-%m-%d %H:%M} UTC.",
        markdown_table(SUMMARY_HEADER, summary_rows(rep)),
        "## Failed jobs and GPU-hours lost by category",
        markdown_table(CATEGORY_HEADER, category_rows(rep)),
    ]
    parts += [f"![{n}]({images[n]})" for n in ("failed_by_category", "gpu_hours_lost")
              if n in images]
    parts.append(ACCOUNTING_NOTE)
    if t.failed_without_gpu_count:
        parts.append(f"{t.failed_without_gpu_count} failed jobs had no GPU count from the "
                     "scheduler; their GPU-hours are not counted.")
    parts.append("## Repeat offenders (suspect of an infrastructure failure in two or more jobs)")
    parts.append(markdown_table(OFFENDER_HEADER, offender_rows(rep)) if rep.offenders
                 else "None this week.")
    parts.append("## Why jobs stayed ambiguous or unattributed")
    parts.append(markdown_table(["ambiguous between", "jobs"], why_rows(t.ambiguous_why))
                 if t.ambiguous_why else "No ambiguous jobs.")
    parts.append(markdown_table(["unattributed because", "jobs"], why_rows(t.unattributed_why))
                 if t.unattributed_why else "No unattributed jobs.")
    parts.append("## Jobs per day")
    if "jobs_per_day" in images:
        parts.append(f"![jobs_per_day]({images['jobs_per_day']})")
    parts.append(markdown_table(["status", "jobs"], [[k, str(v)] for k, v in t.by_status.items()]))
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
    t = rep.this
    img = {n: f'<img alt="{n}" src="{data_uri(b)}">' for n, b in charts.items()}
    amb = (_html_table(["ambiguous between", "jobs"], why_rows(t.ambiguous_why))
           if t.ambiguous_why else "<p>No ambiguous jobs.</p>")
    una = (_html_table(["unattributed because", "jobs"], why_rows(t.unattributed_why))
           if t.unattributed_why else "<p>No unattributed jobs.</p>")
    off = (_html_table(OFFENDER_HEADER, offender_rows(rep)) if rep.offenders
           else "<p>None this week.</p>")
    gpu_note = (f"<p class=muted>{t.failed_without_gpu_count} failed jobs had no GPU count "
                "from the scheduler; their GPU-hours are not counted.</p>"
                if t.failed_without_gpu_count else "")
    title = f"Weekly failure report: {html.escape(rep.scope)}, {rep.week}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head>
<body><h1>{title}</h1>
<p class=muted>{rep.start:%Y-%m-%d} to {rep.end - timedelta(days=1):%Y-%m-%d} (jobs by end
time, UTC). Generated {rep.generated_at:%Y-%m-%d %H:%M} UTC by attribution-dagster.</p>
{_html_table(SUMMARY_HEADER, summary_rows(rep))}
<h2>Failed jobs and GPU-hours lost by category</h2>
<div class=charts>{img.get("failed_by_category", "")}{img.get("gpu_hours_lost", "")}</div>
{_html_table(CATEGORY_HEADER, category_rows(rep))}
<p class=muted>{html.escape(ACCOUNTING_NOTE)}</p>{gpu_note}
<h2>Repeat offenders (suspect of an infrastructure failure in two or more jobs)</h2>{off}
<h2>Why jobs stayed ambiguous or unattributed</h2>{amb}{una}
<h2>Jobs per day</h2><div class=charts>{img.get("jobs_per_day", "")}</div>
</body></html>
"""

