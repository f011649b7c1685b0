"""The Slurm connector against a real Slurm (22.05 with slurmdbd, three fake nodes node-a,
node-b, node-c and slurmrestd with JWT, as scripts/ci-slurm.sh starts it).

Skipped when ATTRIBUTION_TEST_SLURM_CONF is unset, FAILED instead when
ATTRIBUTION_REQUIRE_SERVICES=1 (CI): a Slurm that did not start must not look green.

One module fixture submits the jobs once and waits for accounting (it is asynchronous):
a three-node job whose srun task on node-b prints a Python traceback and exits 42, a job
that completes, an array of three whose task 2 exits 5, and a job with a one-minute time
limit that sleeps (Slurm checks limits about every 30 s, so it ends ~70-90 s later; it is
submitted first and the others run meanwhile). The tests then read those jobs through
sacct, slurmrestd, `attribution discover`, the finished-jobs sensor and `attribution
analyze` with the job's own output file as evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from attribution_dagster.connectors.base import JobQuery, SchedulerError
from attribution_dagster.connectors.slurm.client import SlurmConfig
from attribution_dagster.connectors.slurm.rest import RestClient
from attribution_dagster.connectors.slurm.sacct import SacctClient
from attribution_dagster.core.context import JobState

pytestmark = pytest.mark.slurm

CONF = os.environ.get("ATTRIBUTION_TEST_SLURM_CONF", "")
RESTD = os.environ.get("ATTRIBUTION_TEST_SLURMRESTD_URL", "")
JWT_ENV = "ATTRIBUTION_TEST_SLURM_JWT"
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"
CLUSTER = "testcluster"

FAILING_STEP = r"""#!/bin/bash
# every node runs one task; node-b's fails like a training script would
if [ "$SLURMD_NODENAME" = node-b ]; then
  echo "Traceback (most recent call last):" >&2
  echo '  File "/opt/train.py", line 7, in <module>' >&2
  echo "ValueError: loss is nan at step 7" >&2
  exit 42
fi
echo "$SLURMD_NODENAME: step 7 done"
"""


def _need_slurm() -> None:
    if CONF and Path(CONF).is_file():
        return
    msg = f"ATTRIBUTION_TEST_SLURM_CONF is unset or missing ({CONF!r}): scripts/ci-slurm.sh start"
    if REQUIRE:
        pytest.fail(f"ATTRIBUTION_REQUIRE_SERVICES=1 but {msg}")
    pytest.skip(msg)


def _env() -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": CONF}


def _sbatch(*args: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", *args], env=_env(), capture_output=True, text=True,
        timeout=30, check=True, stdin=subprocess.DEVNULL,
    ).stdout  # fmt: skip
    return out.strip().split(";")[0]


@dataclass
class Jobs:
    since: datetime
    out: Path
    failing: str
    ok: str
    array: str
    timeout: str
    sacct_seconds: float

    @property
    def all_ids(self) -> set[str]:
        return {self.failing, self.ok, self.timeout} | {f"{self.array}_{i}" for i in (1, 2, 3)}


def sacct_client(**kw: object) -> SacctClient:
    return SlurmConfig(slurm_conf=CONF, timeout_seconds=30, **kw).client(CLUSTER)  # type: ignore[arg-type, return-value]


def rest_client(**kw: object) -> RestClient:
    cfg = SlurmConfig(transport="slurmrestd", restd_url=RESTD, jwt_env=JWT_ENV,
                      user_name="slurm", timeout_seconds=30, **kw)  # type: ignore[arg-type]  # fmt: skip
    return cfg.client(CLUSTER)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    _need_slurm()
    out = tmp_path_factory.mktemp("slurm-out")
    out.chmod(0o777)
    step = out / "step.sh"
    step.write_text(FAILING_STEP)
    step.chmod(0o755)
    since = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=5)
    o = f"--output={out}/%x-%j.out"
    timeout = _sbatch("-J", "limited", "-t", "1", o, "--wrap", "sleep 300")
    # srun -l labels each line with its task number, as multi-node jobs usually do
    failing = _sbatch("-J", "multi", "-N", "3", o, "--wrap", f"srun -l {step}")
    ok = _sbatch("-J", "fine", o, "--wrap", "echo fine")
    task = 'echo task $SLURM_ARRAY_TASK_ID; [ "$SLURM_ARRAY_TASK_ID" != 2 ] || exit 5'
    array = _sbatch("-J", "sweep", "--array=1-3", f"--output={out}/%x-%A_%a.out", "--wrap", task)
    jobs = Jobs(since, out, failing, ok, array, timeout, 0.0)
    # accounting lands 1-4 s after a job ends; poll the query the tests assert on
    client = sacct_client()
    deadline = time.monotonic() + 240
    seen: set[str] = set()
    while time.monotonic() < deadline:
        seen = {c.job_id for c in client.finished_jobs(JobQuery(since=since))}
        if jobs.all_ids <= seen:
            break
        time.sleep(2)
    else:
        pytest.fail(
            f"Slurm accounting never listed {sorted(jobs.all_ids - seen)} (saw {sorted(seen)})"
        )
    t0 = time.monotonic()
    client.finished_jobs(JobQuery(since=since))
    jobs.sacct_seconds = time.monotonic() - t0
    return jobs


def test_sacct_lists_finished_jobs_with_their_context(jobs: Jobs) -> None:
    client = sacct_client()
    ctxs = {c.job_id: c for c in client.finished_jobs(JobQuery(since=jobs.since))}
    assert jobs.all_ids <= set(ctxs)

    failing = ctxs[jobs.failing]
    assert (failing.state, failing.exit_code) == (JobState.FAILED, 42)
    assert failing.nodes == ["node-a", "node-b", "node-c"]
    assert failing.failing_step == f"{jobs.failing}.0"  # the srun step, not the batch script
    assert failing.stdout_path == str(jobs.out / f"multi-{jobs.failing}.out")
    assert Path(failing.stdout_path).is_file()
    assert "127.0.0.1" in failing.node_addresses["node-b"]  # NodeAddr from scontrol
    assert (failing.cluster, failing.scheduler, failing.partition) == (CLUSTER, "slurm", "debug")

    assert ctxs[jobs.ok].state is JobState.COMPLETED and ctxs[jobs.ok].exit_code == 0
    assert ctxs[jobs.ok].failing_step is None
    task = ctxs[f"{jobs.array}_2"]
    assert (task.state, task.exit_code) == (JobState.FAILED, 5)
    assert task.stdout_path == str(jobs.out / f"sweep-{jobs.array}_2.out")
    assert ctxs[f"{jobs.array}_3"].state is JobState.COMPLETED
    limited = ctxs[jobs.timeout]
    assert limited.state is JobState.TIMEOUT and limited.failing_step == f"{jobs.timeout}.batch"
    assert limited.end - limited.start >= timedelta(seconds=55)

    failed = client.finished_jobs(JobQuery(since=jobs.since, states=(JobState.FAILED,)))
    assert {c.job_id for c in failed} >= {jobs.failing, f"{jobs.array}_2"}
    assert all(c.state is JobState.FAILED for c in failed)
    assert jobs.sacct_seconds < 10  # measured: a few hundred ms on the CI machine


def test_sacct_get_job_forms(jobs: Jobs) -> None:
    client = sacct_client()
    assert client.get_job(jobs.failing).failing_step == f"{jobs.failing}.0"
    assert client.get_job(f"{jobs.array}_2").exit_code == 5
    with pytest.raises(SchedulerError, match="array of 3 tasks"):
        client.get_job(jobs.array)
    with pytest.raises(SchedulerError, match="not found"):
        client.get_job("999999")


def test_slurmrestd_agrees_with_sacct(jobs: Jobs) -> None:
    """The same jobs through slurmrestd (22.05: dbv0.0.38, exit codes from slurmctld)."""
    if not RESTD or not os.environ.get(JWT_ENV):
        if REQUIRE:
            pytest.fail("ATTRIBUTION_TEST_SLURMRESTD_URL / ATTRIBUTION_TEST_SLURM_JWT not set")
        pytest.skip("slurmrestd not configured")
    rest = rest_client()
    via_rest = {c.job_id: c for c in rest.finished_jobs(JobQuery(since=jobs.since))}
    via_sacct = {c.job_id: c for c in sacct_client().finished_jobs(JobQuery(since=jobs.since))}
    assert jobs.all_ids <= set(via_rest)
    assert rest.version == "v0.0.38"  # probed: the newest version this slurmrestd serves
    for job_id in jobs.all_ids - {jobs.timeout}:
        a, b = via_rest[job_id], via_sacct[job_id]
        assert (a.state, a.exit_code, a.nodes, a.failing_step, a.stdout_path) == (
            b.state, b.exit_code, b.nodes, b.failing_step, b.stdout_path,
        ), job_id  # fmt: skip
    # the time-limited job: sacct says 0:0, slurmctld's wait status says SIGTERM
    assert via_rest[jobs.timeout].state is JobState.TIMEOUT
    assert rest.get_job(jobs.failing).exit_code == 42


def test_errors_against_the_real_services(jobs: Jobs, tmp_path: Path) -> None:
    # slurmdbd unreachable: the same cluster with accounting pointed at a closed port
    conf = tmp_path / "slurm.conf"
    text = Path(CONF).read_text()
    lines = [
        "AccountingStoragePort=9" if ln.startswith("AccountingStoragePort=") else ln
        for ln in text.splitlines()
    ]
    conf.write_text("\n".join(lines) + "\n")
    shutil.copy(Path(CONF).with_name("slurmdbd.conf"), tmp_path / "slurmdbd.conf")
    broken = SlurmConfig(slurm_conf=str(conf), timeout_seconds=60).client(CLUSTER)
    with pytest.raises(SchedulerError) as info:
        broken.finished_jobs(JobQuery(since=jobs.since))
    assert info.value.transient, str(info.value)
    assert "slurmdbd" in str(info.value) and "\n" not in str(info.value)

    with pytest.raises(SchedulerError, match="sacct not found") as info:
        SlurmConfig(sacct="/nonexistent/sacct").client(CLUSTER).get_job(jobs.ok)
    assert not info.value.transient

    if RESTD:
        bad = RestClient(
            SlurmConfig(transport="slurmrestd", restd_url=RESTD, jwt_env="BAD_JWT",
                        user_name="slurm", api_version="v0.0.38"),
            CLUSTER, env={"BAD_JWT": "not-a-token"},
        )  # fmt: skip
        with pytest.raises(SchedulerError, match=r"\$BAD_JWT") as info:
            bad.get_job(jobs.ok)
        assert not info.value.transient


# ----------------------------------------------------------------------------- end to end


def _write_config(tmp_path: Path, jobs: Jobs, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "attribution.yaml"
    cluster = {
        "scheduler": {"kind": "slurm", "slurm_conf": CONF, "timeout_seconds": 30},
        "logs": [{"kind": "files", "root": str(jobs.out), "paths": ["{stdout}"]}],
    }
    cfg.write_text(yaml.safe_dump({"clusters": {CLUSTER: cluster}}), encoding="utf-8")
    monkeypatch.setenv("ATTRIBUTION_CONFIG", str(cfg))
    return cfg


def test_discover_prints_the_submitted_jobs(
    jobs: Jobs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from attribution_dagster.cli.app import main

    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(yaml.safe_dump({"clusters": {CLUSTER: {"scheduler": {
        "kind": "slurm", "slurm_conf": CONF}}}}), encoding="utf-8")  # fmt: skip
    monkeypatch.setenv("ATTRIBUTION_CONFIG", str(cfg))
    since = jobs.since.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main(["discover", CLUSTER, "--since", since]) == 0
    listed = {o["job_id"]: o for o in map(json.loads, capsys.readouterr().out.splitlines())}
    assert jobs.all_ids <= set(listed)
    assert listed[jobs.failing]["state"] == "FAILED" and listed[jobs.failing]["exit_code"] == 42
    assert listed[jobs.failing]["cluster"] == CLUSTER
    assert main(["discover", CLUSTER, "--since", since, "--state", "TIMEOUT", "--table"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:2] == ["job", "state"]
    assert [r.split()[:2] for r in rows[2:] if r.strip()] == [[jobs.timeout, "TIMEOUT"]]


def test_sensor_requests_a_run_per_finished_job_once(jobs: Jobs, tmp_path: Path, instance) -> None:  # type: ignore[no-untyped-def]
    from dagster import SensorResult, build_sensor_context

    from attribution_dagster.core.config import AttributionConfig
    from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions
    from attribution_dagster.resources import AssetStoreResource, ClustersResource
    from attribution_dagster.sensors import build_finished_jobs_sensor

    config = AttributionConfig.model_validate(
        {"clusters": {CLUSTER: {"scheduler": {"kind": "slurm", "slurm_conf": CONF}}}}
    )
    resources = {
        "clusters": ClustersResource.from_configs(config.clusters),
        "store": AssetStoreResource(url=f"sqlite:///{tmp_path}/store.db"),
    }
    job = build_definitions(AttributionConfig()).resolve_job_def(ATTRIBUTE_JOB)
    lookback = (datetime.now(timezone.utc) - jobs.since).total_seconds() + 5
    sensor = build_finished_jobs_sensor(CLUSTER, job, first_lookback_seconds=lookback)

    def tick(cursor: str | None):  # type: ignore[no-untyped-def]
        result = sensor(build_sensor_context(instance=instance, cursor=cursor, resources=resources))
        if isinstance(result, SensorResult):
            for req in result.dynamic_partitions_requests or []:
                instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        return result

    ours = {f"{CLUSTER}.{j}" for j in jobs.all_ids}
    first = tick(None)
    assert ours <= {r.partition_key for r in first.run_requests}
    second = tick(first.cursor)
    # The second tick looks back over the overlap (600 s before the watermark): it registers
    # none of ours again. Jobs older than this module's window (other runs on a reused
    # Slurm) may legitimately appear there once; on CI's fresh Slurm there are none.
    again = {r.partition_key for r in getattr(second, "run_requests", None) or []}
    assert not (again & ours)
    third = tick(second.cursor)
    assert not getattr(third, "run_requests", None)


def test_analyze_the_failing_job_from_its_own_output(
    jobs: Jobs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`analyze testcluster/<job>`: context from sacct, evidence from the job's --output file
    through a files source (`paths: ["{stdout}"]`, the files back-end's contract)."""
    from attribution_dagster.cli.app import main

    _write_config(tmp_path, jobs, monkeypatch)
    assert main(["analyze", f"{CLUSTER}/{jobs.failing}", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True and result["job_id"] == jobs.failing
    assert result["category"] == "app.error", result
    # the traceback carries srun's task label 1; srun's own line says task 1 ran on node-b
    assert result["suspect_nodes"] == ["node-b"], result["summary"]
    assert "loss is nan" in result["summary"]
    chain = {(c["node"], c["kind"]) for c in result["symptom_chain"]}
    assert {("node-b", "traceback"), ("node-b", "process_exit")} <= chain
    assert all(f"multi-{jobs.failing}.out:" in e["locator"] for e in result["evidence"])


def test_scontrol_show_topology_through_the_topology_source() -> None:
    """The real slurmctld (topology/tree, the topology.conf ci-slurm.sh writes beside
    slurm.conf): `kind: slurm_scontrol` reads the same model as `kind: files` on that file,
    and the last node sits alone on leaf-2 under spine-1."""
    from attribution_dagster.connectors.topology.files import TopologyFilesConfig
    from attribution_dagster.connectors.topology.live import ScontrolTopologyConfig

    _need_slurm()
    live = ScontrolTopologyConfig(slurm_conf=CONF).client(CLUSTER).snapshots().snapshots[0]
    conf = Path(CONF).parent / "topology.conf"
    files = TopologyFilesConfig(paths=[str(conf)]).client(CLUSTER).snapshots().snapshots[0]
    assert live.errors == [] and files.errors == []
    assert live.leaf_of == files.leaf_of and live.switches == files.switches
    assert live.leaf("node-c") == "leaf-2" and live.ancestors("leaf-1") == ["spine-1"]
