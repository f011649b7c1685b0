"""The CLI's promises: one JSON object on stdout, one-line errors, never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attribution_dagster.cli.app import main
from attribution_dagster.core.result import AttributionResult

CONTEXT = {
    "job_id": "4242",
    "scheduler": "slurm",
    "cluster": "testc",
    "state": "FAILED",
    "exit_code": 1,
    "start": "2026-11-02T10:00:00Z",
    "end": "2026-11-02T10:30:00Z",
    "nodes": ["node-a", "node-b"],
    "gpu_model": "H100",
}


def make_case(root: Path, context: dict | str | None = CONTEXT, logs: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if context is not None:
        text = context if isinstance(context, str) else json.dumps(context)
        (root / "context.json").write_text(text)
    for rel, content in (logs or {}).items():
        p = root / "logs" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            p.write_bytes(gzip.compress(content.encode()))
        else:
            p.write_text(content)
    return root


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attribution_dagster.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


XID79 = (
    "Nov  2 10:10:00 node-b kernel: NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', "
    "name=<unknown>, GPU has fallen off the bus.\n"
)
TIMEOUT_LINE = (
    "[rank3]:[E1102 10:10:30.123456789 ProcessGroupNCCL.cpp:697] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=30000) ran for 30001 milliseconds before timing out.\n"
)


def test_analyze_json_is_exactly_one_object(tmp_path: Path) -> None:
    case = make_case(
        tmp_path / "c",
        logs={
            "node-b/kern.log": XID79,
            "node-a/app.log": "2026-11-02T10:10:29Z training step 10\n" + TIMEOUT_LINE,
        },
    )
    proc = run_cli("analyze", str(case), "--json")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1
    result = AttributionResult.model_validate_json(lines[0])
    assert result.job_id == "4242"
    assert result.failed is True
    assert result.category == "gpu.lost"
    assert result.suspect_nodes == ["node-b"]
    assert "Traceback" not in proc.stderr


def test_analyze_text_names_cause_and_location(tmp_path: Path, capsys) -> None:
    case = make_case(
        tmp_path / "c", logs={"node-b/kern.log": XID79, "node-a/app.log": TIMEOUT_LINE}
    )
    assert main(["analyze", str(case)]) == 0
    out = capsys.readouterr().out
    assert "gpu.lost" in out
    assert "logs/node-b/kern.log:1" in out


@pytest.mark.parametrize(
    "context, expected",
    [
        (None, "context.json"),
        ("{not json", "context.json"),
        ({k: v for k, v in CONTEXT.items() if k != "nodes"}, "nodes"),
        ({**CONTEXT, "start": "yesterday"}, "start"),
        ({**CONTEXT, "state": "EXPLODED"}, "state"),
    ],
)
def test_bad_context_is_one_line_error(tmp_path: Path, context, expected: str) -> None:
    case = make_case(tmp_path / "c", context=context, logs={"node-a/app.log": "x\n"})
    proc = run_cli("analyze", str(case), "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert expected in err[0]
    assert "Traceback" not in proc.stderr


def test_missing_case_path(tmp_path: Path) -> None:
    proc = run_cli("analyze", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert "nope" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_case_without_logs_is_unattributed_and_says_why(tmp_path: Path) -> None:
    case = make_case(tmp_path / "c")
    proc = run_cli("analyze", str(case), "--json")
    assert proc.returncode == 0, proc.stderr
    result = AttributionResult.model_validate_json(proc.stdout)
    assert result.status == "unattributed"
    assert result.category is None
    missing = {n for c in result.coverage for n in c.nodes_missing}
    assert missing == {"node-a", "node-b"}


def test_unreadable_file_is_reported_and_rest_is_analysed(tmp_path: Path) -> None:
    case = make_case(
        tmp_path / "c", logs={"node-b/kern.log": XID79, "node-a/app.log": TIMEOUT_LINE}
    )
    os.symlink(tmp_path / "does-not-exist", case / "logs" / "node-a" / "syslog")
    (case / "logs" / "node-a" / "dmesg.gz").write_bytes(b"\x1f\x8b\x08garbage-not-gzip")
    proc = run_cli("analyze", str(case), "--json")
    assert proc.returncode == 0, proc.stderr
    result = AttributionResult.model_validate_json(proc.stdout)
    assert result.category == "gpu.lost"
    errors = " ".join(e for c in result.coverage for e in c.errors)
    assert "syslog" in errors and "dmesg.gz" in errors


def test_no_command_prints_help() -> None:
    proc = run_cli()
    assert proc.returncode == 2
    assert "analyze" in proc.stdout


def test_help_lists_examples() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    assert "attribution analyze samples/" in proc.stdout


@pytest.mark.parametrize(("command", "needle"), [("rules", "xid"), ("parsers", "nvrm")])
def test_catalog_commands_list_entries(capsys, command: str, needle: str) -> None:
    assert main([command]) == 0
    out = capsys.readouterr().out.lower()
    assert len(out.splitlines()) > 20  # a table: header, rule, one row per entry
    assert needle in out


@pytest.mark.parametrize("command", ["rules", "parsers"])
def test_catalog_markdown_is_the_committed_doc(capsys, command: str) -> None:
    """`attribution rules|parsers --markdown` (make docs) writes docs/<command>.md."""
    assert main([command, "--markdown"]) == 0
    doc = Path(__file__).resolve().parents[2] / "docs" / f"{command}.md"
    assert capsys.readouterr().out == doc.read_text(encoding="utf-8")


def test_rules_validates_another_rules_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("version: '1'\nrules:\n  - id: x\n    description: d\n")
    assert main(["rules", "--rules", str(bad)]) == 2
    assert "rule 'x' field" in capsys.readouterr().err


def test_parsers_anchors_prints_the_prefilter_literals(capsys) -> None:
    assert main(["parsers", "--anchors"]) == 0
    assert "NVRM: Xid" in capsys.readouterr().out.splitlines()


def test_run_direct_prints_summary_with_cause_time_and_stores(tmp_path: Path, capsys) -> None:
    make_case(tmp_path / "cases" / "one", logs={"node-b/syslog": XID79, "node-a/app.log": ""})
    db = tmp_path / "r.db"
    assert main(["run", str(tmp_path / "cases"), "--direct", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("testc/4242"))
    assert "gpu.lost" in row and "node-b" in row and "2026-11-02 10:10:00" in row
    assert "1 attributed" in out and db.is_file()


def test_run_bad_config_is_one_line_error(tmp_path: Path, capsys, monkeypatch) -> None:
    make_case(tmp_path / "cases" / "one")
    bad = tmp_path / "attribution.yaml"
    bad.write_text("sink: [not, a, mapping\n")
    monkeypatch.setenv("ATTRIBUTION_CONFIG", str(bad))
    assert main(["run", str(tmp_path / "cases")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attribution: error:") and "attribution.yaml" in err
    assert "\n" not in err


# -- issue 21 probes: contexts no analysis can hold are one line, exit 2 ----------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("end", "9999-12-31T23:59:59Z"), ("start", "0001-01-01T00:00:00Z")],
)
def test_a_date_outside_the_analysable_range_is_one_line_exit_2(
    tmp_path: Path, field: str, value: str
) -> None:
    """`end` in year 9999 was exit 3 `OverflowError: date value out of range` (the window's
    lag pushed it past datetime.max). Now the context is refused, naming file and field."""
    case = make_case(tmp_path / "far", {**CONTEXT, field: value}, {"node-a/syslog": XID79})
    r = run_cli("analyze", str(case))
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert "\n" not in err and str(case / "context.json") in err
    assert f"field '{field}' is invalid" in err and "Traceback" not in err


def test_a_context_nested_too_deeply_is_one_line_exit_2(tmp_path: Path) -> None:
    """A deeply nested JSON context was exit 3 `RecursionError`."""
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    case = make_case(tmp_path / "deep", deep)
    r = run_cli("analyze", str(case))
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert "\n" not in err and str(case / "context.json") in err
    assert "nested too deeply" in err


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("logs: [{kind: loki, url: 'loki:3100'}]",
         "clusters.atlas.logs[0] (loki): key 'url': url must be http(s)://"),
        ("logs: [{kind: loki, url: 'http://l', pasword_env: X}]",
         "clusters.atlas.logs[0] (loki): key 'pasword_env': Extra inputs are not permitted"),
        ("metrics: [{kind: prometheus, url: 'http://p'}, {kind: prom}]",
         "clusters.atlas.metrics[1]: unknown metrics kind 'prom'"),
        ("scheduler: {kind: slurm, transport: ssh}",
         "clusters.atlas.scheduler (slurm): key 'transport'"),
    ],
)  # fmt: skip
def test_a_bad_back_end_key_names_cluster_block_and_key(
    tmp_path: Path, block: str, expected: str
) -> None:
    """core/config.py keeps each `{kind: ...}` block as written; the connectors' registry
    validates it when the configuration is loaded: still one line, exit 2, before any work."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"clusters:\n  atlas:\n    {block}\n")
    r = run_cli("--config", str(bad), "discover", "atlas", "--since", "2026-11-01")
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert "\n" not in err and str(bad) in err and expected in err, err


def test_an_unreachable_results_database_is_one_line_and_exit_4(capsys) -> None:
    """`report` against a PostgreSQL that does not answer: exit 4 (a back-end could not
    answer), one line naming the database, no 'internal error', no password."""
    from attribution_dagster.cli.app import main

    code = main(["report", "--week", "2026-W45", "--db",
                 "postgresql+psycopg2://user:hunter2-secret@127.0.0.1:1/results"])
    out, err = capsys.readouterr()
    assert code == 4 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "results database" in err and "internal error" not in err
    assert "hunter2-secret" not in err
