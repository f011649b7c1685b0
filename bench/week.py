"""`make bench-week`: a synthetic week of small jobs through the fleet path, against the engine.

1. generate a week of N jobs (bench/week_data.py) into /tmp, unless it is already there;
2. the window path THROUGH DAGSTER: finished_jobs -> window_attributions, one run per
   daily window, on a persistent SQLite Dagster instance, results into a fresh SQLite DB;
3. the same jobs through the engine DIRECTLY, in this process, one after the other, results
   into another fresh SQLite DB;
4. the weekly report over the Dagster results: were the planted offenders found?
5. the per-job path (`local_run`: the `jobs` partitions, 100 per run) over 1,000 of the jobs.

The last line is `bench-week: <N> jobs, dagster <S> s, direct <D> s, ratio <S/D>`.

    python bench/week.py [--jobs 10000] [--workers 2] [--per-job 1000] [--out /tmp/attr-bench-week]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import week_data  # noqa: E402


def rss_mb() -> float:
    """Peak resident memory of this process so far (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def ensure_data(out: Path, jobs: int, seed: int) -> Path:
    path = out / "jobs.jsonl"
    stamp = out / "stamp.json"
    want = {"jobs": jobs, "seed": seed, "version": 2}
    if path.exists() and stamp.exists() and json.loads(stamp.read_text()) == want:
        print(f"data: reusing {path} ({jobs} jobs)")
        return path
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    week_data.generate(out, jobs, seed)
    stamp.write_text(json.dumps(want))
    print(f"data: generated {jobs} jobs into {out} in {time.perf_counter() - t:.1f} s")
    return path


def write_config(out: Path, jobs_path: Path, workers: int) -> Path:
    cfg = out / "attribution.yaml"
    cfg.write_text(
        f"clusters:\n  {week_data.CLUSTER}:\n"
        f"    scheduler: {{kind: static, path: {jobs_path}}}\n"
        f"sink:\n  url: sqlite:///{out}/dagster-results.db\n"
        f"fleet:\n  window: daily\n  start: \"2026-10-01\"\n  workers: {workers}\n"
        f"  reports_dir: {out}/reports\n",
        encoding="utf-8",
    )
    return cfg


def run_dagster(out: Path, cfg_path: Path) -> tuple[float, list[float]]:
    """Every daily window of the week through Dagster (persistent instance); wall seconds."""
    from dagster import MultiPartitionKey, materialize

    from attribution_dagster.assets.per_window import (
        CLUSTER_DIM,
        WINDOW_DIM,
        build_window_assets,
    )
    from attribution_dagster.cli.local_run import QUIET_RUN_CONFIG, open_instance
    from attribution_dagster.core.config import load_config
    from attribution_dagster.definitions import build_resources

    for p in (out / "dagster-results.db", out / "dagster"):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    config = load_config(cfg_path)
    assets = build_window_assets(config)
    res = build_resources(config)
    instance = open_instance(out / "dagster")
    days = [(week_data.WEEK_START + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(7)]
    rss = []
    laps = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for day in days:
            r = materialize(
                assets,
                instance=instance,
                partition_key=MultiPartitionKey({CLUSTER_DIM: week_data.CLUSTER, WINDOW_DIM: day}),
                resources=res,
                run_config=QUIET_RUN_CONFIG,
                raise_on_error=False,
            )
            if not r.success:
                why = next((str(e.step_failure_data.error.message).strip()
                            for e in r.all_events if e.is_step_failure), "run failed")
                raise SystemExit(f"bench-week: window {day} failed: {why[:500]}")
            rss.append(rss_mb())
            laps.append(time.perf_counter() - t0 - sum(laps))
    print("dagster: seconds per window run: " + ", ".join(f"{x:.1f}" for x in laps))
    seconds = time.perf_counter() - t0
    instance.dispose()
    import sqlite3

    with sqlite3.connect(out / "dagster-results.db") as db:
        work = db.execute("select sum(seconds) from attribution_windows").fetchone()[0] or 0.0
    print(f"dagster: inside the window assets {work:.1f} s (listing excluded), Dagster's own "
          f"share {seconds - work:.1f} s = {(seconds - work) / len(days):.1f} s per window run")
    return seconds, rss


def run_direct(out: Path, jobs_path: Path) -> float:
    """The same jobs, engine called directly in this process, results written in chunks."""
    from attribution_dagster import pipeline
    from attribution_dagster.core.context import ExecutionContext
    from attribution_dagster.core.settings import AnalysisSettings
    from attribution_dagster.sinks.sql import SqlSink

    db = out / "direct-results.db"
    db.unlink(missing_ok=True)
    sink = SqlSink(f"sqlite:///{db}")
    settings = AnalysisSettings(workers=1)
    pipeline.engine()
    pipeline.catalog()
    t0 = time.perf_counter()
    batch, contexts = [], []
    with jobs_path.open(encoding="utf-8") as fh:
        for line in fh:
            ctx = ExecutionContext.model_validate_json(line)
            batch.append(pipeline.analyze_context(ctx, settings))
            contexts.append(ctx)
            if len(batch) >= 500:
                sink.write(batch, contexts=contexts)
                batch, contexts = [], []
    sink.write(batch, contexts=contexts)
    return time.perf_counter() - t0


def run_per_job(out: Path, n: int) -> tuple[int, float]:
    """The per-job path over the first shard of cases (1,000 jobs), 100 partitions per run."""
    from attribution_dagster.cli.local_run import run_cases_report

    root = out / "cases" / "00"
    db = out / "per-job-results.db"
    db.unlink(missing_ok=True)
    shutil.rmtree(out / "dagster-per-job", ignore_errors=True)
    cases = sorted(p for p in root.iterdir() if p.is_dir())[:n]
    sub = out / "per-job-cases"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir()
    for c in cases:
        os.symlink(c, sub / c.name)
    from attribution_dagster.connectors.static.client import StaticContextClient

    if len(StaticContextClient().list_cases(sub)) != len(cases):
        # rglob does not follow symlinked directories on every Python: copy instead
        shutil.rmtree(sub)
        sub.mkdir()
        for c in cases:
            shutil.copytree(c, sub / c.name)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = run_cases_report(sub, f"sqlite:///{db}", instance_dir=out / "dagster-per-job")
    return len(rep.results), time.perf_counter() - t0


def check_report(out: Path) -> tuple[list[str], list[str]]:
    from attribution_dagster.reports import weekly as report

    rep = report.build_report(f"sqlite:///{out}/dagster-results.db", "2026-W46",
                              week_data.CLUSTER)
    paths = report.write_report(rep, out / "report")
    found = {(o.kind, o.name): len(o.jobs) for o in rep.offenders}
    node, pci, n_gpu = week_data.PLANTED_GPU
    pnode, port, n_port = week_data.PLANTED_PORT
    sw_nodes, sw_port, n_sw = week_data.PLANTED_SWITCH
    planted = {
        ("gpu", f"{node}/{pci}"): n_gpu,
        ("port", f"{pnode}/{port}"): n_port,
        ("switch", f"{sw_port} @ {','.join(sw_nodes)}"): n_sw,
    }
    ok, missing = [], []
    for key, n in planted.items():
        (ok if found.get(key, 0) >= n else missing).append(f"{key[0]} {key[1]} ({n} jobs)")
    print(f"report: {rep.this.jobs} jobs, {rep.this.failed} failed, "
          f"{rep.this.gpu_hours_lost_total:,.0f} GPU-hours lost, {len(rep.offenders)} repeat "
          f"offenders; {paths['html']}")
    return ok, missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 1),
                    help="processes per window for the Dagster path (default: cores - 1, "
                    "as fleet.workers)")
    ap.add_argument("--per-job", type=int, default=1000, help="jobs for the per-job figure")
    ap.add_argument("--out", type=Path, default=Path("/tmp/attr-bench-week"))
    ap.add_argument("--per-job-only", action="store_true",
                    help="only the per-job figure (after a change to the per-job assets)")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs_path = ensure_data(out, args.jobs, args.seed)
    cfg = write_config(out, jobs_path, args.workers)
    if args.per_job_only:
        n, s = run_per_job(out, args.per_job)
        print(f"per-job path: {n} jobs in {s:.1f} s ({s / max(n, 1) * 1000:.0f} ms/job)")
        return 0

    dagster_s, rss = run_dagster(out, cfg)
    print(f"dagster: {args.jobs} jobs in 7 daily window runs, {dagster_s:.1f} s "
          f"({dagster_s / args.jobs * 1000:.1f} ms/job, {args.workers} workers); peak RSS of "
          f"the run process after each window (MB): {', '.join(f'{r:.0f}' for r in rss)}; "
          f"pool workers peak {children_rss_mb():.0f} MB")
    direct_s = run_direct(out, jobs_path)
    print(f"direct: {args.jobs} jobs in {direct_s:.1f} s ({direct_s / args.jobs * 1000:.1f} "
          f"ms/job, 1 process); peak RSS {rss_mb():.0f} MB")
    ok, missing = check_report(out)
    print(f"planted offenders found: {len(ok)}/{len(ok) + len(missing)}"
          + (f"; MISSING: {', '.join(missing)}" if missing else f" ({'; '.join(ok)})"))
    if args.per_job:
        n, s = run_per_job(out, args.per_job)
        ms, direct_ms = s / max(n, 1) * 1000, direct_s / args.jobs * 1000
        print(f"per-job path: {n} jobs in {s:.1f} s ({ms:.0f} ms/job, 100 partitions per run, "
              f"persistent SQLite instance): Dagster's share {ms - direct_ms:.1f} ms/job against "
              f"the engine's {direct_ms:.1f} ms/job (direct)")
        per_week = 1_000_000 * s / max(n, 1) / 3600
        print(f"projection, per-job path: 1,000,000 jobs/week = {per_week:,.0f} worker-hours")
    per_job_window = dagster_s * max(args.workers, 1) / args.jobs
    hours = 1_000_000 * per_job_window / 3600
    print(f"projection, window path: 1,000,000 jobs/week = {hours:,.1f} core-hours "
          f"({hours / 168:.2f} cores busy around the clock; {hours / 8:.1f} h of wall time on "
          f"8 cores)")
    print(f"bench-week: {args.jobs} jobs, dagster {dagster_s:.1f} s, direct {direct_s:.1f} s, "
          f"ratio {dagster_s / direct_s:.2f}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
