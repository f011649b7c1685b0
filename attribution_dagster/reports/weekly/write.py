"""Writing one report to disk: report.html, report.md with its PNG charts, report.json."""

from __future__ import annotations

from pathlib import Path

from attribution_dagster.reports.weekly.charts import render_charts
from attribution_dagster.reports.weekly.model import WeeklyReport
from attribution_dagster.reports.weekly.render import render_html, render_markdown


def write_report(rep: WeeklyReport, out_dir: str | Path) -> dict[str, Path]:
    """report.html (self-contained), report.md with the PNGs beside it, report.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    charts = render_charts(rep)
    paths: dict[str, Path] = {}
    for name, png in charts.items():
        p = out / f"{name}.png"
        p.write_bytes(png)
        paths[name] = p
    paths["html"] = out / "report.html"
    paths["html"].write_text(render_html(rep, charts), encoding="utf-8")
    paths["md"] = out / "report.md"
    paths["md"].write_text(
        render_markdown(rep, {n: f"{n}.png" for n in charts}), encoding="utf-8"
    )
    paths["json"] = out / "report.json"
    paths["json"].write_text(rep.model_dump_json(indent=2), encoding="utf-8")
    return paths
