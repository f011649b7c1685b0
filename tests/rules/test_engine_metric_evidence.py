"""Metric-only evidence in the engine: DCGM NVLink counters and host memory exhaustion.

Both are weak alone (a counter can creep up on a healthy link; a low MemAvailable reading is not
a kill): they join a fault of the same node and category, and never win over a cause elsewhere.
"""

from __future__ import annotations

from datetime import timedelta

from test_engine_progress import T0, ob  # one observation factory for the engine tests

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine import load_engine

ENGINE = load_engine()
NODES = ["a", "b", "c", "d"]


def ctx(state: JobState = JobState.FAILED) -> ExecutionContext:
    return ExecutionContext(
        job_id="m",
        scheduler="slurm",
        state=state,
        exit_code=1 if state is JobState.FAILED else 0,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=NODES,
    )




def counters(node: str, gpu: int, start: float, n: int, delta: int = 900) -> list[Observation]:
    return [
        ob("nvlink_counter", node, start + 2 * i, gpu=gpu, attrs={"origin": "dcgm", "delta": delta})
        for i in range(n)
    ]


def timeouts(minute: float) -> list[Observation]:
    return [ob("collective_timeout", n, minute, attrs={"rank": i}) for i, n in enumerate(NODES)]


def test_nvlink_counter_joins_the_nodes_nvlink_fault_and_names_the_gpu() -> None:
    err = ob("nvlink_error", "c", 21)
    r = ENGINE.attribute(ctx(), [*counters("c", 6, 10, 6), err, *timeouts(31)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.nvlink", ["c"])
    roots = [lk for lk in r.symptom_chain if lk.role == "root_cause"]
    assert {lk.kind for lk in roots} == {"nvlink_counter", "nvlink_error"}
    assert any(lk.gpu == 6 for lk in roots)


def test_nvlink_counter_creep_is_not_a_verdict_a_burst_before_the_failure_is() -> None:
    """A counter creeping up by a few errors per scrape before the peers' timeouts stays a
    symptom; jumping by thousands per scrape it is the only fault seen, and it precedes them."""
    obs = [*counters("c", 6, 10, 8, delta=3), *timeouts(31)]
    assert ENGINE.attribute(ctx(), obs, []).status == "unattributed"
    r = ENGINE.attribute(ctx(), [*counters("c", 6, 10, 8), *timeouts(31)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.nvlink", ["c"])
    # the same burst only after the timeouts explains nothing
    r = ENGINE.attribute(ctx(), [*counters("c", 6, 33, 8), *timeouts(31)], [])
    assert r.status == "unattributed"


def test_nvlink_counter_does_not_beat_an_app_error_elsewhere() -> None:
    app = ob("traceback", "a", 20, attrs={"family": "app", "exc_type": "KeyError"})
    r = ENGINE.attribute(ctx(), [*counters("c", 6, 10, 8), app, *timeouts(31)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["a"])


def memory_low(node: str, minute: float) -> Observation:
    return ob("host_memory_low", node, minute, attrs={"origin": "metric", "percent": 0.04})


def sigkill(node: str, minute: float) -> list[Observation]:
    return [
        ob("child_failed", node, minute, attrs={"exitcode": -9, "signal": 9, "rank": 13}),
        ob("process_exit", node, minute, attrs={"exit_code": -9}),
    ]


def peers(minute: float, but: str) -> list[Observation]:
    return [ob("nccl_remote_error", n, minute) for n in NODES if n != but]


def test_memory_exhausted_then_sigkill_on_that_node_is_host_oom() -> None:
    obs = [memory_low("b", 20), *sigkill("b", 20.7), *peers(20.75, "b")]
    r = ENGINE.attribute(ctx(), obs, [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "node.host_oom", ["b"])
    # without the metric: a SIGKILL alone names no cause (h81)
    assert ENGINE.attribute(ctx(), obs[1:], []).status == "unattributed"


def test_memory_low_does_not_beat_another_cause_nor_explain_an_earlier_failure() -> None:
    app = ob("traceback", "a", 20, attrs={"family": "app", "exc_type": "KeyError"})
    r = ENGINE.attribute(ctx(), [memory_low("b", 15), app, *peers(20.5, "a")], [])
    assert (r.category, r.suspect_nodes) == ("app.error", ["a"])
    # memory ran low only after the ranks had died: a consequence, not the cause
    r = ENGINE.attribute(ctx(), [*sigkill("b", 20), *peers(20.1, "b"), memory_low("b", 25)], [])
    assert r.status == "unattributed"


def test_memory_low_in_a_completed_job_is_not_a_failure() -> None:
    r = ENGINE.attribute(ctx(JobState.COMPLETED), [memory_low("b", 20)], [])
    assert (r.failed, r.status, r.category) == (False, "not_failed", None)


def test_prometheus_fetches_the_denominator_of_a_ratio_metric() -> None:
    from attribution_dagster import pipeline

    fam = next(f for f in pipeline.catalog().metric_families() if f.id == "node_memory_low")
    # screened by MemAvailable; MemTotal rides along with the fetch (the real-Prometheus
    # test of h140 in test_prometheus.py shows both arrive)
    assert fam.names == ("node_memory_MemAvailable_bytes",)
    assert fam.companions == ("node_memory_MemTotal_bytes",)


def test_object_store_unreachable_from_every_node_is_shared_storage() -> None:
    """Not metric evidence, but the same 'shared dependency' logic: botocore timeouts against
    the checkpoint store on every node at once name the store (no suspect), and the
    CheckpointException that follows is folded into it; AccessDenied stays the job's own."""
    boto = {"exc_type": "botocore.exceptions.ReadTimeoutError", "family": "object_store"}
    ckpt = {"exc_type": "torch.distributed.checkpoint.api.CheckpointException", "family": "app"}
    obs = [ob("traceback", n, 50 + i * 0.01, attrs=boto) for i, n in enumerate(NODES)]
    obs += [ob("traceback", n, 50.05, attrs=ckpt) for n in NODES]
    r = ENGINE.attribute(ctx(), obs, [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "storage", [])
    denied = {"exc_type": "botocore.exceptions.ClientError", "family": "app"}
    r = ENGINE.attribute(ctx(), [ob("traceback", n, 50, attrs=denied) for n in NODES], [])
    assert r.category == "app.error"
