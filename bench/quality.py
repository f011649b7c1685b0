"""Quality the way the field reports it, for every labelled set (issue 17 item 4).

For each set (the blind held-out cases tests/heldout/h*, the real-threads set
tests/heldout/real-threads/*, and samples/), every case is analysed twice:

  dagster   the per-job Dagster path (`attribution run`: local_run.run_cases_report, one
            partition per case, results read back from the SQL sink)
  direct    pipeline.analyze_case (what `attribution analyze` prints)

and compared with its expected.json. Reported per set and path:

  exact        failed, status, category and suspect_nodes (as a set) all as expected
  top-1 / top-3  suspect-node accuracy over the cases whose label names suspect nodes: the
               result's first (first three) suspect node(s) include one of the expected ones
  abstention   share of failed jobs answered `ambiguous` or `unattributed`
  false attr.  `attributed` with a category the label does not give (a wrong category, or a
               confident answer where the label abstains): a confident wrong answer
  precision / recall per category, over `attributed` answers vs `attributed` labels

    .venv/bin/python bench/quality.py [--write docs/quality.md] [--direct-only]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HELDOUT = ROOT / "tests" / "heldout"
SETS: dict[str, list[Path]] = {
    "heldout h*": sorted(p.parent for p in HELDOUT.glob("h*/expected.json")),
    "real-threads": sorted(p.parent for p in (HELDOUT / "real-threads").glob("*/expected.json")),
    "samples": sorted(p.parent for p in (ROOT / "samples").glob("*/expected.json")),
}


@dataclass
class Got:
    failed: bool | None = None
    status: str = "error"
    category: str | None = None
    suspects: list[str] = field(default_factory=list)


@dataclass
class Scores:
    n: int = 0
    exact: int = 0
    located: int = 0  # cases whose label names suspect nodes
    top1: int = 0
    top3: int = 0
    failed_jobs: int = 0
    abstained: int = 0
    attributed: int = 0
    false_attributed: int = 0
    errors: int = 0
    tp: Counter[str] = field(default_factory=Counter)
    predicted: Counter[str] = field(default_factory=Counter)
    labelled: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)

    def add(self, name: str, exp: dict[str, Any], got: Got) -> None:
        self.n += 1
        want_sus = set(exp["suspect_nodes"])
        ok = (got.failed, got.status, got.category, set(got.suspects)) == (
            exp["failed"],
            exp["status"],
            exp["category"],
            want_sus,
        )
        self.exact += ok
        if not ok:
            self.misses.append(name)
        if got.status == "error":
            self.errors += 1
        if want_sus:
            self.located += 1
            self.top1 += bool(got.suspects[:1] and got.suspects[0] in want_sus)
            self.top3 += bool(set(got.suspects[:3]) & want_sus)
        if exp["failed"]:
            self.failed_jobs += 1
            self.abstained += got.status in ("ambiguous", "unattributed")
        if got.status == "attributed":
            self.attributed += 1
            self.predicted[got.category or "?"] += 1
            if exp["status"] != "attributed" or got.category != exp["category"]:
                self.false_attributed += 1
            elif got.category:
                self.tp[got.category] += 1
        if exp["status"] == "attributed" and exp["category"]:
            self.labelled[exp["category"]] += 1


def _got(res: Any) -> Got:
    return Got(res.failed, res.status, res.category, list(res.suspect_nodes))


def direct(cases: list[Path]) -> dict[Path, Got]:
    from attribution_dagster.pipeline import analyze_case

    out: dict[Path, Got] = {}
    for case in cases:
        try:
            out[case] = _got(analyze_case(case))
        except Exception:  # noqa: BLE001 - a crash is a miss, counted as an error
            out[case] = Got()
    return out


def dagster(cases: list[Path]) -> dict[Path, Got]:
    """Every case through the per-job Dagster path, one run per partition, as `attribution run
    --no-batch` does; results are read back from the SQLite sink the assets wrote."""
    from attribution_dagster.cli.local_run import discover_cases, run_cases_report

    out: dict[Path, Got] = {case: Got() for case in cases}
    with tempfile.TemporaryDirectory(prefix="quality-") as tmp:
        root = Path(tmp) / "cases"
        root.mkdir()
        copies: dict[Path, Path] = {}
        for i, case in enumerate(cases):  # only this set's cases, each once
            copy = root / f"{i:04d}-{case.name}"
            shutil.copytree(case, copy)
            copies[copy.resolve()] = case
        found, _skipped = discover_cases(root)
        by_job = {
            (ctx.cluster or "", ctx.job_id): copies[case_dir.resolve()]
            for case_dir, ctx in found.values()
        }
        report = run_cases_report(root, f"sqlite:///{tmp}/results.db", batch=False)
        for res in report.results:
            case_dir = by_job.get((res.cluster or "", res.job_id))
            if case_dir is not None:
                out[case_dir] = _got(res)
    return out


def score(cases: list[Path], got: dict[Path, Got]) -> Scores:
    s = Scores()
    for case in cases:
        exp = json.loads((case / "expected.json").read_text())
        s.add(case.name, exp, got.get(case.resolve(), got.get(case, Got())))
    return s


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}% ({a}/{b})" if b else "-"


def markdown(results: dict[str, dict[str, Scores]], seconds: dict[str, float]) -> str:
    lines = [
        "# Quality",
        "",
        "Generated by `make quality` (`bench/quality.py --write docs/quality.md`); `make bench`",
        "prints the same tables. Every labelled case is analysed through the per-job Dagster",
        "path (`attribution run`: one partition per case, results read back from the SQL sink)",
        "and directly (`pipeline.analyze_case`, as `attribution analyze`), and compared with its",
        "`expected.json`.",
        "",
        "- **exact**: failed, status, category and suspect nodes (as a set) all as labelled.",
        "- **top-1 / top-3**: over the cases whose label names suspect nodes, the result's first",
        "  (first three) suspect node(s) include a labelled one.",
        "- **abstention**: share of failed jobs answered `ambiguous` or `unattributed`.",
        "- **false attributed**: `attributed` with a category the label does not give (a wrong",
        "  category, or a confident answer where the label abstains), over all `attributed`",
        "  answers. A confident wrong answer costs more than an honest abstention.",
        "- **precision / recall** per category: over `attributed` answers and `attributed`",
        "  labels of that category.",
        "",
        "| set | path | cases | exact | top-1 node | top-3 node | abstention | false attributed "
        "| errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, by_path in results.items():
        for path, s in by_path.items():
            lines.append(
                f"| {name} | {path} | {s.n} | {_pct(s.exact, s.n)} | {_pct(s.top1, s.located)} | "
                f"{_pct(s.top3, s.located)} | {_pct(s.abstained, s.failed_jobs)} | "
                f"{_pct(s.false_attributed, s.attributed)} | {s.errors} |"
            )
    lines.append("")
    for name, by_path in results.items():
        lines += [f"## {name}: precision and recall per category", ""]
        paths = list(by_path)
        head = "| category | " + " | ".join(f"{p} precision | {p} recall" for p in paths) + " |"
        lines += [head, "| --- |" + " --- | --- |" * len(paths)]
        cats = sorted(
            set().union(*(set(s.labelled) | set(s.predicted) for s in by_path.values()))
        )
        for cat in cats:
            cells = []
            for p in paths:
                s = by_path[p]
                cells += [_pct(s.tp[cat], s.predicted[cat]), _pct(s.tp[cat], s.labelled[cat])]
            lines.append(f"| `{cat}` | " + " | ".join(cells) + " |")
        lines.append("")
        misses = {p: s.misses for p, s in by_path.items()}
        for p, m in misses.items():
            lines.append(f"Not exact ({p}): {', '.join(m) if m else 'none'}.")
            lines.append("")
    total = ", ".join(f"{p} {t:.0f} s" for p, t in seconds.items())
    lines += [f"Time for all sets: {total}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/quality.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, help="also write the Markdown report to this file")
    ap.add_argument("--direct-only", action="store_true", help="skip the Dagster path")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    paths = {"direct": direct} if args.direct_only else {"dagster": dagster, "direct": direct}
    results: dict[str, dict[str, Scores]] = {}
    seconds: dict[str, float] = dict.fromkeys(paths, 0.0)
    for name, cases in SETS.items():
        results[name] = {}
        for pname, fn in paths.items():
            t0 = time.perf_counter()
            got = fn(cases)
            seconds[pname] += time.perf_counter() - t0
            results[name][pname] = score(cases, got)
    text = markdown(results, seconds)
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
