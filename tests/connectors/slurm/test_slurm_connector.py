"""Slurm connector without a Slurm: hostlists, states, exit codes, output paths, and both
transports against recorded answers.

Recordings (tests/data/slurm/) come from the real Slurm 22.05.8 that scripts/ci-slurm.sh
starts (three fake nodes node-a/b/c): `sacct --parsable2 --noheader` with the connector's
field list, `scontrol -o show node|job`, and slurmrestd's `/slurmdb/v0.0.38/jobs`,
`/slurm/v0.0.38/jobs` and `/slurm/v0.0.38/nodes`. The jobs: 1 `-t 1 sleep 300` (TIMEOUT),
2 three-node srun where node-b exits 42, 3 `echo fine`, 4 an array of 3 (task 2 exits 5),
5 a heterogeneous job of two components, 7 cancelled while pending.
Shapes for Slurm versions that cannot run here are built in this file from their
definitions: sacct's StdOut/StdErr fields from src/sacct/print.c of 24.05-25.11, the
slurmdbd job object of v0.0.39-v0.0.42 from the OpenAPI specs in Slurm's
testsuite/python/data/openapi_specs/ and the openapi release notes (numbers as
`{set, infinite, number}`, `state.current` a list from v0.0.40 on).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pytest

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import (
    JobNotFound,
    JobQuery,
    SchedulerClient,
    SchedulerError,
)
from attribution_dagster.connectors.slurm.client import SlurmConfig
from attribution_dagster.connectors.slurm.records import (
    decode_wait_status,
    expand_hostlist,
    expand_output_pattern,
    gpus_from_tres,
    map_state,
    parse_exit_code,
)
from attribution_dagster.connectors.slurm.rest import RestClient
from attribution_dagster.connectors.slurm.sacct import RunResult, SacctClient
from attribution_dagster.core.context import JobState

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"
T0 = datetime(2026, 12, 3, 6, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 12, 3, 7, 0, tzinfo=timezone.utc)


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("node-a", ["node-a"]),
        ("node-a,node-b,node-c", ["node-a", "node-b", "node-c"]),
        ("gpu-[001-004,010],dgx7", ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010", "dgx7"]),
        ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        (
            "rack[1,3]-gpu[09-10].ib",
            ["rack1-gpu09.ib", "rack1-gpu10.ib", "rack3-gpu09.ib", "rack3-gpu10.ib"],
        ),
        ("x[1-2],x2,y", ["x1", "x2", "y"]),
        ("None assigned", []),
        ("", []),
        (None, []),
    ],
)
def test_expand_hostlist(expr: str | None, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize("bad", ["gpu-[1-", "gpu-]1[", "gpu-[a-c]", "gpu-[5-1]", "a[[1-2]]"])
def test_expand_hostlist_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(bad)


# ----------------------------------------------------------------------------- small parsers


@pytest.mark.parametrize(
    ("raw", "state", "reason"),
    [
        ("COMPLETED", JobState.COMPLETED, None),
        ("FAILED", JobState.FAILED, None),
        ("CANCELLED by 1000", JobState.CANCELLED, "CANCELLED by 1000"),
        ("CANCELLED", JobState.CANCELLED, None),
        ("TIMEOUT", JobState.TIMEOUT, None),
        ("NODE_FAIL", JobState.NODE_FAIL, None),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY, None),
        ("PREEMPTED", JobState.PREEMPTED, None),
        ("BOOT_FAIL", JobState.NODE_FAIL, "BOOT_FAIL"),
        ("DEADLINE", JobState.TIMEOUT, "DEADLINE"),
        ("SPECIAL_EXIT", JobState.FAILED, "SPECIAL_EXIT"),
        ("OOM", JobState.OUT_OF_MEMORY, "OOM"),
        ("RUNNING", None, None),
        ("PENDING", None, None),
        ("REQUEUED", None, None),
        ("", None, None),
    ],
)
def test_map_state(raw: str, state: JobState | None, reason: str | None) -> None:
    assert map_state(raw) == (state, reason)


def test_exit_codes_and_wait_status() -> None:
    assert parse_exit_code("42:0") == (42, 0)
    assert parse_exit_code("0:9") == (0, 9)
    assert parse_exit_code("") == (None, None)
    assert decode_wait_status(768) == (3, 0)  # the 22.05 DB value for `exit 3`
    assert decode_wait_status(10752) == (42, 0)
    assert decode_wait_status(15) == (0, 15)
    assert decode_wait_status(4294967294) == (None, None)  # NO_VAL


def test_gpus_from_alloc_tres() -> None:
    tres = "billing=16,cpu=128,gres/gpu=16,gres/gpu:h100=16,mem=1T,node=2"
    assert gpus_from_tres(tres) == (16, "h100")
    assert gpus_from_tres("cpu=8,gres/gpu:a100=4,node=1") == (4, "a100")
    assert gpus_from_tres("cpu=8,node=1") == (None, None)


def test_output_patterns_expand_like_slurm() -> None:
    kw = dict(job_name="train", user="alice", first_node="gpu-001", workdir="/home/alice")
    assert expand_output_pattern("/scratch/%u/%x-%j.out", job_id="77", **kw) == (
        "/scratch/alice/train-77.out"
    )
    arr = dict(array_job_id="88", array_task_id="2")
    assert expand_output_pattern("log-%A_%a-%N.txt", job_id="90", **arr, **kw) == (
        "/home/alice/log-88_2-gpu-001.txt"
    )
    assert expand_output_pattern("o%5j%%", job_id="77", **kw) == "/home/alice/o00077%"
    # no --output: Slurm's default names in the working directory
    assert expand_output_pattern(None, job_id="77", **kw) == "/home/alice/slurm-77.out"
    assert expand_output_pattern("", job_id="90", array_job_id="88", array_task_id="2",
                                 **kw) == "/home/alice/slurm-88_2.out"  # fmt: skip


# ----------------------------------------------------------------------------- sacct transport


class FakeSlurm:
    """Answers sacct / scontrol argv from recordings, like the real 22.05 commands would:
    StdOut/StdErr are rejected with sacct's own message."""

    def __init__(self, alloc: str, steps: str = "", version_has_std: bool = False) -> None:
        self.alloc = alloc
        self.steps = steps
        self.version_has_std = version_has_std
        self.calls: list[list[str]] = []
        self.envs: list[Mapping[str, str]] = []
        self.nodes = (DATA / "scontrol-22.05-nodes.txt").read_text()
        self.jobs = (DATA / "scontrol-22.05-jobs.txt").read_text()

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> RunResult:
        argv = list(argv)
        self.calls.append(argv)
        self.envs.append(env)
        if argv[0].endswith("scontrol"):
            return RunResult(0, self.nodes if "node" in argv else self.jobs, "")
        fields = argv[argv.index("--format") + 1].split(",")
        if not self.version_has_std and ("StdOut" in fields or "StdErr" in fields):
            bad = "StdOut" if "StdOut" in fields else "StdErr"
            return RunResult(1, "", f'sacct: error: Invalid field requested: "{bad}"\n')
        if "-X" in argv:
            return RunResult(0, self.alloc, "")
        return RunResult(0, self.steps, "")


def sacct_client(fake: FakeSlurm, **cfg: object) -> SacctClient:
    config = SlurmConfig(slurm_conf="/etc/slurm-test/slurm.conf", **cfg)  # type: ignore[arg-type]
    return SacctClient(config, "testcluster", runner=fake)


def recorded_fake() -> FakeSlurm:
    return FakeSlurm(
        (DATA / "sacct-22.05-alloc.txt").read_text(), (DATA / "sacct-22.05-steps.txt").read_text()
    )


def test_config_kind_slurm_builds_a_scheduler_client() -> None:
    cfg = parse_config("scheduler", {"kind": "slurm", "slurm_conf": "/x/slurm.conf"})
    assert isinstance(cfg, SlurmConfig)
    assert isinstance(cfg.client("c1"), SchedulerClient)
    rest = parse_config("scheduler", {"kind": "slurm", "transport": "slurmrestd",
                                      "restd_url": "http://h:6820"})  # fmt: skip
    assert isinstance(rest.client("c1"), RestClient)
    implied = parse_config("scheduler", {"kind": "slurm", "restd_url": "http://h:6820"})
    assert isinstance(implied.client("c1"), RestClient)  # transport auto + restd_url
    assert isinstance(SlurmConfig().client("c1"), SacctClient)
    with pytest.raises(ValueError, match="restd_url"):
        SlurmConfig(transport="slurmrestd").client("c1")


def test_sacct_recorded_22_05_finished_jobs() -> None:
    """Recorded 22.05.8 output: windows, arrays, het merge, failing steps, pending-cancel."""
    fake = recorded_fake()
    client = sacct_client(fake)
    ctxs = client.finished_jobs(JobQuery(since=T0, until=T1))
    by_id = {c.job_id: c for c in ctxs}
    # job 7 was cancelled while pending: no nodes, nothing to analyse, not listed
    assert sorted(by_id) == ["1", "2", "3", "4_1", "4_2", "4_3", "5"]
    assert [c.end for c in ctxs] == sorted(c.end for c in ctxs)

    multi = by_id["2"]
    assert (multi.state, multi.exit_code) == (JobState.FAILED, 42)
    assert multi.nodes == ["node-a", "node-b", "node-c"]
    assert multi.failing_step == "2.0"  # the srun step, not the batch script that ran it
    assert multi.stdout_path == "/tmp/slurmjobs/multi-2.out"  # from scontrol (22.05 sacct lacks it)
    assert multi.node_addresses["node-b"] == ["127.0.0.1", "vm"]
    assert (multi.cluster, multi.scheduler, multi.partition) == ("testcluster", "slurm", "debug")

    timeout = by_id["1"]
    assert timeout.state is JobState.TIMEOUT and timeout.failing_step == "1.batch"
    task = by_id["4_2"]
    assert (task.state, task.exit_code, task.failing_step) == (JobState.FAILED, 5, "4_2.batch")
    assert task.stdout_path == "/tmp/slurmjobs/arr-4_2.out"
    assert task.model_extra["array_job_id"] == "4"
    het = by_id["5"]
    assert het.nodes == ["node-a", "node-b"] and het.state is JobState.COMPLETED
    assert by_id["3"].failing_step is None and not by_id["3"].failed

    alloc_calls = [c for c in fake.calls if c[0] == "sacct" and "-X" in c]
    # StdOut rejected once (both std fields dropped), then the real query
    assert (
        len(alloc_calls) == 2
        and "StdOut" not in alloc_calls[-1][alloc_calls[-1].index("--format") + 1]
    )
    assert "-a" in alloc_calls[-1]
    assert alloc_calls[-1][alloc_calls[-1].index("--starttime") + 1] == "2026-12-03T06:00:00"
    step_calls = [c for c in fake.calls if c[0] == "sacct" and "-X" not in c]
    assert len(step_calls) == 1  # one steps query for every job that did not complete
    assert step_calls[0][step_calls[0].index("-j") + 1] == "1,2,4_2"
    assert all(
        e["TZ"] == "UTC" and e["SLURM_CONF"] == "/etc/slurm-test/slurm.conf" for e in fake.envs
    )
    # the second query does not ask for the rejected fields again
    client.finished_jobs(JobQuery(since=T0, until=T1))
    assert len([c for c in fake.calls if "-X" in c]) == 3


def test_sacct_window_is_by_end_time_and_filters_apply() -> None:
    """sacct returns jobs *active* in the window; only those that ended in it are listed."""
    fake = recorded_fake()
    client = sacct_client(fake)
    # job 1 (TIMEOUT) ended 06:56:04; everything else ended by 06:55:04
    late = client.finished_jobs(JobQuery(since=utc(2026, 12, 3, 6, 55, 30), until=T1))
    assert [c.job_id for c in late] == ["1"]
    failed = client.finished_jobs(
        JobQuery(since=T0, until=T1, states=(JobState.FAILED,), users=("root",))
    )
    assert [c.job_id for c in failed] == ["2", "4_2"]
    argv = [c for c in fake.calls if "-X" in c][-1]
    # only states sacct accepts (real 22.05: SPECIAL_EXIT is fatal there)
    assert argv[argv.index("--state") + 1] == "FAILED"
    assert argv[argv.index("-u") + 1] == "root" and "-a" not in argv
    assert [c.job_id for c in client.finished_jobs(JobQuery(since=T0, until=T1, limit=2))] == [
        "3",
        "4_1",
    ]
    assert client.finished_jobs(JobQuery(since=T0, until=T1, partitions=("gpu",))) == []


SACCT_2405 = (
    # JobID|JobIDRaw|JobName|State|ExitCode|DerivedExitCode|Start|End|NodeList|NNodes|Partition|
    # Account|User|AllocTRES|Reason|WorkDir|Cluster|StdOut|StdErr
    "4812|4812|pretrain|NODE_FAIL|0:0|0:0|2026-11-25T10:00:00|2026-11-25T10:43:12|gpu-[001-004]|4|"
    "h100|ml|alice|billing=32,cpu=512,gres/gpu=32,gres/gpu:h100=32,mem=2T,node=4|None|"
    "/home/alice/run|gb|/scratch/%u/%x-%j.out|\n"
    "4813|4813|eval|CANCELLED by 1000|0:15|0:0|2026-11-25T10:05:00|2026-11-25T10:06:00|dgx7|1|"
    "h100|ml|bob|cpu=8,gres/gpu=8,node=1|None|/home/bob|gb||/home/bob/err-%j.txt\n"
    "4820_3|4823|sweep|OUT_OF_MEMORY|0:125|0:0|2026-11-25T10:10:00|2026-11-25T10:20:00|"
    "gpu-010|1|h100|ml|carol|cpu=4,gres/gpu=1,node=1|None|/w|gb|log-%A_%a.out|\n"
    "4830|4830|boot|BOOT_FAIL|0:0|0:0|2026-11-25T10:30:00|2026-11-25T10:30:05|gpu-[020-021]|2|"
    "h100|ml|dave|cpu=16,node=2|None|/w|gb||\n"
)


def test_gpu_counts_from_alloctres_reach_the_weekly_report(tmp_path) -> None:
    """AllocTRES `gres/gpu=` -> gpus_per_node -> attribution_jobs.gpu_hours -> the report:
    a job whose TRES names no GPU (4830) is counted apart, never as 0 GPU-hours."""
    from attribution_dagster.reports import weekly
    from attribution_dagster.sinks.sql import SqlSink

    client = sacct_client(FakeSlurm(SACCT_2405, version_has_std=True), node_addresses=False)
    ctxs = client.finished_jobs(JobQuery(since=utc(2026, 11, 25), until=utc(2026, 11, 26)))
    assert {c.job_id: c.gpus_per_node for c in ctxs} == {
        "4812": 8, "4813": 8, "4820_3": 1, "4830": None}
    url = f"sqlite:///{tmp_path}/r.db"
    SqlSink(url).write_jobs(ctxs, window="2026-11-25")
    t = weekly.build_report(url, "2026-W48").this  # no results yet: every job pending
    assert t.failed == 4 and t.failed_without_gpu_count == 1
    want = 4 * 8 * (43 * 60 + 12) / 3600 + 8 * 60 / 3600 + 1 * 600 / 3600
    assert t.gpu_hours_lost_total == pytest.approx(want, abs=0.1)
    assert t.gpu_hours_text(fmt=",.1f") == (
        f"at least {want:,.1f} (+1 job without a GPU count)")


def test_sacct_2405_field_set_with_stdout_patterns_and_gpus() -> None:
    """24.05+ prints StdOut/StdErr (the raw pattern); no scontrol job lookup is needed."""
    fake = FakeSlurm(SACCT_2405, version_has_std=True)
    client = sacct_client(fake, node_addresses=False)
    ctxs = {
        c.job_id: c
        for c in client.finished_jobs(JobQuery(since=utc(2026, 11, 25), until=utc(2026, 11, 26)))
    }
    nf = ctxs["4812"]
    assert nf.state is JobState.NODE_FAIL and nf.nodes == [
        "gpu-001",
        "gpu-002",
        "gpu-003",
        "gpu-004",
    ]
    assert (nf.gpus_per_node, nf.gpu_model) == (8, "h100")
    assert nf.stdout_path == "/scratch/alice/pretrain-4812.out" == nf.stderr_path
    cancelled = ctxs["4813"]
    assert cancelled.state is JobState.CANCELLED and cancelled.reason == "CANCELLED by 1000"
    assert cancelled.exit_code == 128 + 15 and cancelled.model_extra["exit_signal"] == 15
    assert cancelled.stdout_path == "/home/bob/slurm-4813.out"  # default name, no --output
    assert cancelled.stderr_path == "/home/bob/err-4813.txt"
    oom = ctxs["4820_3"]
    assert oom.state is JobState.OUT_OF_MEMORY and oom.stdout_path == "/w/log-4820_3.out"
    assert ctxs["4830"].state is JobState.NODE_FAIL and ctxs["4830"].reason == "BOOT_FAIL"
    assert not any(c[0] == "scontrol" for c in fake.calls)
    assert len([c for c in fake.calls if "-X" in c]) == 1


_ROW = "|{s}|0:0|0:0|{t}|{t}|{n}|1|debug|root|root||None|/w|t\n"
ARRAY_ROWS = "".join(
    f"4_{i}|{raw}|arr" + _ROW.format(s="COMPLETED", t="2026-12-03T06:54:43", n="node-b")
    for i, raw in ((1, 8), (2, 9), (3, 4))
)
PENDING_CANCEL_ROW = "7|7|x" + _ROW.format(s="CANCELLED by 0", t="None", n="None assigned")


def test_sacct_get_job_forms() -> None:
    fake = recorded_fake()
    client = sacct_client(fake)
    task = client.get_job("4_2")
    assert (task.job_id, task.exit_code, task.failing_step) == ("4_2", 5, "4_2.batch")
    assert client.get_job("5").nodes == ["node-a", "node-b"]
    with pytest.raises(JobNotFound, match="array of 3 tasks"):
        sacct_client(FakeSlurm(ARRAY_ROWS)).get_job("4")
    with pytest.raises(SchedulerError, match="never ran"):
        sacct_client(FakeSlurm(PENDING_CANCEL_ROW)).get_job("7")
    with pytest.raises(JobNotFound, match="not found"):
        sacct_client(FakeSlurm("")).get_job("99")
    with pytest.raises(JobNotFound, match="not a Slurm job id"):
        client.get_job("abc; rm -rf /")


@pytest.mark.parametrize(
    ("behaviour", "match", "transient"),
    [
        (FileNotFoundError(), "sacct not found", False),
        (subprocess.TimeoutExpired(["sacct"], 3), "did not answer within", True),
        (RunResult(1, "", "sacct: error: Slurm accounting storage is disabled\n"),
         "accounting storage is disabled", False),
        (RunResult(1, "", "sacct: error: slurm_persist_conn_open_without_init: failed to open "
                          "persistent connection to host:127.0.0.1:6819: Connection refused\n"
                          "sacct: error: Problem talking to the database: Connection refused\n"),
         "cannot reach slurmdbd", True),
        (RunResult(1, "", "sacct: fatal: something else broke\nmore\n"), "else broke", False),
    ],
)  # fmt: skip
def test_sacct_errors_are_one_line(behaviour: object, match: str, transient: bool) -> None:
    def runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> RunResult:
        if isinstance(behaviour, BaseException):
            raise behaviour
        return behaviour  # type: ignore[return-value]

    client = SacctClient(SlurmConfig(), "c1", runner=runner)
    with pytest.raises(SchedulerError, match=match) as info:
        client.finished_jobs(JobQuery(since=T0, until=T1))
    assert info.value.transient is transient
    assert "\n" not in str(info.value)


def test_sacct_node_lookup_failure_is_not_fatal() -> None:
    fake = recorded_fake()

    def runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> RunResult:
        if argv[0] == "scontrol":
            return RunResult(1, "", "scontrol: error: Unable to contact slurm controller\n")
        return fake(argv, env, timeout)

    ctx = SacctClient(SlurmConfig(), "c1", runner=runner).get_job("2")
    assert ctx.node_addresses == {} and ctx.exit_code == 42 and ctx.stdout_path is None


# ----------------------------------------------------------------------------- slurmrestd


def rest_config(url: str, **kw: object) -> SlurmConfig:
    kw.setdefault("timeout_seconds", 2)
    return SlurmConfig(transport="slurmrestd", restd_url=url, user_name="slurm",
                       jwt_env="TEST_SLURM_JWT", **kw)  # type: ignore[arg-type]  # fmt: skip


def no_sleep(seconds: float) -> None:
    """Retry waits (connectors/http.py) are not slept in these tests."""


def rest_client(url: str, **kw: object) -> RestClient:
    return RestClient(rest_config(url, **kw), "testcluster", env={"TEST_SLURM_JWT": "tok123"},
                      sleep=no_sleep)  # fmt: skip


def _load(name: str) -> object:
    return json.loads((DATA / name).read_text())


def test_rest_dbv0038_recorded_with_ctld_exit_codes(fake_http) -> None:
    """Recorded 22.05.8 answers. slurmdbd's JSON says SUCCESS/0 for the failed jobs (Slurm
    bug); the exit codes come from slurmctld's raw wait status instead."""
    fake_http.route(
        "GET", "/slurmdb/v0.0.38/jobs", lambda r: (200, _load("rest-dbv0.0.38-jobs.json"))
    )
    fake_http.route(
        "GET", "/slurm/v0.0.38/jobs", lambda r: (200, _load("rest-v0.0.38-ctld-jobs.json"))
    )
    fake_http.route(
        "GET", "/slurm/v0.0.38/nodes", lambda r: (200, _load("rest-v0.0.38-nodes.json"))
    )
    client = rest_client(fake_http.url)
    ctxs = {c.job_id: c for c in client.finished_jobs(JobQuery(since=T0, until=T1))}
    assert sorted(ctxs) == ["1", "2", "3", "4_1", "4_2", "4_3", "5"]
    assert client.version == "v0.0.38"  # auto: v0.0.42..v0.0.39 answered 404
    multi = ctxs["2"]
    assert (multi.state, multi.exit_code, multi.failing_step) == (JobState.FAILED, 42, "2.0")
    assert multi.stdout_path == "/tmp/slurmjobs/multi-2.out"  # ctld's pattern %x-%j expanded
    assert multi.node_addresses["node-a"] == ["127.0.0.1", "vm"]
    assert ctxs["4_2"].exit_code == 5 and ctxs["4_2"].stdout_path == "/tmp/slurmjobs/arr-4_2.out"
    assert ctxs["1"].state is JobState.TIMEOUT and ctxs["1"].failing_step == "1.batch"
    assert ctxs["5"].nodes == ["node-a", "node-b"]
    req = [r for r in fake_http.requests if r.path == "/slurmdb/v0.0.38/jobs"][-1]
    assert req.arg("start_time") == "2026-12-03T06:00:00"  # sent escaped: 06%3A00%3A00
    assert (
        req.headers["x-slurm-user-token"] == "tok123"
        and req.headers["x-slurm-user-name"] == "slurm"
    )


def test_rest_dbv0038_without_ctld_leaves_exit_code_unknown(fake_http) -> None:
    fake_http.route("GET", "/slurmdb/v0.0.38/job/2", lambda r: (200, {
        **_load("rest-dbv0.0.38-jobs.json"),  # type: ignore[dict-item]
        "jobs": [j for j in _load("rest-dbv0.0.38-jobs.json")["jobs"] if j["job_id"] == 2],  # type: ignore[index]
    }))  # fmt: skip
    fake_http.route("GET", "/slurm/v0.0.38/jobs", lambda r: (500, {"errors": []}))
    ctx = rest_client(fake_http.url, api_version="dbv0.0.38", node_addresses=False).get_job("2")
    assert ctx.state is JobState.FAILED and ctx.exit_code is None  # never a false 0
    assert "Slurm bug" in ctx.model_extra["exit_code_note"]


def _num(n: int | None) -> dict:
    return {"set": n is not None, "infinite": False, "number": n or 0}


def v41_job(job_id: int, *, state: list[str] | str, code: int, signal: int | None = None,
            nodes: str = "gpu-[001-002]", array: tuple[int, int] | None = None,
            het: tuple[int, int] | None = None,
            steps: list[dict] | None = None) -> dict:  # fmt: skip
    """A slurmdbd job object shaped per the v0.0.41/42 OpenAPI spec (v0.0.40 alike)."""
    exit_code = {"status": ["SIGNALED"] if signal else ["SUCCESS" if code == 0 else "ERROR"],
                 "return_code": _num(code),
                 "signal": {"id": _num(signal), "name": "KILL" if signal else ""}}  # fmt: skip
    return {
        "account": "ml", "cluster": "gb", "job_id": job_id, "name": f"j{job_id}",
        "partition": "h100", "user": "alice", "working_directory": "/home/alice",
        "nodes": nodes, "state": {"current": state, "reason": "None"},
        "exit_code": exit_code, "derived_exit_code": {"status": ["SUCCESS"], "return_code": _num(0),
                                                      "signal": {"id": _num(None), "name": ""}},
        "time": {"start": 1795600800, "end": 1795603000, "elapsed": 2200, "submission": 1795600700,
                 "limit": _num(600)},
        "array": {"job_id": array[0] if array else 0, "task_id": _num(array[1] if array else None)},
        "het": {"job_id": het[0] if het else 0, "job_offset": _num(het[1] if het else None)},
        "tres": {"allocated": [{"type": "cpu", "name": "", "id": 1, "count": 64},
                               {"type": "gres", "name": "gpu", "id": 1001, "count": 16},
                               {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 16},
                               {"type": "node", "name": "", "id": 4, "count": 2}],
                 "requested": []},
        "stdout": "/scratch/%u/%x-%j.out", "stderr": "",
        "stdout_expanded": f"/scratch/alice/j{job_id}-{job_id}.out", "stderr_expanded": "",
        "steps": steps or [],
    }  # fmt: skip


def v41_step(step_id: str, state: list[str], code: int, end: int) -> dict:
    return {"step": {"id": step_id, "name": "python"}, "state": state,
            "exit_code": {"status": ["ERROR" if code else "SUCCESS"], "return_code": _num(code),
                          "signal": {"id": _num(None), "name": ""}},
            "time": {"start": _num(1795600800), "end": _num(end)},
            "nodes": {"count": 2, "list": ["gpu-001", "gpu-002"]}}  # fmt: skip


@pytest.mark.parametrize("version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_rest_v004x_shapes(fake_http, version: str) -> None:
    body = {
        "meta": {"plugin": {"type": "openapi/slurmdbd"}}, "errors": [], "warnings": [],
        "jobs": [
            v41_job(900, state=["FAILED"], code=1, steps=[
                v41_step("900.batch", ["FAILED"], 1, 1795603000),
                v41_step("900.0", ["FAILED"], 1, 1795602990),
                v41_step("900.extern", ["COMPLETED"], 0, 1795603001),
            ]),
            v41_job(901, state=["CANCELLED"], code=0, signal=9, nodes="dgx7"),
            v41_job(910, state=["COMPLETED"], code=0, array=(905, 3)),
            v41_job(920, state=["FAILED"], code=3, het=(920, 0), nodes="gpu-001"),
            v41_job(921, state=["COMPLETED"], code=0, het=(920, 1), nodes="gpu-002"),
            v41_job(930, state=["RUNNING"], code=0),
        ],
    }  # fmt: skip
    if version == "v0.0.40":  # the stdout fields arrived with v0.0.41 (24.05)
        for job in body["jobs"]:
            for key in ("stdout", "stderr", "stdout_expanded", "stderr_expanded"):
                job.pop(key)
    fake_http.route("GET", f"/slurmdb/{version}/jobs", lambda r: (200, body))
    fake_http.route("GET", f"/slurm/{version}/nodes", lambda r: (200, {"nodes": [
        {"name": "gpu-001", "address": "10.0.0.1", "hostname": "gpu-001.cluster"}]}))  # fmt: skip
    client = rest_client(fake_http.url, api_version=version)
    ctxs = {
        c.job_id: c
        for c in client.finished_jobs(JobQuery(since=T0.replace(month=11, day=25), until=T1))
    }
    assert sorted(ctxs) == ["900", "901", "905_3", "920"]  # 930 is still running
    failed = ctxs["900"]
    assert (failed.state, failed.exit_code, failed.failing_step) == (JobState.FAILED, 1, "900.0")
    assert failed.nodes == ["gpu-001", "gpu-002"] and (failed.gpus_per_node, failed.gpu_model) == (
        8,
        "h100",
    )
    if version == "v0.0.40":
        assert failed.stdout_path is None
    else:
        assert failed.stdout_path == "/scratch/alice/j900-900.out"  # stdout_expanded wins
    assert failed.node_addresses == {"gpu-001": ["10.0.0.1", "gpu-001.cluster"]}
    assert ctxs["901"].exit_code == 128 + 9 and ctxs["901"].state is JobState.CANCELLED
    assert ctxs["905_3"].model_extra["array_task_id"] == "3"
    het = ctxs["920"]
    assert (
        het.nodes == ["gpu-001", "gpu-002"] and het.state is JobState.FAILED and het.exit_code == 3
    )
    req = [r for r in fake_http.requests if r.path.endswith("/jobs")][0]
    assert req.arg("start_time") == str(int(T0.replace(month=11, day=25).timestamp()))
    # only the configured version was asked (no probing)
    assert {r.path.split("/")[2] for r in fake_http.requests} == {version}


def test_rest_v0039_shapes(fake_http) -> None:
    """v0.0.39 (23.02) per its data_parser: state.current a string, plain integer times and
    return codes, signal {signal_id, name}, step.id an object {job_id, step_id}."""
    job = {
        "job_id": 77, "name": "train", "nodes": "gpu-[001-002]", "partition": "h100",
        "user": "alice", "account": "ml", "working_directory": "/w",
        "state": {"current": "FAILED", "reason": "NonZeroExitCode"},
        "exit_code": {"status": "ERROR", "return_code": 3},
        "derived_exit_code": {"status": "ERROR", "return_code": 3},
        "time": {"start": 1795600800, "end": 1795603000},
        "array": {"job_id": 0, "task_id": None}, "het": {"job_id": 0, "job_offset": None},
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 8}]},
        "steps": [
            {"step": {"id": {"job_id": 77, "step_id": "batch"}, "name": "batch"},
             "state": "FAILED", "exit_code": {"status": "ERROR", "return_code": 3},
             "time": {"start": 1795600800, "end": 1795603000}, "nodes": {"list": ["gpu-001"]}},
            {"step": {"id": {"job_id": 77, "step_id": 0}, "name": "python"},
             "state": "CANCELLED",
             "exit_code": {"status": "SIGNALED", "signal": {"signal_id": 9, "name": "KILL"}},
             "time": {"start": 1795600800, "end": 1795602999},
             "nodes": {"list": ["gpu-001", "gpu-002"]}},
        ],
    }  # fmt: skip
    fake_http.route("GET", "/slurmdb/v0.0.39/job/77", lambda r: (200, {"jobs": [job]}))
    ctx = rest_client(fake_http.url, api_version="v0.0.39", node_addresses=False).get_job("77")
    assert (ctx.state, ctx.exit_code, ctx.failing_step) == (JobState.FAILED, 3, "77.0")
    assert ctx.end == datetime.fromtimestamp(1795603000, timezone.utc)
    assert ctx.nodes == ["gpu-001", "gpu-002"] and ctx.gpus_per_node == 4
    assert ctx.stdout_path is None  # v0.0.39 records no output path: none is guessed


def test_rest_auto_version_picks_newest_served(fake_http) -> None:
    fake_http.route("GET", "/slurmdb/v0.0.41/jobs", lambda r: (200, {"jobs": [], "errors": []}))
    client = rest_client(fake_http.url, node_addresses=False)
    assert client.finished_jobs(JobQuery(since=T0, until=T1)) == []
    assert client.version == "v0.0.41"
    assert [r.path for r in fake_http.requests] == [
        "/slurmdb/v0.0.42/jobs",
        "/slurmdb/v0.0.41/jobs",
    ]


@pytest.mark.parametrize(
    ("answer", "match", "transient"),
    [
        ((401, {"errors": [{"error": "Authentication failure"}]}),
         r"answered 401: check the JWT in \$TEST_SLURM_JWT", False),
        ((403, "Forbidden"), r"answered 403: check the JWT in \$TEST_SLURM_JWT", False),
        ((500, {"errors": [{"error": "Unable to connect to database"}]}), "answered 500", True),
        ((503, "busy"), "answered 503", True),
        ((429, "slow down"), "answered 429", True),
        ((200, "{not json"), "not JSON", False),
        ((200, ["a", "list"]), "unexpected JSON", False),
        ((200, {"errors": [], "nojobs": 1}), "without a 'jobs' list", False),
        # 22.05 with a bad token answers 200 and puts slurmdbd's refusal in errors
        ((200, {"errors": [{"error_number": 1007, "error": "Protocol authentication error"}],
                "jobs": []}),
         r"check the JWT in \$TEST_SLURM_JWT", False),
        ((200, {"errors": [{"error_number": 9003, "error": "Nothing found with query"}],
                "jobs": []}), None, False),
    ],
)  # fmt: skip
def test_rest_errors(fake_http, answer: tuple, match: str | None, transient: bool) -> None:
    fake_http.route("GET", "/slurmdb/v0.0.41/jobs", lambda r: answer)
    client = rest_client(fake_http.url, api_version="v0.0.41", node_addresses=False)
    if match is None:
        assert client.finished_jobs(JobQuery(since=T0, until=T1)) == []
        return
    with pytest.raises(SchedulerError, match=match) as info:
        client.finished_jobs(JobQuery(since=T0, until=T1))
    assert info.value.transient is transient
    assert "\n" not in str(info.value)


def test_rest_timeout_and_refused_are_transient(fake_http) -> None:
    fake_http.route("GET", "/slurmdb/v0.0.41/jobs", lambda r: (time.sleep(1.5), (200, {}))[1])
    client = RestClient(rest_config(fake_http.url, api_version="v0.0.41", timeout_seconds=0.3),
                        "c", env={"TEST_SLURM_JWT": "t"}, sleep=no_sleep)  # fmt: skip
    with pytest.raises(SchedulerError, match="did not answer within") as info:
        client.finished_jobs(JobQuery(since=T0, until=T1))
    assert info.value.transient
    closed = RestClient(rest_config("http://127.0.0.1:9", api_version="v0.0.41"), "c",
                        env={"TEST_SLURM_JWT": "t"}, sleep=no_sleep)  # fmt: skip
    with pytest.raises(SchedulerError, match="cannot reach slurmrestd") as info:
        closed.get_job("5")
    assert info.value.transient


def test_rest_missing_token_names_the_variable(fake_http) -> None:
    client = RestClient(rest_config(fake_http.url), "c", env={})
    with pytest.raises(SchedulerError, match=r"set \$TEST_SLURM_JWT") as info:
        client.get_job("1")
    assert not info.value.transient and fake_http.requests == []


def test_rest_get_job_not_found(fake_http) -> None:
    nothing = {"description": "Nothing found", "error_number": 9003, "error": "Nothing found"}
    fake_http.route(
        "GET", "/slurmdb/v0.0.38/job/99999", lambda r: (200, {"jobs": [], "errors": [nothing]})
    )
    with pytest.raises(JobNotFound, match="99999 not found"):
        rest_client(fake_http.url, api_version="v0.0.38").get_job("99999")


def test_rest_404_with_json_is_a_missing_job_not_a_missing_api(fake_http) -> None:
    """A served endpoint answering 404 with a JSON error body: the job is unknown; a plain
    text 404 (slurmrestd's answer for a path it does not serve) makes auto probe on."""
    missing = {"errors": [{"error_number": 2017, "error": "Invalid job id specified"}]}
    fake_http.route("GET", "/slurmdb/v0.0.42/job/55", lambda r: (404, missing))
    client = rest_client(fake_http.url)
    with pytest.raises(JobNotFound, match="55 not found"):
        client.get_job("55")
    assert client.version == "v0.0.42"
    assert [r.path for r in fake_http.requests] == ["/slurmdb/v0.0.42/job/55"]


def test_rest_429_is_retried_as_retry_after_says(fake_http) -> None:
    """slurmrestd behind a rate-limiting proxy: the 429's `Retry-After` is the wait, then the
    retry reads the jobs (recorded v0.0.41 shape: an empty job list)."""
    answers = [(429, "slow down", {"Retry-After": "7"})]
    fake_http.route("GET", "/slurmdb/v0.0.41/jobs",
                    lambda r: answers.pop(0) if answers else (200, {"jobs": [], "errors": []}))
    waits: list[float] = []
    client = RestClient(rest_config(fake_http.url, api_version="v0.0.41", node_addresses=False),
                        "c", env={"TEST_SLURM_JWT": "t"}, sleep=waits.append)  # fmt: skip
    assert client.finished_jobs(JobQuery(since=T0, until=T1)) == []
    assert waits == [7.0] and client.requests == 2
