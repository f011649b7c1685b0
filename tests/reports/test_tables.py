"""reports/tables.py: the one Markdown table writer (weekly report, chain summary, metadata)."""

from __future__ import annotations

from attribution_dagster.reports.tables import Code, markdown_cell, markdown_table


def test_a_cell_stays_one_cell_on_one_line() -> None:
    assert markdown_cell("a|b\nc\r\x00`x`") == "a\\|b c \ufffd'x'"
    assert markdown_cell(None) == ""
    assert markdown_cell("x" * 10, limit=5) == "xxxx…"
    assert markdown_cell(Code("{host=\"a|b\"} `q`")) == "`{host=\"a\\|b\"} 'q'`"


def test_table_shape_and_more_line() -> None:
    text = markdown_table(["a", "b"], [[1, "x|y"], [None, Code("logs/n/kern.log:3")]], more=2)
    assert text.splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | x\\|y |",
        "|  | `logs/n/kern.log:3` |",
        "",
        "… and 2 more",
    ]


def test_the_analysis_fields_are_declared_once() -> None:
    """The CLI settings, the config block and the Dagster resource carry the same fields,
    inherited from AnalysisFields (all default to every core for a job over 32 MiB)."""
    from attribution_dagster.core.config import AnalysisConfig
    from attribution_dagster.core.settings import AnalysisFields, AnalysisSettings
    from attribution_dagster.resources.settings import AnalysisSettingsResource

    names = set(AnalysisFields.model_fields)
    for model in (AnalysisSettings, AnalysisConfig, AnalysisSettingsResource):
        assert issubclass(model, AnalysisFields)
        assert names <= set(model.model_fields), model
    cfg = AnalysisConfig(lead_seconds=300)
    res = AnalysisSettingsResource(**AnalysisSettings.of(cfg).model_dump())
    assert res.client() == AnalysisSettings.of(cfg)
    assert res.client().lead_seconds == 300 and res.client().workers is None
    assert AnalysisConfig().workers == AnalysisSettings().workers is None
