"""The production shape of dagster.yaml.example run as real processes, under load and faults
(issue 21, items 1 and 2).

    PostgreSQL instance storage   two fresh databases on the CI server (ATTRIBUTION_TEST_PG_URL):
    + PostgreSQL results sink     Dagster's, and the results' (attribution.yaml `sink.url`)
    `dagster code-server start`   the code location, named by a temp workspace.yaml
    `dagster-daemon run`          sensors, QueuedRunCoordinator (2 at once), backfills,
                                  run_retries (2)
    DefaultRunLauncher            one process per run (the K8sRunLauncher's pod, as a process)

Load, from a static scheduler (a JSON-lines answer plus tiny log trees, bench/week_data.py):
- per job: PER_JOB finished jobs of cluster `atlas`; its finished-jobs sensor registers
  them MAX_PER_TICK a tick and the daemon runs one run per job;
- per window: WINDOW_JOBS finished jobs of cluster `fleet` over a week; two overlapping
  backfills of its daily windows run at once.

Faults, all during that load: the daemon is killed (-9, its process group) after the
sensor's first tick and started again; a window run's worker process is killed (-9)
mid-run. Then: every job has exactly one result row, nothing is missing, no run was
requested twice, and every run ends in success except the killed one, whose retry
succeeded. A trigger in the results
database counts every write of a result row (re-attribution is allowed after a kill; a
lost or doubled row is not).

How many jobs fit: a per-job run is a Python process that loads Dagster and the project
(several seconds of CPU on this 2-core machine), so the per-job load is small; the 2,000
jobs go through the window path. docs/deployment.md has the measured figures.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import deploy_stack as ds  # noqa: E402
import week_data  # noqa: E402

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"
PER_JOB = int(os.environ.get("ATTRIBUTION_DEPLOY_PER_JOB", "12"))
MAX_PER_TICK = 4
WINDOW_JOBS = int(os.environ.get("ATTRIBUTION_DEPLOY_WINDOW_JOBS", "2000"))
DAYS = [f"2026-11-{d:02d}" for d in range(9, 16)]  # the generated week, Monday to Sunday
# Overlapping, from the same first day: the daemon submits both at once, so the queue
# interleaves their runs and the shared days tend to run in both backfills at the same time.
BACKFILL_A, BACKFILL_B = DAYS[:3], DAYS

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.deploy,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not PG_URL and not REQUIRE,
        reason="ATTRIBUTION_TEST_PG_URL is not set (scripts/ci-services.sh start prints it)",
    ),
]


def jobs_of(jsonl: Path) -> set[tuple[str, str]]:
    return {(c["cluster"], c["job_id"]) for c in map(json.loads, jsonl.open())}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if not PG_URL:
        pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
    root = tmp_path_factory.mktemp("deploy")
    per_job = week_data.generate(
        root / "per-job", jobs=PER_JOB, seed=21, cluster=ds.PER_JOB_CLUSTER, first_id=2_100_000
    )
    window = week_data.generate(
        root / "window", jobs=WINDOW_JOBS, seed=22, cluster=ds.WINDOW_CLUSTER, first_id=2_200_000
    )
    st = ds.Stack(
        root,
        PG_URL,
        max_concurrent_runs=2,
        max_retries=2,
        per_job_jsonl=per_job,
        window_jsonl=window,
        max_jobs_per_tick=MAX_PER_TICK,
    )
    try:
        st.create()
        count_result_writes(st.results_url)
        st.start_code_server()
        st.start_daemon()
        yield st
    finally:
        spawned = list(st.procs)
        st.close()
    # no process of any group (code server and its run workers, both daemons) outlives it
    assert not any(ds.group_alive(p.pid) for p in spawned)


def count_result_writes(url: str) -> None:
    """The results tables, plus a trigger that logs every insert or update of a result."""
    from attribution_dagster.sinks.sql import SqlSink

    with SqlSink(url).engine.begin() as conn:
        conn.execute(text("CREATE TABLE result_writes (cluster text, job_id text)"))
        conn.execute(
            text(
                "CREATE FUNCTION log_result_write() RETURNS trigger AS $$ BEGIN "
                "INSERT INTO result_writes VALUES (NEW.cluster, NEW.job_id); RETURN NEW; "
                "END $$ LANGUAGE plpgsql"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER result_written AFTER INSERT OR UPDATE ON attribution_results "
                "FOR EACH ROW EXECUTE FUNCTION log_result_write()"
            )
        )


def result_rows(url: str, cluster: str) -> tuple[Counter, Counter]:
    """(rows per job, writes per job) of one cluster in the results database."""
    from attribution_dagster.core.database import shared_engine

    with shared_engine(url).connect() as conn:
        rows = Counter(
            j for (j,) in conn.execute(
                text("SELECT job_id FROM attribution_results WHERE cluster = :c"), {"c": cluster}
            )
        )
        writes = Counter(
            j for (j,) in conn.execute(
                text("SELECT job_id FROM result_writes WHERE cluster = :c"), {"c": cluster}
            )
        )
    return rows, writes


def child_rows_match_results(url: str, cluster: str) -> list[str]:
    """Jobs whose stored symptom/evidence rows differ from their result's own lists (what
    two interleaved writers of one job would leave behind)."""
    from attribution_dagster.core.database import shared_engine

    q = text(
        "SELECT r.job_id, r.result_json, "
        "(SELECT count(*) FROM attribution_symptoms s WHERE s.result_id = r.id), "
        "(SELECT count(*) FROM attribution_evidence e WHERE e.result_id = r.id) "
        "FROM attribution_results r WHERE r.cluster = :c"
    )
    bad = []
    with shared_engine(url).connect() as conn:
        for job, raw, symptoms, evidence in conn.execute(q, {"c": cluster}):
            result = json.loads(raw)
            if (len(result["symptom_chain"]), len(result["evidence"])) != (symptoms, evidence):
                bad.append(job)
    return bad


def runs_of(instance, **tags: str) -> list:
    from dagster import RunsFilter

    return list(instance.get_runs(filters=RunsFilter(tags=tags) if tags else None))


def registered(instance) -> set[str]:
    return set(instance.get_dynamic_partitions("jobs"))


@pytest.fixture(scope="module")
def scenario(stack) -> dict:
    """The load and the faults, all at once, as a deployment meets them:

    1. both backfills are submitted and the sensor starts draining the per-job backlog;
    2. after the sensor's first tick the daemon is killed (-9) and, 3 s later, restarted;
    3. once a window run is past its first step, its run worker is killed (-9);
    4. wait until every run has finished and both backfills are done.
    What the tests below assert is read back afterwards (the instance, the results)."""
    from dagster._core.execution.backfill import BulkActionStatus

    out: dict = {}
    t0 = time.monotonic()
    with stack.instance() as instance:
        backfills = [
            ds.submit_window_backfill(instance, stack.config_path, ds.WINDOW_CLUSTER, days, name)
            for name, days in (("A", BACKFILL_A), ("B", BACKFILL_B))
        ]
        out["backfills"] = backfills

        ds.wait_for(
            "the sensor's first tick", lambda: registered(instance), 180, stack, interval=0.2
        )
        stack.kill_daemon()
        out["daemon dead"] = not stack.daemon.alive()
        out["registered before the kill"] = registered(instance)
        time.sleep(3)  # no daemon: nothing may be registered meanwhile
        out["registered while dead"] = registered(instance)
        stack.start_daemon()

        victim = ds.wait_for(
            "a window run past its first step",
            lambda: window_run_mid_way(instance, backfills),
            400,
            stack,
            interval=0.3,
        )
        out["victim"] = victim.run_id
        out["killed pid"] = ds.kill_run_worker(instance, victim.run_id)

        def everything_done():
            runs = runs_of(instance)
            jobs_done = {r.tags.get("dagster/partition") for r in runs if r.is_finished}
            status = [instance.get_backfill(i).status for i in backfills]
            return (
                jobs_done >= PER_JOB_KEYS(stack)
                and all(r.is_finished for r in runs)
                and BulkActionStatus.REQUESTED not in status
                and status
            )

        out["backfill status"] = ds.wait_for("every run", everything_done, 720, stack, 2)
        out["seconds"] = time.monotonic() - t0
        out["runs"] = runs_of(instance)
        out["days run concurrently"] = concurrent_days(instance, backfills)
    return out


def concurrent_days(instance, backfills: list[str]) -> list[str]:
    """Windows whose runs in the two backfills overlapped in time."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for rec in instance.get_run_records():
        r = rec.dagster_run
        if r.tags.get("dagster/backfill") in backfills and rec.start_time and rec.end_time:
            spans.setdefault(r.tags["dagster/partition"], []).append(
                (rec.start_time, rec.end_time)
            )
    return sorted(
        day
        for day, s in spans.items()
        if any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(s) for b in s[i + 1 :])
    )


def PER_JOB_KEYS(stack) -> set[str]:  # noqa: N802 - reads like the constant it is
    return {f"{c}.{j}" for c, j in jobs_of(stack.per_job_jsonl)}


def window_run_mid_way(instance, backfills: list[str]):
    """A running window run whose first step (listing the window) is done."""
    from dagster import DagsterRunStatus

    for r in runs_of(instance):
        if r.tags.get("dagster/backfill") in backfills and r.status == DagsterRunStatus.STARTED:
            if ds.run_worker_pid(instance, r.run_id) and (
                instance.get_run_stats(r.run_id).steps_succeeded >= 1
            ):
                return r
    return None


def test_every_run_succeeds_or_is_retried_to_success(scenario, stack):
    """The killed run failed and its retry succeeded; every other run succeeded, or failed
    for a fault of the scenario (a run the killed daemon was launching is failed by run
    monitoring's start timeout) and was retried to success."""
    from dagster import DagsterRunStatus

    runs = {r.run_id: r for r in scenario["runs"]}
    victim = runs[scenario["victim"]]
    assert scenario["killed pid"] is not None
    assert victim.status == DagsterRunStatus.FAILURE
    retried = {}
    for r in runs.values():
        parent = r.tags.get("dagster/parent_run_id")
        if parent:
            assert runs[parent].status == DagsterRunStatus.FAILURE
            retried.setdefault(parent, []).append(r)
    assert [r.status for r in retried[victim.run_id]] == [DagsterRunStatus.SUCCESS]
    assert retried[victim.run_id][0].tags["dagster/partition"] == victim.tags["dagster/partition"]
    unresolved = []
    for r in runs.values():
        if r.status == DagsterRunStatus.SUCCESS:
            continue
        # a failed run is fine only if a retry of it (or of its retry) succeeded
        chain, ok = [r], False
        while chain and not ok:
            nxt = [c for p in chain for c in retried.get(p.run_id, [])]
            ok = any(c.status == DagsterRunStatus.SUCCESS for c in nxt)
            chain = nxt
        if not ok:
            unresolved.append((r.job_name, r.tags.get("dagster/partition"), r.status.value))
    assert unresolved == []
    others = [r for r in runs.values() if r.status != DagsterRunStatus.SUCCESS]
    print(
        f"\ndeployment: {PER_JOB} per-job + {WINDOW_JOBS} window jobs, {len(runs)} runs "
        f"in {scenario['seconds']:.0f} s; failed then retried: {len(others)} "
        f"(the killed worker's run and {len(others) - 1} more)"
    )


def test_the_restarted_daemon_resumes_the_sensor_without_duplicate_runs(scenario, stack):
    expected = PER_JOB_KEYS(stack)
    first = scenario["registered before the kill"]
    assert scenario["daemon dead"]
    assert 0 < len(first) < PER_JOB, "the kill came after the whole backlog was registered"
    assert scenario["registered while dead"] == first
    per_job = [r for r in scenario["runs"] if r.job_name == "attribute_job"]
    originals = Counter(
        r.tags["dagster/partition"] for r in per_job if "dagster/parent_run_id" not in r.tags
    )
    assert originals == Counter(expected), "a job was requested twice, or never"
    assert {r.tags["dagster/run_key"] for r in per_job} == expected
    with stack.instance() as instance:
        assert registered(instance) == expected


def test_each_per_job_job_has_one_row_written_once(scenario, stack):
    rows, writes = result_rows(stack.results_url, ds.PER_JOB_CLUSTER)
    assert set(rows) == {j for _, j in jobs_of(stack.per_job_jsonl)}
    assert set(rows.values()) == {1}
    assert set(writes.values()) == {1}, "a job was attributed twice (a duplicate run)"
    assert child_rows_match_results(stack.results_url, ds.PER_JOB_CLUSTER) == []


def test_overlapping_backfills_leave_one_row_per_window_job(scenario, stack):
    from dagster._core.execution.backfill import BulkActionStatus

    assert scenario["backfill status"] == [BulkActionStatus.COMPLETED_SUCCESS] * 2
    ids = scenario["backfills"]
    # one original run per (backfill, day): the overlap's days ran once in each backfill
    originals = Counter(
        (r.tags["dagster/backfill"], r.tags["dagster/partition"])
        for r in scenario["runs"]
        if r.tags.get("dagster/backfill") in ids and "dagster/parent_run_id" not in r.tags
    )
    assert sum(originals.values()) == len(BACKFILL_A) + len(BACKFILL_B)
    assert set(originals.values()) == {1}

    expected = {j for _, j in jobs_of(stack.window_jsonl)}
    rows, writes = result_rows(stack.results_url, ds.WINDOW_CLUSTER)
    assert set(rows) == expected, f"missing {len(expected - set(rows))} jobs"
    assert set(rows.values()) == {1}
    assert all(n >= 1 for n in writes.values())
    assert child_rows_match_results(stack.results_url, ds.WINDOW_CLUSTER) == []
    print(
        f"\nwindow path: {len(expected)} jobs, {sum(writes.values())} result writes "
        f"(extra writes: "
        f"{sum(writes.values()) - len(expected)}); windows run by both backfills at once: "
        f"{scenario['days run concurrently']}"
    )
