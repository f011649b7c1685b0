"""Throughput of the production-shaped deployment (bench/deploy_stack.py) against
`max_concurrent_runs`: PostgreSQL storage and sink, `dagster code-server`, `dagster-daemon`,
the DefaultRunLauncher (a process per run).

For each concurrency it starts a fresh stack and measures, one after the other:
- per job: PER_JOB finished jobs found by the sensor, one run each (sensor -> queue ->
  run process -> four assets -> the sink);
- per window: WINDOW_JOBS jobs of a week, one backfill of its 7 daily windows.

Printed per row: jobs/s (first run created to last run finished), a run's slot (the time
it held one of the concurrent places: span x concurrency / runs) and what Dagster adds to
a run (slot minus the time inside its steps: process start, loading the code, storage,
events, queueing).

    ATTRIBUTION_TEST_PG_URL=$(scripts/ci-services.sh start) python bench/deploy.py
    python bench/deploy.py --concurrency 1 2 4 --per-job 24 --window-jobs 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import deploy_stack as ds  # noqa: E402
import week_data  # noqa: E402

DAYS = [f"2026-11-{d:02d}" for d in range(9, 16)]


def run_stats(instance, runs, concurrency: int) -> tuple[float, float, float]:
    """(span s, run slot s, mean in-step s). The span runs from the first run's creation to
    the last run's end; a run's slot is the time it held one of the `concurrency` places
    (span x concurrency / runs): process start, loading the code, storage, queueing and its
    steps. Slot minus steps is what Dagster adds to a run."""
    recs = [instance.get_run_record_by_id(r.run_id) for r in runs]
    first = min(rec.create_timestamp.timestamp() for rec in recs)
    last = max(rec.end_time for rec in recs if rec.end_time)
    steps = [
        sum(
            s.end_time - s.start_time
            for s in instance.get_run_step_stats(r.run_id)
            if s.start_time and s.end_time
        )
        for r in runs
    ]
    span = last - first
    return span, span * concurrency / len(runs), statistics.mean(steps)


def measure(pg_url: str, concurrency: int, per_job: int, window_jobs: int, workers: int) -> dict:
    from dagster import DagsterRunStatus

    with tempfile.TemporaryDirectory(prefix="attr-deploy-bench-") as tmp:
        root = Path(tmp)
        pj = week_data.generate(root / "pj", jobs=per_job, seed=31, cluster=ds.PER_JOB_CLUSTER,
                                first_id=3_100_000)
        win = week_data.generate(root / "win", jobs=window_jobs, seed=32,
                                 cluster=ds.WINDOW_CLUSTER, first_id=3_200_000)
        with ds.Stack(root, pg_url, max_concurrent_runs=concurrency, per_job_jsonl=pj,
                      window_jsonl=win, max_jobs_per_tick=200,
                      window_workers=workers) as stack:
            stack.create()
            stack.start_code_server()
            stack.start_daemon()
            with stack.instance() as inst:

                def per_job_done():
                    runs = [r for r in inst.get_runs() if r.job_name == "attribute_job"]
                    return len(runs) == per_job and all(r.is_finished for r in runs) and runs

                runs = ds.wait_for("per-job runs", per_job_done, 1800, stack, interval=1)
                assert all(r.status == DagsterRunStatus.SUCCESS for r in runs)
                pj_span, pj_slot, pj_steps = run_stats(inst, runs, concurrency)

                bid = ds.submit_window_backfill(inst, stack.config_path, ds.WINDOW_CLUSTER,
                                                DAYS, "bench")

                def windows_done():
                    runs = [r for r in inst.get_runs()
                            if r.tags.get("dagster/backfill") == bid]
                    return len(runs) == len(DAYS) and all(r.is_finished for r in runs) and runs

                wruns = ds.wait_for("window runs", windows_done, 1800, stack, interval=1)
                assert all(r.status == DagsterRunStatus.SUCCESS for r in wruns)
                w_span, w_slot, w_steps = run_stats(inst, wruns, concurrency)
            from attribution_dagster.sinks.sql import SqlSink

            assert SqlSink(stack.results_url).count() == per_job + window_jobs
    return {
        "concurrency": concurrency,
        "per_job_jobs_s": per_job / pj_span,
        "per_job_slot": pj_slot,
        "per_job_overhead": pj_slot - pj_steps,
        "window_jobs_s": window_jobs / w_span,
        "window_slot": w_slot,
        "window_overhead": w_slot - w_steps,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--per-job", type=int, default=24)
    ap.add_argument("--window-jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1, help="processes per window run")
    args = ap.parse_args()
    pg_url = os.environ.get("ATTRIBUTION_TEST_PG_URL")
    if not pg_url:
        print("bench/deploy.py: set ATTRIBUTION_TEST_PG_URL (scripts/ci-services.sh start)",
              file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"{args.per_job} per-job jobs, {args.window_jobs} window jobs (7 windows)")
    print("| max_concurrent_runs | per job: jobs/s | run slot s | Dagster s/run "
          "| per window: jobs/s | run slot s | Dagster s/run |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for c in args.concurrency:
        t = time.monotonic()
        m = measure(pg_url, c, args.per_job, args.window_jobs, args.workers)
        base = base or m
        print(f"| {c} | {m['per_job_jobs_s']:.2f} | {m['per_job_slot']:.1f} | "
              f"{m['per_job_overhead']:.1f} | {m['window_jobs_s']:.1f} | "
              f"{m['window_slot']:.1f} | {m['window_overhead']:.1f} |", flush=True)
        eff_pj = m["per_job_jobs_s"] / base["per_job_jobs_s"] / (c / base["concurrency"])
        eff_w = m["window_jobs_s"] / base["window_jobs_s"] / (c / base["concurrency"])
        print(f"  (parallel efficiency vs {base['concurrency']}: per job {eff_pj:.0%}, "
              f"per window {eff_w:.0%}; {time.monotonic() - t:.0f} s; load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
