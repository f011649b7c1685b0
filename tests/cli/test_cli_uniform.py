"""The CLI behaves the same everywhere (issue 15 item 6, issue 19's job not found):

- `--config FILE` is accepted before the command and after it, by every subcommand;
- a bad option value is exit 2 and one line on stderr (never a validation dump, exit 3);
- `report --cluster X` with X not configured is exit 2 naming the configured clusters;
- `analyze CLUSTER/JOB` of an unknown job is exit 2, "job J not found in CLUSTER".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attribution_dagster.cli.app import build_parser, main

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
JOB = json.loads((SAMPLES / "disk-full" / "context.json").read_text())["job_id"]

# one invocation of every subcommand (positional arguments included)
COMMANDS = {
    "analyze": ["analyze", "lab/1"],
    "run": ["run", "samples"],
    "discover": ["discover", "lab", "--since", "2026-11-01"],
    "export": ["export", "lab/1", "/tmp/out"],
    "backfill": ["backfill", "lab", "--since", "2026-11-01", "--until", "2026-11-02"],
    "report": ["report", "--week", "2026-W46"],
    "rules": ["rules"],
    "parsers": ["parsers"],
}


def test_every_subcommand_is_listed_here():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_config_is_accepted_before_and_after_every_subcommand(name):
    argv = COMMANDS[name]
    p = build_parser()
    assert p.parse_args(["--config", "a.yaml", *argv]).config == Path("a.yaml")
    assert p.parse_args([*argv, "--config", "b.yaml"]).config == Path("b.yaml")
    assert p.parse_args(argv).config is None


def write_config(tmp_path: Path, clusters: dict[str, str]) -> Path:
    cfg = tmp_path / "attribution.yaml"
    lines = ["clusters:"] + [
        f"  {n}:\n    scheduler: {{kind: static, path: {p}}}" for n, p in clusters.items()
    ] + ["sink:", f"  url: sqlite:///{tmp_path}/results.db",
         "fleet:", f"  reports_dir: {tmp_path}/reports"]
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def test_config_after_the_command_is_used(tmp_path, capsys, monkeypatch):
    """The same job through the configured cluster, --config on either side."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # no ./attribution.yaml to fall back on
    monkeypatch.delenv("ATTRIBUTION_CONFIG", raising=False)
    cfg = write_config(tmp_path, {"lab": str(SAMPLES)})
    outs = []
    for argv in (["--config", str(cfg), "analyze", f"lab/{JOB}", "--json"],
                 ["analyze", f"lab/{JOB}", "--json", "--config", str(cfg)]):
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        out.pop("analyzed_at")
        outs.append(out)
    assert outs[0] == outs[1] and outs[0]["category"] == "storage"
    # without it, lab is unknown
    assert main(["analyze", f"lab/{JOB}"]) == 2
    assert "not a case directory" in capsys.readouterr().err


BAD_VALUES = [
    (["analyze", "samples/disk-full", "--lead", "-5"], "argument --lead: must be 0 or more"),
    (["analyze", "samples/disk-full", "--lag", "soon"], "argument --lag: expected seconds"),
    (["analyze", "samples/disk-full", "--skew", "nan"], "argument --skew: must be 0 or more"),
    (["analyze", "samples/disk-full", "--workers", "0"], "argument --workers: must be 1 or more"),
    (["run", "samples", "--direct", "--lead", "-5"], "argument --lead: must be 0 or more"),
    (["export", "lab/1", "/tmp/x", "--lag", "-1"], "argument --lag: must be 0 or more"),
    (["discover", "lab", "--since", "2026-11-01", "--limit", "-3"],
     "argument --limit: must be 1 or more"),
    (["backfill", "lab", "--since", "2026-11-01", "--until", "2026-11-02", "--workers", "0"],
     "argument --workers: must be 1 or more"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_VALUES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_bad_option_value_is_exit_2_and_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"attribution {argv[0]}: error: {message}")
    assert "validation error" not in captured.err.lower()


def test_bad_option_value_in_a_real_process():
    """`attribution analyze ... --lead -5`: exit 2, one line, no traceback or pydantic dump."""
    p = subprocess.run(
        [sys.executable, "-m", "attribution_dagster.cli", "analyze",
         str(SAMPLES / "disk-full"), "--lead", "-5"],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr == ("attribution analyze: error: argument --lead: must be 0 or more "
                        "seconds, got -5 (see attribution analyze --help)\n")


def test_report_for_an_unconfigured_cluster_names_the_configured_ones(tmp_path, capsys):
    cfg = write_config(tmp_path, {"lab": str(SAMPLES), "atlas": str(SAMPLES)})
    out = tmp_path / "report"
    rc = main(["report", "--week", "2026-W46", "--cluster", "nope", "--config", str(cfg),
               "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.out == ""  # no empty report printed
    assert captured.err.splitlines() == [
        "attribution: error: cluster 'nope' is not configured (configured: atlas, lab); "
        "leave out --cluster for the whole fleet"
    ]
    assert not out.exists()
    # a configured one still makes its report
    assert main(["report", "--week", "2026-W46", "--cluster", "lab", "--config", str(cfg),
                 "--out", str(out)]) == 0
    assert "Weekly failure report: lab, 2026-W46" in capsys.readouterr().out
    assert (out / "report.html").is_file()


def test_report_cluster_without_any_configured_cluster(tmp_path, capsys):
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(f"sink:\n  url: sqlite:///{tmp_path}/r.db\n")
    rc = main(["--config", str(cfg), "report", "--week", "2026-W46", "--cluster", "x",
               "--out", str(tmp_path / "rep")])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert "cluster 'x' is not configured (configured: none)" in captured.err
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("command", ["analyze", "export"])
def test_unknown_job_is_exit_2_and_named(tmp_path, capsys, command):
    cfg = write_config(tmp_path, {"lab": str(SAMPLES)})
    argv = [command, "lab/999999", *([str(tmp_path / "case")] if command == "export" else []),
            "--config", str(cfg)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"attribution: error: job 999999 not found in lab (under {SAMPLES})"
    ]
    assert not (tmp_path / "case").exists()
