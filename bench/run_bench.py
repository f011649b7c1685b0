"""Benchmark: the analysis of a large case against a `grep` floor (design/PERF-NOTES.md).

Generates the case if missing (bench/generate.py), then times, each as a child process with
its own wall time and peak RSS (os.wait4):

  grep      grep -r -c -E '<the catalog's anchor literals>' <case>/logs > file
  scanner   the local-files connector alone (prefilter + timestamps), same anchors
  analyze   `attribution analyze <case> --json` (the whole pipeline)

Peak RSS is the largest single process of the run (the scanner's pool workers included,
as wait4 reports the maximum over the child and its waited-for descendants).
Targets: analyze <= 3x grep, peak RSS < 500 MB, and the right category and node.

    .venv/bin/python bench/run_bench.py [--case DIR] [--nodes 64] [--lines 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate import generate  # noqa: E402

_ERE_SPECIAL = set(".[]()*+?{}|^$\\")
# children import this checkout, whatever the caller's working directory
_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}
# timed as installed code runs: with PYTHONDONTWRITEBYTECODE set (some shells and CI images
# set it), every changed module would be compiled again in every timed run (0.06-0.1 s)
_ENV.pop("PYTHONDONTWRITEBYTECODE", None)

SCANNER_ONLY = """
import sys, time
from pathlib import Path
from attribution_dagster.connectors.files.case import LocalFilesClient
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.pipeline import catalog, load_context
case = Path(sys.argv[1])
ctx = load_context(case)
window = AnalysisSettings().window(ctx)
recs, cov = LocalFilesClient().fetch_logs(case, ctx, catalog().anchors(), window).pair()
print(cov.lines, cov.bytes, len(recs), cov.out_of_window)
"""


def ere_escape(literal: str) -> str:
    return "".join("\\" + c if c in _ERE_SPECIAL else c for c in literal)


def anchor_literals() -> list[str]:
    from attribution_dagster.pipeline import catalog

    return sorted({a.literal for a in catalog().anchors()})


def run(cmd: list[str], stdout_path: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one child process."""
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, cwd=ROOT, env=_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):  # grep exits 1 when nothing matched
        print(f"  {cmd[0]} exited {proc.returncode}: {err.strip()[-400:]}", file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def best_of(n: int, cmd: list[str], out: Path) -> tuple[float, float, int]:
    runs = [run(cmd, out) for _ in range(n)]
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


HELDOUT = ROOT / "tests" / "heldout"


def heldout_verdict_ok(expected: dict, result) -> bool:
    """The held-out check of tests/test_heldout.py: failed, status, category, suspect nodes,
    expected candidate categories among the candidates, root-cause kinds in the chain."""
    got_candidates = {c.category for c in result.candidates}
    roots = {o.kind for o in result.symptom_chain if o.role == "root_cause"}
    return (
        result.failed == expected["failed"]
        and result.status == expected["status"]
        and result.category == expected["category"]
        and sorted(result.suspect_nodes) == sorted(expected["suspect_nodes"])
        and set(expected.get("candidate_categories", [])) <= got_candidates
        and set(expected.get("root_cause_kinds", [])) <= roots
    )


def heldout_scores() -> dict[str, tuple[int, int, float]]:
    """path -> (right, cases, seconds) over tests/heldout: the engine directly, and the
    per-job Dagster assets (`attribution run`'s path) on a temporary SQLite instance."""
    import tempfile

    from attribution_dagster.cli.local_run import run_cases_report
    from attribution_dagster.core.settings import AnalysisSettings
    from attribution_dagster.pipeline import analyze_case

    expected = {
        p.parent: json.loads(p.read_text())
        for p in sorted(HELDOUT.rglob("expected.json"))
        if (p.parent / "context.json").is_file()
    }
    out: dict[str, tuple[int, int, float]] = {}
    t0 = time.perf_counter()
    direct = {case: analyze_case(case, AnalysisSettings(workers=1)) for case in expected}
    right = sum(heldout_verdict_ok(expected[c], r) for c, r in direct.items())
    out["direct"] = (right, len(expected), time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="bench-heldout-") as tmp:
        t0 = time.perf_counter()
        rep = run_cases_report(
            HELDOUT, f"sqlite:///{tmp}/results.db", instance_dir=Path(tmp) / "dagster"
        )
        by_id = {(r.cluster or "", r.job_id): r for r in rep.results}
        right = 0
        for case, exp in expected.items():
            ctx = json.loads((case / "context.json").read_text())
            r = by_id.get((ctx.get("cluster") or "", ctx["job_id"]))
            right += r is not None and heldout_verdict_ok(exp, r)
        out["dagster"] = (right, len(expected), time.perf_counter() - t0)
    return out


def print_heldout_scores() -> bool:
    scores = heldout_scores()
    print("held-out    path      right / cases   wall s")
    for name in ("direct", "dagster"):
        right, n, secs = scores[name]
        print(f"            {name:8}  {right:5} / {n:<5}  {secs:7.1f}")
    return scores["direct"][0] == scores["dagster"][0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="analysis vs grep on a generated case")
    ap.add_argument("--case", type=Path, default=Path("/tmp/attr-bench/case"))
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--lines", type=int, default=200_000, help="lines per node")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best wall)")
    ap.add_argument("--regenerate", action="store_true")
    args = ap.parse_args(argv)

    case: Path = args.case
    if args.regenerate or not (case / "context.json").exists():
        t0 = time.perf_counter()
        generate(case, args.nodes, args.lines)
        print(f"generated {case} in {time.perf_counter() - t0:.1f}s")
    expected = json.loads((case / "context.json").read_text()).get("expected", {})
    work = case.parent
    literals = anchor_literals()
    pattern = "|".join(ere_escape(lit) for lit in literals)
    py = sys.executable
    cli = Path(py).with_name("attribution")
    cli_works = (
        cli.exists()
        and subprocess.run([str(cli), "--help"], capture_output=True, env=_ENV).returncode == 0
    )
    analyze_cmd = (
        [str(cli), "analyze", str(case), "--json"]
        if cli_works
        else [
            py,
            "-c",
            "import sys; from attribution_dagster.pipeline import analyze_case; "
            "print(analyze_case(sys.argv[1]).contract_json())",
            str(case),
        ]
    )

    # one pass to warm the page cache (all measurements assume a warm cache)
    run(["grep", "-r", "-c", "-F", "zzzz-warm-cache", str(case / "logs")], work / "warm.out")
    grep = best_of(
        args.repeat, ["grep", "-r", "-c", "-E", pattern, str(case / "logs")], work / "grep.out"
    )
    scanner = best_of(args.repeat, [py, "-c", SCANNER_ONLY, str(case)], work / "scanner.out")
    analyze = best_of(args.repeat, analyze_cmd, work / "analyze.json")

    lines, nbytes, records, oow = (int(x) for x in (work / "scanner.out").read_text().split())
    try:
        result = json.loads((work / "analyze.json").read_text())
    except json.JSONDecodeError:
        result = {}
    category, suspects = result.get("category"), result.get("suspect_nodes", [])
    ok_cat = category == expected.get("category", "gpu.lost")
    ok_node = expected.get("node") in suspects

    print(f"case        {case}  ({args.nodes} nodes x {args.lines} lines requested)")
    print(f"input       {lines:,} lines, {nbytes / 1e6:,.0f} MB, {len(literals)} anchor literals")
    print(f"scanner     {records} records kept, {oow} hits out of window")
    print(f"analyze via {'attribution analyze --json' if cli_works else 'python -c analyze_case'}")
    print(f"{'':10}  {'wall s':>7}  {'lines/s':>12}  {'vs grep':>7}  {'peak RSS MB':>11}")
    for name, (wall, rss, _) in (("grep", grep), ("scanner", scanner), ("analyze", analyze)):
        print(f"{name:10}  {wall:7.2f}  {lines / wall:12,.0f}  {wall / grep[0]:6.2f}x  {rss:11.0f}")
    print(
        f"result      category={category} suspect_nodes={suspects}  "
        f"(expected {expected.get('category')} on {expected.get('node')})"
    )
    ratio, rss = analyze[0] / grep[0], analyze[1]
    verdict = {
        "ratio<=3x": ratio <= 3.0,
        "rss<500MB": rss < 500,
        "category": ok_cat,
        "node": ok_node,
    }
    verdict["heldout:dagster=direct"] = print_heldout_scores()
    print("targets     " + "  ".join(f"{k}:{'ok' if v else 'MISSED'}" for k, v in verdict.items()))
    return 0 if all(verdict.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
