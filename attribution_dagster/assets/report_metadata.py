"""The weekly report asset's metadata: the page a team lead reads in the Dagster UI.

- `report`: the whole report as Markdown with its charts inline (data-URI PNGs), so the
  charts are on the asset page, one click from the materialization;
- `report_url`: the HTML report where `fleet.report_base_url` publishes `reports_dir`
  (Dagster's webserver serves no files; a path on the server host opens nothing in a
  browser elsewhere). No entry when no base URL is configured;
- the week's figures as numbers (failed jobs and GPU-hours lost per failure class,
  abstention rate, ...), so the asset's plots tab draws them over the weeks;
- tables: the failed jobs and their verdicts, the repeat offenders with what to do (drain
  candidates: the report recommends, it never drains), and the switches, switch ports and
  NVLink domains across weeks with the cable or transceiver suspects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from attribution_dagster.reports import weekly
from attribution_dagster.reports.tables import markdown_cell

MAX_TABLE_ROWS = 100  # per table; report.json on disk holds every row


def _schema(header: list[str]) -> TableSchema:
    return TableSchema(columns=[TableColumn(h, "string") for h in header])


def _table(header: list[str], rows: list[list[str]]) -> Any:
    records = [TableRecord({h: markdown_cell(c, 200) for h, c in zip(header, r, strict=True)})
               for r in rows[:MAX_TABLE_ROWS]]
    return MetadataValue.table(records=records, schema=_schema(header))


def report_url(base_url: str | None, rep: weekly.WeeklyReport) -> str | None:
    """`<base>/<scope>/<week>/report.html`: the layout `write_report` gives `reports_dir`."""
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/{quote(rep.scope)}/{rep.week}/report.html"


def report_metadata(
    rep: weekly.WeeklyReport, paths: dict[str, Path], base_url: str | None
) -> dict[str, Any]:
    charts = {n: paths[n].read_bytes() for n in ("failed_by_category", "gpu_hours_lost",
                                                  "jobs_per_day")}
    t = rep.this
    md: dict[str, Any] = {
        "report": MetadataValue.md(
            weekly.render_markdown(rep, {n: weekly.data_uri(b) for n, b in charts.items()})
        ),
    }
    url = report_url(base_url, rep)
    if url:
        md["report_url"] = MetadataValue.url(url)
    md |= {
        # files on the host that ran the materialization (published at report_url, if set)
        "html": MetadataValue.path(str(paths["html"])),
        "markdown": MetadataValue.path(str(paths["md"])),
        # a number only when every failed job had a GPU count; else the words
        # ("unknown (N jobs without a GPU count)"), never a 0 that means unknown
        "GPU-hours lost": MetadataValue.float(float(t.gpu_hours_lost_total))
        if t.gpu_hours_known else MetadataValue.text(t.gpu_hours_text(fmt=",.1f")),
        # only the infrastructure share is the fleet's loss (not a user's time limit)
        "GPU-hours lost to the fleet": MetadataValue.float(t.fleet_gpu_hours)
        if t.fleet_gpu_hours_known
        else MetadataValue.text(t.class_hours_text(weekly.INFRA, fmt=",.1f")),
    }
    for name, value in weekly.figures(rep).items():
        if isinstance(value, float):
            md[name] = MetadataValue.float(value)
        elif isinstance(value, int):
            md[name] = MetadataValue.int(value)
        else:  # GPU-hours of a class with jobs without a GPU count: not known
            cls = name.split(": ", 1)[1]
            md[name] = MetadataValue.text(t.class_hours_text(cls, fmt=",.1f"))
    md["failed jobs and verdicts"] = _table(weekly.FAILED_JOB_HEADER,
                                            weekly.failed_job_rows(rep, MAX_TABLE_ROWS))
    md["repeat offenders (drain candidates)"] = _table(weekly.OFFENDER_HEADER,
                                                       weekly.offender_rows(rep))
    md["switches, switch ports, NVLink domains"] = _table(weekly.FABRIC_HEADER,
                                                          weekly.fabric_rows(rep))
    md["recommendations"] = MetadataValue.text(weekly.RECOMMENDS)
    return md
