"""Engine behaviour on hand-built observation lists: one scenario per test."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import CONTRACT_FIELDS, AttributionResult
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.engine import load_engine

ENGINE = load_engine()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
NODES = ["node-a", "node-b", "node-c", "node-d"]
LOGS = [
    SourceCoverage(source="files:logs", nodes_read=NODES),
    SourceCoverage(source="files:metrics"),
]


def ctx(
    state: JobState = JobState.FAILED,
    nodes: list[str] | None = None,
    gpu_model: str | None = "H100",
    exit_code: int | None = None,
    minutes: int = 60,
) -> ExecutionContext:
    if exit_code is None:
        exit_code = 0 if state is JobState.COMPLETED else 1
    return ExecutionContext(
        job_id="4242",
        scheduler="slurm",
        cluster="eos",
        state=state,
        exit_code=exit_code,
        start=T0,
        end=T0 + timedelta(minutes=minutes),
        nodes=nodes or NODES,
        gpu_model=gpu_model,
    )


_line = iter(range(1, 1_000_000))


def ob(kind: str, node: str, sec: float | None, **kw: Any) -> Observation:
    """An observation `sec` seconds after job start (None: unknown time)."""
    n = next(_line)
    stream = (
        "kern.log"
        if kind in {"xid", "ib_link_down", "kernel_panic", "host_oom_kill", "lustre_error"}
        else "app.log"
    )
    return Observation(
        kind=kind,
        node=node,
        time=None if sec is None else T0 + timedelta(seconds=sec),
        time_quality="unknown" if sec is None else kw.pop("time_quality", "exact"),
        excerpt=kw.pop("excerpt", f"{kind} line {n}"),
        source="files",
        locator=kw.pop("locator", f"logs/{node}/{stream}:{n}"),
        parser="test",
        **kw,
    )


def timeouts(sec: float, nodes: list[str] | None = None) -> list[Observation]:
    return [
        ob("collective_timeout", n, sec, attrs={"rank": i}) for i, n in enumerate(nodes or NODES)
    ]


def run(
    c: ExecutionContext,
    obs: list[Observation],
    coverage: list[SourceCoverage] | None = None,
    settings: AnalysisSettings | None = None,
) -> AttributionResult:
    result = ENGINE.attribute(
        c, obs, LOGS if coverage is None else coverage, settings or AnalysisSettings()
    )
    # the contract: valid, JSON round-trips, category only when attributed
    again = AttributionResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert (result.category is not None) == (result.status == "attributed")
    times = [lk.time for lk in result.symptom_chain if lk.time is not None]
    assert times == sorted(times)
    return result


# ---- every category ------------------------------------------------------------------

CATEGORY_CASES = [
    (
        "gpu.nvlink",
        JobState.FAILED,
        [ob("xid", "node-b", 185, code=74, pci="0000:18:00")],
        ["node-b"],
    ),
    (
        "gpu.memory",
        JobState.FAILED,
        [ob("xid", "node-c", 185, code=95, pci="0000:01:00")],
        ["node-c"],
    ),
    (
        "gpu.lost",
        JobState.FAILED,
        [ob("xid", "node-b", 191, code=79, pci="0000:91:00")],
        ["node-b"],
    ),
    (
        "gpu.driver",
        JobState.FAILED,
        [ob("xid", "node-d", 150, code=119, pci="0000:61:00")],
        ["node-d"],
    ),
    (
        "network.fabric",
        JobState.FAILED,
        [ob("ib_link_down", "node-c", 170, port="mlx5_2/1")],
        ["node-c"],
    ),
    ("node.down", JobState.FAILED, [ob("kernel_panic", "node-a", 160)], ["node-a"]),
    (
        "node.host_oom",
        JobState.FAILED,
        [
            ob("host_oom_kill", "node-a", 150),
            ob("child_failed", "node-a", 152, attrs={"signal": 9, "exitcode": -9}),
        ],
        ["node-a"],
    ),
    ("storage", JobState.FAILED, [ob("lustre_error", "node-d", 150, attrs={"rc": -5})], ["node-d"]),
    ("app.gpu_oom", JobState.FAILED, [ob("cuda_oom", "node-b", 150, gpu=3)], ["node-b"]),
    (
        "app.error",
        JobState.FAILED,
        [
            ob(
                "traceback",
                "node-a",
                150,
                attrs={"exc_type": "KeyError", "family": "app", "message": "'label'"},
            )
        ],
        ["node-a"],
    ),
    ("scheduler.time_limit", JobState.TIMEOUT, [], []),
    ("scheduler.cancelled", JobState.PREEMPTED, [], []),
]


@pytest.mark.parametrize(
    ("category", "state", "causes", "suspects"), CATEGORY_CASES, ids=[c[0] for c in CATEGORY_CASES]
)
def test_each_category_is_attributed(
    category: str, state: JobState, causes: list[Observation], suspects: list[str]
) -> None:
    # the symptoms come 10 minutes later: NCCL's watchdog fires after its timeout
    obs = causes + timeouts(800) + [ob("nccl_remote_error", "node-a", 801)]
    r = run(ctx(state), obs)
    assert r.status == "attributed", (r.summary, r.notes)
    assert r.category == category
    assert r.suspect_nodes == suspects
    assert r.failed is True
    assert r.rules_version == ENGINE.rules_version
    assert (r.cluster, r.state) == ("eos", state.value)
    assert 0 < (r.confidence or 0) <= 1
    assert r.rule and r.remediation and r.summary
    roots = [lk for lk in r.symptom_chain if lk.role == "root_cause"]
    assert roots and {lk.node for lk in roots if lk.node in NODES} == set(suspects)
    assert all(lk.role == "symptom" for lk in r.symptom_chain if lk.kind == "collective_timeout")


def test_xid79_summary_reads_like_a_human_wrote_it() -> None:
    r = run(
        ctx(),
        [ob("xid", "node-b", 191, code=79, pci="0000:91:00")]
        + timeouts(200, ["node-a", "node-c", "node-d"]),
    )
    assert r.summary is not None
    assert "XID 79" in r.summary and "node-b" in r.summary and "0000:91:00" in r.summary
    assert "10:03:11Z" in r.summary and "9 s before NCCL timeouts on 3 nodes" in r.summary
    assert [s.pci for s in r.suspects] == ["0000:91:00"]


# ---- ambiguity -----------------------------------------------------------------------


def test_two_hardware_faults_on_two_nodes_are_ambiguous() -> None:
    obs = [
        ob("xid", "node-b", 191, code=79, pci="0000:91:00"),
        ob("ib_link_down", "node-c", 215, port="mlx5_0/1"),
    ]
    r = run(ctx(), obs + timeouts(800))
    assert r.status == "ambiguous"
    assert r.category is None
    assert {c.category for c in r.candidates} == {"gpu.lost", "network.fabric"}
    assert r.suspect_nodes == ["node-b", "node-c"]
    scores = [c.score for c in r.candidates]
    assert scores == sorted(scores, reverse=True)
    assert {c.nodes[0] for c in r.candidates} == {"node-b", "node-c"}
    assert {lk.node for lk in r.symptom_chain if lk.role == "root_cause"} == {"node-b", "node-c"}


def test_same_category_on_two_nodes_is_one_attribution_with_both_suspects() -> None:
    # the category is not in doubt, only the place: attributed, both nodes suspect (the
    # FIELD-FACTS ambiguity triggers are all about *which cause*, not which of two nodes)
    obs = [ob("xid", "node-b", 191, code=79), ob("xid", "node-c", 192, code=79)]
    r = run(ctx(), obs + timeouts(800))
    assert (r.status, r.category) == ("attributed", "gpu.lost")
    assert r.candidates == []
    assert r.suspect_nodes == ["node-b", "node-c"]
    assert {lk.node for lk in r.symptom_chain if lk.role == "root_cause"} == {"node-b", "node-c"}


def test_ambiguity_groups_same_category_candidates() -> None:
    obs = [
        ob("xid", "node-b", 191, code=79),
        ob("xid", "node-c", 191, code=79),
        ob("ib_link_down", "node-d", 191),
    ]
    r = run(ctx(), obs + timeouts(800))
    assert r.status == "ambiguous"  # two kinds of cause: one candidate per category
    assert sorted(c.category for c in r.candidates) == ["gpu.lost", "network.fabric"]
    lost = next(c for c in r.candidates if c.category == "gpu.lost")
    assert sorted(lost.nodes) == ["node-b", "node-c"]
    assert sorted(r.suspect_nodes) == ["node-b", "node-c", "node-d"]


def test_xid_explains_later_ib_retry_errors_elsewhere() -> None:
    obs = [ob("xid", "node-b", 191, code=79)] + [
        ob("ib_completion_error", n, 200, attrs={"status": 12}, peer="10.0.0.2")
        for n in ("node-a", "node-c", "node-d")
    ]
    r = run(ctx(), obs + timeouts(800))
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-b"])
    ib = [lk for lk in r.symptom_chain if lk.kind == "ib_completion_error"]
    assert len(ib) == 3 and all(lk.role == "symptom" for lk in ib)


def test_ib_retry_errors_alone_are_a_weak_fabric_cause_without_a_suspect() -> None:
    obs = [ob("ib_completion_error", n, 200, attrs={"status": 12}) for n in ("node-a", "node-c")]
    r = run(ctx(), obs + timeouts(800))
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "network.fabric", [])
    strong = run(ctx(), [ob("ib_link_down", "node-c", 190)] + timeouts(800))
    assert (r.confidence or 0) < (strong.confidence or 0)


def test_specificity_beats_volume() -> None:
    noise = [
        ob("ib_completion_error", NODES[i % 4], 200 + i, attrs={"status": 12}) for i in range(50)
    ]
    noise += [ob("collective_timeout", NODES[i % 4], 800 + i) for i in range(50)]
    r = run(ctx(), noise + [ob("xid", "node-d", 185, code=94, pci="0000:9b:00")])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.memory", ["node-d"])


# ---- shared causes -------------------------------------------------------------------


def test_link_down_on_four_nodes_in_one_second_is_a_shared_switch() -> None:
    obs = [ob("ib_link_down", n, 300 + i * 0.2, port="mlx5_0/1") for i, n in enumerate(NODES)]
    r = run(ctx(), obs + timeouts(900))
    assert (r.status, r.category, r.scope) == ("attributed", "network.fabric", "shared")
    assert r.suspect_nodes == []
    assert r.suspects == []
    assert "switch" in (r.summary or "")
    assert any("switch" in n and all(x in n for x in NODES) for n in r.notes)


def test_lustre_enotconn_on_every_node_is_shared_storage() -> None:
    obs = [
        ob("lustre_error", n, 400 + 3 * i, attrs={"rc": -107, "op": "ost_read"})
        for i, n in enumerate(NODES)
    ]
    obs += [
        ob(
            "traceback",
            "node-a",
            405,
            attrs={
                "family": "io",
                "exc_type": "OSError",
                "message": "[Errno 5] Input/output error",
            },
        )
    ]
    r = run(ctx(), obs + timeouts(1000))
    assert (r.status, r.category, r.scope, r.suspect_nodes) == (
        "attributed",
        "storage",
        "shared",
        [],
    )
    assert "storage" in (r.summary or "")


def test_link_down_on_one_node_of_four_is_not_shared() -> None:
    r = run(ctx(), [ob("ib_link_down", "node-c", 300)] + timeouts(900))
    assert (r.scope, r.suspect_nodes) == ("node", ["node-c"])


def test_link_downs_minutes_apart_are_not_one_switch_event() -> None:
    obs = [ob("ib_link_down", n, 300 + i * 120) for i, n in enumerate(NODES)]
    r = run(ctx(), obs + timeouts(2000))
    assert r.scope != "shared"
    assert r.status in ("attributed", "ambiguous") and r.suspect_nodes


def _app_exc(node: str, sec: float) -> Observation:
    attrs = {"family": "app", "exc_type": "ModuleNotFoundError", "message": "No module named 'x'"}
    return ob("traceback", node, sec, attrs=attrs)


def test_the_same_app_exception_on_every_node_names_no_node() -> None:
    """A crash every rank hits (an import error in the image) is the code's, not a node's."""
    r = run(ctx(), [_app_exc(n, 40 + 0.3 * i) for i, n in enumerate(NODES)])
    assert (r.status, r.category, r.scope, r.suspect_nodes) == (
        "attributed",
        "app.error",
        "shared",
        [],
    )


def test_an_app_exception_on_some_nodes_names_them() -> None:
    r = run(ctx(), [_app_exc("node-b", 40), _app_exc("node-c", 41)] + timeouts(900))
    assert (r.category, r.scope, r.suspect_nodes) == ("app.error", "node", ["node-b", "node-c"])


def test_app_exceptions_on_every_node_far_apart_are_not_shared() -> None:
    r = run(ctx(), [_app_exc(n, 40 + 300 * i) for i, n in enumerate(NODES)])
    assert r.scope != "shared" and r.suspect_nodes


# ---- unattributed and not_failed -----------------------------------------------------


def test_only_nccl_timeouts_is_unattributed_and_says_what_was_missing() -> None:
    coverage = [
        SourceCoverage(
            source="files:logs",
            status="partial",
            nodes_read=["node-a", "node-b", "node-d"],
            nodes_missing=["node-c"],
            errors=["logs/node-a/kern.log.gz: corrupt gzip"],
        )
    ]
    r = run(ctx(), timeouts(800) + [ob("watchdog_failure", "node-a", 801)], coverage=coverage)
    assert (r.status, r.category, r.suspect_nodes) == ("unattributed", None, [])
    assert r.symptom_chain and all(lk.role == "symptom" for lk in r.symptom_chain)
    notes = " | ".join(r.notes)
    assert "node-c" in notes and "corrupt gzip" in notes and "metrics not provided" in notes
    assert r.coverage == coverage


def test_a_lone_nccl_warn_is_too_thin() -> None:
    r = run(ctx(), [ob("nccl_warn", "node-a", 300)])
    assert r.status == "unattributed"


def test_nothing_at_all_is_unattributed() -> None:
    r = run(ctx(), [])
    assert (r.status, r.symptom_chain, r.evidence) == ("unattributed", [], [])


def test_plain_failed_state_alone_is_unattributed() -> None:
    r = run(ctx(JobState.FAILED), timeouts(600))
    assert r.status == "unattributed"
    assert all(lk.kind != "job_state" for lk in r.symptom_chain)


def test_completed_job_with_a_transient_error_is_not_failed() -> None:
    obs = [
        ob("ib_link_down", "node-b", 300),
        ob("ib_link_up", "node-b", 302),
        ob("nccl_warn", "node-b", 303),
    ]
    r = run(ctx(JobState.COMPLETED), obs)
    assert (r.status, r.failed, r.category, r.suspect_nodes) == ("not_failed", False, None, [])
    assert [lk.kind for lk in r.symptom_chain] == ["ib_link_down", "nccl_warn"]
    assert all(lk.role == "symptom" for lk in r.symptom_chain)
    assert any("completed" in n for n in r.notes)


def test_completed_state_with_nonzero_exit_is_a_failure() -> None:
    r = run(ctx(JobState.COMPLETED, exit_code=3), [ob("cuda_oom", "node-a", 300)])
    assert r.failed and (r.status, r.category) == ("attributed", "app.gpu_oom")


# ---- scheduler state as evidence -----------------------------------------------------


def test_timeout_caused_by_an_earlier_xid_is_the_xid() -> None:
    obs = [ob("xid", "node-b", 30 * 60, code=79)] + timeouts(40 * 60)
    r = run(ctx(JobState.TIMEOUT, minutes=90), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-b"])
    assert any(lk.kind == "job_state" and lk.role == "symptom" for lk in r.symptom_chain)


@pytest.mark.parametrize("state", [JobState.NODE_FAIL, JobState.CANCELLED])
def test_node_failure_after_an_xid_is_the_xid(state: JobState) -> None:
    obs = [
        ob("xid", "node-b", 600, code=79),
        ob("slurm_cancelled", "node-a", 3000, attrs={"reason": "node_failure"}),
    ]
    r = run(ctx(state), obs + timeouts(1200))
    assert (r.status, r.category) == ("attributed", "gpu.lost")


def test_hung_job_with_only_nccl_timeouts_hit_its_time_limit() -> None:
    obs = timeouts(1200) + [ob("slurm_cancelled", "node-a", 3600, attrs={"reason": "time_limit"})]
    r = run(ctx(JobState.TIMEOUT), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "scheduler.time_limit", [])


def test_user_cancel_is_scheduler_cancelled_but_plain_cancel_in_failed_job_is_teardown() -> None:
    line = ob("slurm_cancelled", "node-a", 3000, attrs={"reason": "none"})
    assert run(ctx(JobState.CANCELLED), [line]).category == "scheduler.cancelled"
    failed = run(ctx(JobState.FAILED), [line] + timeouts(2900))
    assert failed.status == "unattributed"
    assert any(lk.kind == "slurm_cancelled" and lk.role == "symptom" for lk in failed.symptom_chain)


def test_out_of_memory_state_is_located_by_the_kernel_oom_line() -> None:
    obs = [
        ob("host_oom_kill", "node-b", 500),
        ob("child_failed", "node-b", 501, attrs={"signal": 9}),
    ]
    r = run(ctx(JobState.OUT_OF_MEMORY), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "node.host_oom", ["node-b"])


def test_preemption_line_is_scheduler_cancelled() -> None:
    obs = [ob("slurm_cancelled", "node-a", 3000, attrs={"reason": "preemption"})] + timeouts(3001)
    r = run(ctx(JobState.PREEMPTED), obs)
    assert (r.status, r.category) == ("attributed", "scheduler.cancelled")


# ---- time: clock skew, windows, unknown times ----------------------------------------


def test_cause_three_seconds_after_a_symptom_on_another_node_still_wins() -> None:
    obs = [ob("nccl_remote_error", "node-a", 600), ob("xid", "node-b", 603, code=79)] + timeouts(
        605
    )
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-b"])


def test_cause_a_minute_after_the_symptoms_is_a_consequence() -> None:
    obs = [ob("nccl_remote_error", "node-a", 600), ob("xid", "node-b", 660, code=79)] + timeouts(
        605
    )
    r = run(ctx(), obs)
    assert r.status == "unattributed"
    assert any("after the first symptom" in n for n in r.notes)


def test_skew_setting_is_honoured() -> None:
    obs = [ob("nccl_remote_error", "node-a", 600), ob("xid", "node-b", 620, code=79)]
    assert run(ctx(), obs).status == "unattributed"
    wide = run(ctx(), obs, settings=AnalysisSettings(skew_seconds=30))
    assert (wide.status, wide.category) == ("attributed", "gpu.lost")


def test_scraped_metric_gets_scrape_interval_tolerance() -> None:
    obs = [
        ob("nccl_remote_error", "node-a", 600),
        ob(
            "xid",
            "node-b",
            620,
            code=79,
            gpu=3,
            attrs={"origin": "dcgm"},
            locator="promql: DCGM_FI_DEV_XID_ERRORS @ 1793613791",
        ),
    ]
    r = run(ctx(), obs)
    assert (r.status, r.category) == ("attributed", "gpu.lost")
    assert r.evidence[0].locator.startswith("promql:")


def test_events_before_the_window_or_on_other_nodes_are_never_the_cause() -> None:
    early = ob("xid", "node-b", -3600, code=79)  # an hour before start: outside the lead window
    stranger = ob("xid", "node-z", 300, code=79)  # not one of the job's nodes
    r = run(ctx(), [early, stranger] + timeouts(800))
    assert r.status == "unattributed"
    assert all(lk.kind != "xid" for lk in r.symptom_chain)
    notes = " | ".join(r.notes)
    assert "node-z" in notes and "outside the analysis window" in notes


def test_event_inside_the_lead_window_counts() -> None:
    r = run(ctx(), [ob("xid", "node-b", -60, code=79)] + timeouts(600))
    assert (r.status, r.category) == ("attributed", "gpu.lost")


def test_short_hostnames_map_onto_job_nodes() -> None:
    c = ctx(nodes=["node-a.cluster.local", "node-b.cluster.local"])
    r = run(c, [ob("xid", "node-b", 190, code=79)] + timeouts(600, ["node-a.cluster.local"]))
    assert r.suspect_nodes == ["node-b.cluster.local"]


def test_untimed_cause_wins_only_when_nothing_timed_fits() -> None:
    app = ob(
        "traceback",
        "node-a",
        None,
        attrs={"family": "app", "exc_type": "ValueError", "message": "bad"},
    )
    alone = run(ctx(), [app] + timeouts(800))
    assert (alone.status, alone.category) == ("attributed", "app.error")
    timed_app = run(
        ctx(), [ob("traceback", "node-a", 700, attrs={"family": "app"})] + timeouts(800)
    )
    assert (alone.confidence or 0) < (timed_app.confidence or 0)
    with_xid = run(ctx(), [app, ob("xid", "node-b", 300, code=79)] + timeouts(800))
    assert (with_xid.status, with_xid.category) == ("attributed", "gpu.lost")
    # an untimed line lies in the job window; as a symptom it cannot precede its cause: shown
    # as the interval from the cause to the job end, never before the XID
    tb = next(lk for lk in with_xid.symptom_chain if lk.kind == "traceback")
    xid = next(lk for lk in with_xid.symptom_chain if lk.kind == "xid")
    assert tb.time == xid.time and tb.time_latest is not None and tb.time_latest > xid.time


def test_app_error_on_one_rank_while_others_time_out() -> None:
    obs = [
        ob("traceback", "node-c", 700, attrs={"family": "app", "exc_type": "AssertionError"}),
        ob("traceback", "node-a", 1300, attrs={"family": "nccl"}),
    ] + timeouts(1300, ["node-a", "node-b", "node-d"])
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["node-c"])


# ---- GPU model applicability, noise --------------------------------------------------


def test_nonfatal_nvlink_xid_is_noise() -> None:
    obs = [
        ob("xid", "node-b", 300, code=149, attrs={"fatal": False, "mnemonic": "NETIR_BER_EVENT"})
    ]
    r = run(ctx(gpu_model="GB200"), obs + timeouts(900))
    assert r.status == "unattributed"
    assert all(lk.kind != "xid" for lk in r.symptom_chain)


@pytest.mark.parametrize(
    ("model", "fires"),
    [("GB200", True), ("B200", True), (None, True), ("H100", False), ("A100", False)],
)
def test_nvlink5_xids_apply_to_blackwell_or_unknown_models(model: str | None, fires: bool) -> None:
    obs = [ob("xid", "node-b", 300, code=149, port="Link 01", attrs={"fatal": True})]
    r = run(ctx(gpu_model=model), obs + timeouts(900))
    if fires:
        assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.nvlink", ["node-b"])
    else:
        assert r.status == "unattributed"
        assert any(lk.kind == "xid" and lk.role == "symptom" for lk in r.symptom_chain)


def test_corrected_aer_and_a_lone_xid63_explain_nothing() -> None:
    obs = [
        ob("pcie_aer", "node-a", 300, attrs={"severity": "corrected"}),
        ob("xid", "node-a", 301, code=63),
    ]
    r = run(ctx(), obs)
    assert r.status == "unattributed"
    assert all(lk.kind != "pcie_aer" for lk in r.symptom_chain)


def test_xid63_is_a_fallback_cause_only() -> None:
    """A row remap that succeeded is healthy noise next to any other cause; alone before the
    symptoms it is the spec's gpu.memory example."""
    remap = ob("xid", "node-b", 300, code=63, pci="0000:1b:00")
    alone = run(ctx(), [remap, *timeouts(900)])
    assert (alone.status, alone.category, alone.suspect_nodes) == (
        "attributed",
        "gpu.memory",
        ["node-b"],
    )
    app_bug = ob("traceback", "node-a", 880, attrs={"family": "app", "exc_type": "KeyError"})
    with_app = run(ctx(), [remap, app_bug, *timeouts(900)])
    assert with_app.category != "gpu.memory"
    assert all(c.category != "gpu.memory" for c in with_app.candidates)
    timeout = run(ctx(state=JobState.TIMEOUT), [remap, *timeouts(900)])
    assert timeout.category != "gpu.memory"


def test_xid13_burst_on_one_gpc_raises_a_hardware_note() -> None:
    obs = [
        ob("xid", "node-b", 300 + i, code=13, pci="0000:1b:00", attrs={"gpc": 10}) for i in range(4)
    ]
    r = run(ctx(), obs + timeouts(900))
    assert r.category == "app.error"
    assert any("defective SM" in n for n in r.notes)
    single = run(ctx(), obs[:1] + timeouts(900))
    assert not any("defective SM" in n for n in single.notes)


def test_secondary_xids_follow_the_real_one() -> None:
    obs = [ob("xid", "node-b", 300, code=45), ob("xid", "node-b", 299, code=48, pci="0000:01:00")]
    r = run(ctx(), obs + timeouts(900))
    assert r.category == "gpu.memory"
    assert any(lk.kind == "xid" and lk.role == "symptom" for lk in r.symptom_chain)


# ---- the chain and evidence ----------------------------------------------------------


def test_chain_is_time_ordered_with_roles_and_folds_repeats() -> None:
    xid = ob("xid", "node-b", 191, code=79, pci="0000:91:00", locator="logs/node-b/kern.log:1532")
    repeats = [ob("collective_timeout", "node-a", 800 + i, gpu=0) for i in range(5)]
    r = run(ctx(), [*repeats, xid, ob("nccl_remote_error", "node-c", 805)])
    first = r.symptom_chain[0]
    assert (first.role, first.kind, first.node, first.pci) == (
        "root_cause",
        "xid",
        "node-b",
        "0000:91:00",
    )
    folded = [lk for lk in r.symptom_chain if lk.kind == "collective_timeout"]
    assert len(folded) == 1 and folded[0].count == 5
    assert folded[0].time == T0 + timedelta(seconds=800)
    assert [lk.role for lk in r.symptom_chain].count("root_cause") == 1
    assert r.evidence[0].locator == "logs/node-b/kern.log:1532"
    assert r.evidence[0].excerpt == xid.excerpt
    assert first.evidence.locator == "logs/node-b/kern.log:1532"


def test_evidence_points_back_to_the_input_lines() -> None:
    obs = [ob("xid", "node-b", 191, code=79)] + timeouts(800)
    r = run(ctx(), obs)
    assert {e.locator for e in r.evidence} <= {str(o.locator) for o in obs}
    assert {e.ref for e in r.evidence} <= {o.locator for o in obs}
    assert len(r.evidence) == len(r.symptom_chain)


def test_chain_is_capped_but_keeps_root_and_one_link_per_node() -> None:
    nodes = [f"n{i:03d}" for i in range(80)]
    obs = [ob("xid", "n042", 100, code=79)]
    obs += [
        ob("collective_timeout", n, 800 + i, gpu=g) for i, n in enumerate(nodes) for g in range(2)
    ]
    r = run(ctx(nodes=nodes), obs)
    assert r.category == "gpu.lost"
    assert len(r.symptom_chain) <= ENGINE.tuning.max_chain_links
    assert r.symptom_chain[0].role == "root_cause"
    assert r.symptom_chain[1].node == "n000"  # earliest symptoms kept


def test_result_serializes_to_the_contract() -> None:
    r = run(ctx(), [ob("xid", "node-b", 191, code=79)] + timeouts(800))
    data = json.loads(r.contract_json())
    assert CONTRACT_FIELDS <= set(data), CONTRACT_FIELDS - set(data)
    link = data["symptom_chain"][0]
    assert set(link) >= {"time", "node", "kind", "role", "summary", "evidence"}
    assert set(link["evidence"]) >= {"source", "locator", "time", "node", "excerpt"}
    assert link["time"].startswith("2026-11-02T10:03:11")


def test_naive_observation_times_are_read_as_utc() -> None:
    naive = ob("xid", "node-b", 191, code=79).model_copy(
        update={"time": datetime(2026, 11, 2, 10, 3, 11)}
    )
    r = run(ctx(), [naive] + timeouts(800))
    assert r.category == "gpu.lost"


# ---- inherited times are lower bounds ------------------------------------------------


def test_inherited_symptom_times_cannot_make_a_cause_late() -> None:
    # app.log lines borrowed the time of the first timed line: they look early but are not
    symptoms = [ob("collective_timeout", n, 10, time_quality="inherited") for n in NODES]
    r = run(ctx(), [*symptoms, ob("xid", "node-b", 300, code=79)])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-b"])
    assert not any("after the first symptom" in n for n in r.notes)


def test_inherited_cause_after_an_exact_symptom_is_still_late() -> None:
    cause = ob("xid", "node-b", 700, code=79, time_quality="inherited")
    r = run(ctx(), [ob("nccl_remote_error", "node-a", 600), cause])
    assert r.status == "unattributed"


def test_inherited_cause_summary_does_not_claim_an_exact_time() -> None:
    cause = ob("cuda_oom", "node-b", 300, gpu=1, time_quality="inherited")
    r = run(ctx(), [cause, *timeouts(800)])
    assert r.category == "app.gpu_oom"
    assert "logged after" in (r.summary or "") and "before" not in (r.summary or "")


def test_scheduler_line_with_an_inherited_time_still_yields_to_the_xid() -> None:
    line = ob(
        "slurm_cancelled", "node-a", 1, attrs={"reason": "time_limit"}, time_quality="inherited"
    )
    r = run(ctx(JobState.TIMEOUT), [line, ob("xid", "node-c", 900, code=79)] + timeouts(1500))
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-c"])
    assert not any("ranked lower" in n for n in r.notes)


# ---- templates and orchestrator evidence ----------------------------------------------


def test_summary_template_falls_back_through_alternatives() -> None:
    by_victim = ob("host_oom_kill", "node-a", 300, attrs={"victim": "python"})
    r = run(ctx(), [by_victim, *timeouts(800)])
    assert "process python" in (r.summary or "")
    bare = run(ctx(), [ob("host_oom_kill", "node-a", 300), *timeouts(800)])
    assert "process unknown" in (bare.summary or "")


@pytest.mark.parametrize(
    ("attrs", "category", "suspects"),
    [
        ({"reason": "node_pressure", "resource": "memory"}, "node.host_oom", ["node-b"]),
        ({"reason": "taint"}, "node.down", ["node-b"]),
        ({"reason": "preempted"}, "scheduler.cancelled", []),
        ({"reason": "pods_ready_timeout"}, "scheduler.cancelled", []),  # Kueue eviction
    ],
)
def test_kubernetes_evictions(attrs: dict[str, str], category: str, suspects: list[str]) -> None:
    r = run(ctx(), [ob("k8s_evicted", "node-b", 300, attrs=attrs), *timeouts(310)])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", category, suspects)


# --- held-out batch 8: storage blips that cleared, causes after a cancel --------------------


def test_storage_outage_that_cleared_long_before_the_failure_is_a_blip() -> None:
    nfs = [ob("nfs_error", n, 60, attrs={"server": "nas1"}) for n in ("node-a", "node-b")]
    ok = [ob("storage_recovered", n, 90, attrs={"fs": "nfs"}) for n in ("node-a", "node-b")]
    app = ob("traceback", "node-b", 3000, attrs={"exc_type": "KeyError", "family": "app"})
    exits = [ob("nccl_remote_error", "node-a", 3005)]
    r = run(ctx(nodes=["node-a", "node-b"]), [*nfs, *ok, app, *exits])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["node-b"])
    assert any("transient blip" in n for n in r.notes)


def test_storage_outage_still_counts_when_it_cleared_only_at_the_failure() -> None:
    nfs = [ob("nfs_error", n, 60) for n in ("node-a", "node-b")]
    ok = [ob("storage_recovered", n, 2990, attrs={"fs": "nfs"}) for n in ("node-a", "node-b")]
    r = run(ctx(nodes=["node-a", "node-b"]), [*nfs, *ok, *timeouts(3000, ["node-a", "node-b"])])
    assert (r.status, r.category) == ("attributed", "storage")


def test_a_recovery_of_another_filesystem_does_not_clear_the_outage() -> None:
    lustre = [ob("lustre_error", n, 60, attrs={"rc": -107}) for n in ("node-a", "node-b")]
    ok = [ob("storage_recovered", n, 90, attrs={"fs": "nfs"}) for n in ("node-a", "node-b")]
    r = run(ctx(nodes=["node-a", "node-b"]), [*lustre, *ok, *timeouts(900, ["node-a", "node-b"])])
    assert (r.status, r.category) == ("attributed", "storage")
    assert not any("transient blip" in n for n in r.notes)


def test_a_fault_logged_after_a_user_cancel_is_teardown() -> None:
    cancel = ob("slurm_cancelled", "node-a", 600, attrs={"reason": "none"})
    seg = ob("segfault", "node-c", 603, attrs={"library": "libnccl.so.2"})
    after = [ob("nccl_remote_error", "node-b", 601)]
    r = run(ctx(JobState.CANCELLED), [cancel, *after, seg])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "scheduler.cancelled", [])
    assert any("teardown" in n for n in r.notes)


def test_a_fault_well_before_a_user_cancel_still_outranks_it() -> None:
    xid = ob("xid", "node-c", 60, code=79)
    cancel = ob("slurm_cancelled", "node-a", 1500, attrs={"reason": "none"})
    r = run(ctx(JobState.CANCELLED), [xid, *timeouts(700), cancel])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["node-c"])


def test_lustre_eviction_on_every_node_is_shared_storage_and_named_so() -> None:
    """LustreError 167-0 (client evicted, no rc) on every node within seconds: shared storage,
    no suspect; the summary says evicted instead of an unknown rc."""
    obs = [
        ob("lustre_error", n, 600 + i, attrs={"event": "evicted", "target": "lfs1-OST001c"})
        for i, n in enumerate(NODES)
    ] + [ob("collective_timeout", n, 1200) for n in NODES]
    res = ENGINE.attribute(ctx(), obs, LOGS)
    assert (res.status, res.category, res.suspect_nodes) == ("attributed", "storage", [])
    root = next(lk for lk in res.symptom_chain if lk.role == "root_cause")
    assert "Lustre evicted on" in root.summary and "lfs1-OST001c" in root.summary
