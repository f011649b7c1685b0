"""Issue 16 target 4: the Dagster per-job path against the direct path on the same job.

    python bench/dagster_path.py [CASE] [--repeat 2]

CASE defaults to the `today` profile (bench/profiles.py generates it under
/tmp/attr-bench/profiles/today-1). Both paths run in this process, after a warm-up of each:
`pipeline.analyze_case` (direct) and `local_run.run_cases_report` on an instance made
once beforehand (one partition through the per-job assets, as `make run` does on an instance
that exists). A new instance's one-off setup (schema, migrations) is printed apart.
Prints seconds, the ratio and whether both gave the same verdict.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", nargs="?", type=Path, default=Path("/tmp/attr-bench/profiles/today-1"))
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    if not (args.case / "context.json").is_file():
        print(f"dagster_path: no case at {args.case} (run bench/profiles.py --only today first)")
        return 2
    warnings.simplefilter("ignore")
    from attribution_dagster.cli.local_run import open_instance, run_cases_report
    from attribution_dagster.pipeline import analyze_case

    direct = []
    for _ in range(args.repeat + 1):
        t0 = time.perf_counter()
        want = analyze_case(args.case)
        direct.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cases"
        root.mkdir()
        # hard links: the same files, no copy of a 1.3 GB case
        subprocess.run(["cp", "-al", str(args.case.resolve()), str(root / args.case.name)],
                       check=True)
        t0 = time.perf_counter()
        inst = open_instance(Path(tmp) / "dagster")
        url = f"sqlite:///{tmp}/results.db"
        report = run_cases_report(root, url, instance=inst)
        setup = time.perf_counter() - t0
        dagster = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = run_cases_report(root, url, instance=inst)
            dagster.append(time.perf_counter() - t0)
        inst.dispose()
    got = report.results[0] if report.results else None
    same = got is not None and (got.status, got.category, got.suspect_nodes) == (
        want.status, want.category, want.suspect_nodes)
    d, g = min(direct[1:]), min(dagster)
    print(f"case {args.case.name}: direct {d:.2f} s, Dagster per-job {g:.2f} s "
          f"({g / d:.2f}x; target <= 1.3x), first run on a new instance {setup:.2f} s, "
          f"same verdict: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
