"""Issue 16 target 4: the Dagster per-job path against the direct path on the same job.

    python bench/dagster_path.py [CASE] [--repeat 3] [--workers 1,all]

CASE defaults to the `today` profile (bench/profiles.py generates it under
/tmp/attr-bench/profiles/today-1). Both paths run in this process, after a warm-up of each:
`pipeline.analyze_case` (direct) and `local_run.run_cases_report` on an instance made
once beforehand (one partition through the per-job assets, as `make run` does on an instance
that exists). A new instance's one-off setup (schema, migrations) is printed apart.

Both paths run with the same analysis settings, once per `--workers` value (both default to
all cores for a case over 32 MiB; a configured `analysis.workers` would otherwise compare
that choice, not what going through Dagster costs). The runs alternate (direct, Dagster, direct, ...) so that both
see the same load on a shared machine; the best of `--repeat` is reported.
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


def _workers(text: str) -> list[int | None]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "all":
            out.append(None)
        elif part.isdigit() and int(part) > 0:
            out.append(int(part))
        else:
            raise argparse.ArgumentTypeError(f"{part!r}: expected a positive number or 'all'")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", nargs="?", type=Path, default=Path("/tmp/attr-bench/profiles/today-1"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--workers",
        type=_workers,
        default=[1, None],
        help="scanner processes for both paths, comma-separated; 'all' = all cores "
        "(default: 1,all)",
    )
    args = ap.parse_args(argv)
    if not (args.case / "context.json").is_file():
        print(f"dagster_path: no case at {args.case} (run bench/profiles.py --only today first)")
        return 2
    warnings.simplefilter("ignore")
    from attribution_dagster.cli.local_run import open_instance, run_cases_report
    from attribution_dagster.core.settings import AnalysisSettings
    from attribution_dagster.pipeline import analyze_case

    all_same = True
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cases"
        root.mkdir()
        # hard links: the same files, no copy of a 1.3 GB case
        subprocess.run(
            ["cp", "-al", str(args.case.resolve()), str(root / args.case.name)], check=True
        )
        t0 = time.perf_counter()
        inst = open_instance(Path(tmp) / "dagster")
        url = f"sqlite:///{tmp}/results.db"
        run_cases_report(root, url, instance=inst)
        setup = time.perf_counter() - t0
        print(f"case {args.case.name}: first run on a new instance {setup:.2f} s")
        try:
            for workers in args.workers:
                settings = AnalysisSettings(workers=workers)
                want = analyze_case(args.case, settings)  # warm-up of both
                report = run_cases_report(root, url, instance=inst, settings=settings)
                direct, dagster = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    want = analyze_case(args.case, settings)
                    direct.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    report = run_cases_report(root, url, instance=inst, settings=settings)
                    dagster.append(time.perf_counter() - t0)
                got = report.results[0] if report.results else None
                same = got is not None and (got.status, got.category, got.suspect_nodes) == (
                    want.status,
                    want.category,
                    want.suspect_nodes,
                )
                all_same = all_same and same
                d, g = min(direct), min(dagster)
                print(
                    f"  workers {workers or 'all'}: direct {d:.2f} s, Dagster per-job {g:.2f} s "
                    f"({g / d:.2f}x; target <= 1.3x; best of {args.repeat}), "
                    f"same verdict: {'yes' if same else 'NO'}"
                )
        finally:
            inst.dispose()
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
