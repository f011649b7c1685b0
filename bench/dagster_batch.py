"""Attribute N jobs through Dagster: one run per job versus batched runs, against the
same work without Dagster.

    python bench/dagster_batch.py --jobs 1000 [--mode both|single|batch] [--ephemeral]

Replicates the cases under samples/ (or a given --cases dir) under new job ids into a
temporary directory. First the baseline, in this process: the engine on every case and
the results written to a SQLite results database in runs of `--per-run`, which is the
work the assets do minus Dagster. Then `local_run.run_cases_report` with `batch=True`
(up to `--per-run` partitions per run) and/or `batch=False` (one in-process run per job,
the shape of the sensor path), each on a new persistent SQLite Dagster instance in a temp
dir (as `make run` makes it) and a fresh results database. Prints one line per mode with
Dagster's share per job (mode minus baseline) and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def snapshot(cases_root: Path, out: Path, attempts: int = 5) -> list[Path]:
    """Copy the readable cases once (the samples may be regenerated while we run)."""
    from attribution_dagster.cli.local_run import discover_cases

    for attempt in range(attempts):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        cases, _ = discover_cases(cases_root)
        try:
            copied = []
            for i, (case_dir, _ctx) in enumerate(sorted(cases.values(), key=lambda c: str(c[0]))):
                dst = out / f"{i:03d}-{case_dir.name}"
                shutil.copytree(case_dir, dst)
                copied.append(dst)
            return copied
        except (shutil.Error, OSError):
            time.sleep(2 * (attempt + 1))
    raise SystemExit(f"could not copy the cases under {cases_root}")


def replicate(cases_root: Path, out: Path, n: int) -> int:
    sources = snapshot(cases_root, out.parent / "snapshot")
    if not sources:
        raise SystemExit(f"no readable cases under {cases_root}")
    for i in range(n):
        src = sources[i % len(sources)]
        dst = out / f"{src.name}-r{i:05d}"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("context.json"))
        ctx = json.loads((src / "context.json").read_text(encoding="utf-8"))
        ctx["job_id"] = f"{ctx['job_id']}-r{i:05d}"
        (dst / "context.json").write_text(json.dumps(ctx), encoding="utf-8")
    return len(sources)


def measure_direct(cases: Path, work: Path, per_run: int) -> dict:
    """The assets' work without Dagster: engine per case, results to the sink per run."""
    from attribution_dagster import pipeline
    from attribution_dagster.connectors.static.client import StaticContextClient
    from attribution_dagster.core.settings import AnalysisSettings
    from attribution_dagster.sinks.sql import SqlSink

    sink = SqlSink(f"sqlite:///{work}/results-direct.db")
    pipeline.engine(), pipeline.catalog()  # loaded once per process on either path
    t0 = time.perf_counter()
    results, contexts = [], []
    settings = AnalysisSettings()
    for case in StaticContextClient().list_cases(cases):
        ctx = pipeline.load_context(case)
        contexts.append(ctx)
        results.append(pipeline.analyze_context(ctx, settings, case=case))
        if len(results) == per_run:
            sink.write(results, contexts=contexts)
            results, contexts = [], []
    sink.write(results, contexts=contexts)
    seconds = time.perf_counter() - t0
    return {"mode": "direct", "jobs": sink.count(), "seconds": round(seconds, 2)}


def measure(cases: Path, work: Path, batch: bool, per_run: int, ephemeral: bool) -> dict:
    from attribution_dagster.cli.local_run import run_cases_report

    tag = "batch" if batch else "single"
    db = work / f"results-{tag}.db"
    instance_dir = None if ephemeral else work / f"dagster-home-{tag}"
    t0 = time.perf_counter()
    report = run_cases_report(
        cases,
        f"sqlite:///{db}",
        instance_dir=instance_dir,
        batch=batch,
        max_partitions_per_run=per_run,
    )
    seconds = time.perf_counter() - t0
    return {
        "mode": tag,
        "jobs": len(report.partitions),
        "results": len(report.results),
        "failed": len(report.failed),
        "runs": report.runs,
        "seconds": round(seconds, 2),
        "jobs_per_second": round(len(report.results) / seconds, 2) if seconds else None,
        "instance": "ephemeral" if ephemeral else "persistent sqlite",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--cases", type=Path, default=REPO / "samples")
    ap.add_argument("--mode", choices=["both", "single", "batch"], default="both")
    ap.add_argument("--per-run", type=int, default=100)
    ap.add_argument("--ephemeral", action="store_true", help="in-memory Dagster instance")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="dagster-batch-") as tmp:
        work = Path(tmp)
        cases = work / "cases"
        cases.mkdir()
        distinct = replicate(args.cases, cases, args.jobs)
        print(f"{args.jobs} jobs from {distinct} distinct cases under {args.cases}", flush=True)
        base = measure_direct(cases, work, args.per_run)
        per_job = base["seconds"] / max(base["jobs"], 1) * 1000
        print(f"direct: {base['jobs']} jobs in {base['seconds']} s ({per_job:.1f} ms/job: "
              "engine and results database, no Dagster)", flush=True)
        out = [base]
        modes = ["batch", "single"] if args.mode == "both" else [args.mode]
        for mode in modes:
            row = measure(cases, work, mode == "batch", args.per_run, args.ephemeral)
            n = max(row["jobs"], 1)
            row["dagster_ms_per_job"] = round((row["seconds"] - base["seconds"]) / n * 1000, 1)
            row["ratio_to_direct"] = round(row["seconds"] / base["seconds"], 2)
            out.append(row)
            print(
                f"{row['mode']:>6}: {row['results']}/{row['jobs']} jobs in {row['seconds']} s "
                f"({row['runs']} runs, {row['jobs_per_second']} jobs/s, {row['instance']}); "
                f"Dagster's share {row['dagster_ms_per_job']} ms/job against the direct "
                f"{per_job:.1f}, ratio {row['ratio_to_direct']}",
                flush=True,
            )
        print(json.dumps(out))


if __name__ == "__main__":
    main()
