"""Issue 9, item 4: training progress decides whether a fault stopped the job.

A fault followed by minutes of progress (on the nodes it hit, else the job) is demoted; a fault
after which progress stopped stays the cause, and for TIMEOUT the stall is named. The files
scanner keeps each file's last progress line without making progress lines prefilter hits.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec
from attribution_dagster.core.observation import Observation
from attribution_dagster.pipeline import catalog
from attribution_dagster.rules.engine import load_engine

ENGINE = load_engine()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
NODES = ["a", "b", "c"]
_n = iter(range(1, 10**6))


def ctx(state: JobState = JobState.FAILED, hours: float = 1) -> ExecutionContext:
    return ExecutionContext(
        job_id="p",
        scheduler="slurm",
        state=state,
        exit_code=1 if state is JobState.FAILED else None,
        start=T0,
        end=T0 + timedelta(hours=hours),
        nodes=NODES,
    )


def ob(kind: str, node: str, minute: float, **kw: Any) -> Observation:
    return Observation(
        kind=kind,
        node=node,
        time=T0 + timedelta(minutes=minute),
        excerpt=f"{kind} line",
        source="files",
        locator=f"logs/{node}/x.log:{next(_n)}",
        parser="test",
        **kw,
    )


def steps(until: float, nodes: list[str] = NODES) -> list[Observation]:
    return [ob("progress", n, until, attrs={"step": int(until * 10)}) for n in nodes]


def test_fault_followed_by_progress_is_not_the_cause() -> None:
    ecc = ob("xid", "a", 5, code=94)
    app = ob("traceback", "c", 41, attrs={"family": "app", "exc_type": "ZeroDivisionError"})
    r = ENGINE.attribute(ctx(), [ecc, app, *steps(40)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["c"])
    assert any("training went on" in n for n in r.notes)


def test_fault_after_which_progress_stops_stays_the_cause() -> None:
    ecc = ob("xid", "a", 20, code=94)
    timeouts = [ob("collective_timeout", n, 30) for n in NODES]
    r = ENGINE.attribute(ctx(), [ecc, *timeouts, *steps(19.5)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.memory", ["a"])
    assert any(n.startswith("training stalled") for n in r.notes)


def test_timeout_is_the_verdict_when_training_went_on_after_the_fault() -> None:
    flap = ob("ib_link_down", "b", 5, port="ibp24s0")
    r = ENGINE.attribute(ctx(JobState.TIMEOUT, 2), [flap, *steps(118)], [])
    assert (r.status, r.category) == ("attributed", "scheduler.time_limit")


def test_timeout_after_a_stalling_fault_names_the_fault_and_the_stall() -> None:
    gsp = ob("xid", "b", 20.5, code=119)
    r = ENGINE.attribute(ctx(JobState.TIMEOUT, 2), [gsp, *steps(20.1)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.driver", ["b"])
    stall = next(n for n in r.notes if n.startswith("training stalled"))
    assert "TIMEOUT" in stall and "step 201" in stall


def test_progress_on_other_nodes_does_not_excuse_a_fault_whose_own_node_stopped() -> None:
    """Progress is read on the nodes the fault hit when they have progress lines."""
    ecc = ob("xid", "a", 20, code=94)
    obs = [ecc, *steps(19.8, ["a"]), *steps(40, ["b", "c"])]
    obs += [ob("collective_timeout", n, 30) for n in ("b", "c")]
    r = ENGINE.attribute(ctx(), obs, [])
    assert (r.category, r.suspect_nodes) == ("gpu.memory", ["a"])


def test_a_crash_training_restarted_from_does_not_make_a_later_fault_late() -> None:
    """An XID 94 kills a rank (traceback), torchrun restarts, training runs 50 min, then a link
    goes down and the peers fail: the early traceback is not the failure onset, so the link
    down is not `a consequence of it` and wins over the demoted XID."""
    ecc = ob("xid", "a", 5, code=94)
    crash = ob("traceback", "a", 5.1, attrs={"family": "cuda", "exc_type": "RuntimeError"})
    down = ob("ib_link_down", "c", 56, port="mlx5_1/1")
    fails = [ob("collective_timeout", n, 57) for n in NODES]
    r = ENGINE.attribute(ctx(), [ecc, crash, down, *fails, *steps(55)], [])
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "network.fabric", ["c"])
    # the same link down with no progress after the crash stays a late consequence
    r = ENGINE.attribute(ctx(), [ecc, crash, down, *fails, *steps(4)], [])
    assert (r.category, r.suspect_nodes) == ("gpu.memory", ["a"])


def test_scanner_keeps_only_the_last_progress_line_per_file() -> None:
    anchors = catalog().anchors(last_only=True)
    hits = [a for a in anchors if not a.last_only]
    spec = ScanSpec(
        literals=tuple(a.literal for a in hits),
        context_after=tuple(a.context_after for a in hits),
        last_literals=tuple(a.literal for a in anchors if a.last_only),
        window_start=T0 - timedelta(hours=1),
        window_end=T0 + timedelta(hours=2),
        reference=T0,
        block_size=256,
    )
    lines = [
        b"2026-11-02 10:%02d:00,000 INFO train.py:212 step=%d loss=2.31 tokens/s=1000" % (m, m)
        for m in range(40)
    ]
    lines += [b"RuntimeError: boom", b"  more text"]
    res = FileScanner(spec).scan_bytes(b"\n".join(lines) + b"\n")
    assert res.progress is not None
    lineno, t, quality, text = res.progress
    assert (lineno, t, quality) == (40, T0 + timedelta(minutes=39), "exact")
    assert "step=39" in text
    assert all("step=" not in r[3] for r in res.records)  # progress lines are not hits
    assert "loss=" not in {a.literal for a in catalog().anchors()}  # nor prefilter anchors
