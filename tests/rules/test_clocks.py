"""Clock offsets learned from lines every node logs at one instant (rules/clocks.py).

Unit tests of the estimator (agreeing / disagreeing groups, a node missing from a group, the
skew tolerance, small offsets), of `apply` (what it shifts and what it leaves alone), and an
end-to-end case written here: a host OOM on a node whose clock runs 60 s ahead is read as the
cause once its slurmd step-launch line is compared with its peers', and as a late consequence
without it. The anchor line formats are slurmd's `launch task StepId=...` (Slurm >= 20.11) and
NCCL's `commId 0x... - Init COMPLETE`, as in /work/shared/reference and parsers.yaml.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from attribution_dagster.core.observation import Observation
from attribution_dagster.pipeline import analyze_case
from attribution_dagster.rules.engine.clocks import Anchor, anchors_of, apply, estimate

UTC = timezone.utc
T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def _group(anchor: str, key: str, at: datetime, offsets: dict[str, float]) -> list[Anchor]:
    return [Anchor(n, anchor, key, at + timedelta(seconds=s)) for n, s in offsets.items()]


def test_two_groups_agreeing_correct_the_node_that_is_ahead() -> None:
    anchors = _group("slurm_step", "77.0", T0, {"a": 0, "b": 0.4, "c": -0.3, "d": 90})
    anchors += _group(
        "nccl_init", "0x1f", T0 + timedelta(minutes=2), {"a": 0.1, "b": 0, "c": 0, "d": 90.2}
    )
    est = estimate(anchors, tolerance=5)
    assert set(est.offsets) == {"d"}
    assert abs(est.offsets["d"] - 90) < 0.5  # anchors are good to about a second
    assert est.groups == 2
    (note,) = est.notes
    assert note.startswith(
        "d's clock reads 90 s ahead of the others (slurmd step launch 77.0, 4 nodes"
    )
    assert "corrected by -90 s" in note


def test_a_clock_behind_is_corrected_forward() -> None:
    est = estimate(_group("slurm_step", "9.0", T0, {"a": 0, "b": 0, "c": -30}), tolerance=5)
    assert est.offsets == {"c": -30.0}
    assert "30 s behind the others" in est.notes[0] and "corrected by +30 s" in est.notes[0]


def test_disagreeing_groups_leave_the_node_uncorrected_and_say_why() -> None:
    anchors = _group("slurm_step", "77.0", T0, {"a": 0, "b": 0, "c": 0, "d": 90})
    # later the clock was stepped back (NTP): the second event shows d in step
    anchors += _group(
        "slurm_step", "77.1", T0 + timedelta(hours=1), {"a": 0, "b": 0, "c": 0, "d": 0}
    )
    anchors += _group(
        "nccl_init", "0x2e", T0 + timedelta(hours=1), {"a": 0, "b": 0, "c": 0, "d": 1}
    )
    est = estimate(anchors, tolerance=5)
    assert est.offsets == {}
    (note,) = est.notes
    assert note.startswith("d's clock is not corrected: its anchors disagree")
    assert "slurmd step launch 77.0 says 90 s" in note and "read as logged" in note


def test_a_node_missing_from_a_group_keeps_the_offset_the_others_give_it() -> None:
    # the widest group covers all four; a smaller one (c's NCCL line untimed) only a, b, d:
    # its reference comes from the nodes already estimated, not from its own (skewed) median
    anchors = _group("slurm_step", "5.0", T0, {"a": 0, "b": 0, "c": 0, "d": 45})
    anchors += _group("nccl_init", "0x3", T0 + timedelta(seconds=30), {"a": 0, "d": 45})
    anchors += [Anchor("c", "slurm_step", "lonely.0", T0)]  # one node: not a group
    est = estimate(anchors, tolerance=5)
    assert est.groups == 2
    assert est.offsets == {"d": 45.0}
    assert "1 more anchor(s)" in est.notes[0]


def test_only_a_smaller_group_still_corrects_relative_to_its_median() -> None:
    est = estimate(_group("nccl_init", "0x9", T0, {"a": 0, "b": 0, "d": 20}), tolerance=5)
    assert est.offsets == {"d": 20.0}


def test_a_two_node_group_splits_the_gap() -> None:
    est = estimate(_group("slurm_step", "3.0", T0, {"a": 0, "b": 40}), tolerance=5)
    assert est.offsets == {"a": -20.0, "b": 20.0}  # which one is wrong is unknowable


def test_the_tolerance_is_respected() -> None:
    anchors = _group("slurm_step", "1.0", T0, {"a": 0, "b": 0, "c": 7})
    assert estimate(anchors, tolerance=5).offsets == {"c": 7.0}
    assert estimate(anchors, tolerance=10).offsets == {}
    assert estimate(anchors, tolerance=10).notes == []


def test_small_offsets_are_left_alone() -> None:
    anchors = _group("slurm_step", "1.0", T0, {"a": 0, "b": 1.2, "c": -0.8, "d": 2.5})
    anchors += _group("nccl_init", "0x1", T0, {"a": 0.3, "b": 0, "c": 0, "d": 0})
    est = estimate(anchors, tolerance=5)
    assert est.offsets == {} and est.notes == []


def test_repeated_lines_of_one_node_count_once_earliest() -> None:
    # eight local ranks log Init COMPLETE on each node within milliseconds
    anchors = _group("nccl_init", "0x7", T0, {"a": 0, "b": 0, "c": 60})
    anchors += [Anchor("c", "nccl_init", "0x7", T0 + timedelta(seconds=60.5 + i)) for i in range(7)]
    assert estimate(anchors, tolerance=5).offsets == {"c": 60.0}


def _obs(kind: str, node: str, t: datetime | None, **kw) -> Observation:  # type: ignore[no-untyped-def]
    return Observation(
        kind=kind,
        node=node,
        time=t,
        excerpt=kw.pop("excerpt", "line"),
        source="files:logs",
        locator=kw.pop("locator", f"logs/{node}/x.log:1"),
        parser="p",
        **kw,
    )


def test_apply_shifts_what_the_node_clock_stamped_and_nothing_else() -> None:
    resolve = {"a": "a", "d": "d", "d.cluster.local": "d"}.get
    t = T0 + timedelta(minutes=5)
    own = _obs("host_oom_kill", "d.cluster.local", t, excerpt="13:21:40 kernel: Out of memory")
    untimed = _obs(
        "traceback", "d", t, time_quality="inherited", time_latest=t + timedelta(seconds=9)
    )
    scrape = _obs("xid", "d", t, attrs={"origin": "dcgm"})
    event = _obs("node_unreachable", "d", t, attrs={"event_reason": "NodeNotReady"})
    via_a = _obs("process_exit", "d", t, attrs={"logged_on": "a"})  # srun on a named d
    from_d = _obs("process_exit", "a", t, attrs={"logged_on": "d"})
    peer = _obs("traceback", "a", t)
    out = apply([own, untimed, scrape, event, via_a, from_d, peer], {"d": 90.0}, resolve)
    back = t - timedelta(seconds=90)
    assert out[0].time == back and out[0].excerpt == own.excerpt and out[0].locator == own.locator
    assert out[1].time == back and out[1].time_latest == t - timedelta(seconds=81)
    assert out[2].time == t and out[3].time == t  # a scrape, an API server's Event
    assert out[4].time == t and out[5].time == back  # the clock of the file the line is in
    assert out[6] is peer
    before_any = _obs("traceback", "d", None, time_quality="unknown", time_latest=t)
    (shifted,) = apply([before_any], {"d": 90.0}, resolve)
    assert shifted.time is None and shifted.time_latest == back
    assert apply([own], {}, resolve)[0] is own


def test_anchors_of_keeps_exact_job_node_anchors_only() -> None:
    resolve = {"a": "a", "b": "b"}.get
    ok = _obs("clock_anchor", "a", T0, attrs={"anchor": "slurm_step", "key": "1.0"})
    inherited = _obs(
        "clock_anchor",
        "b",
        T0,
        time_quality="inherited",
        attrs={"anchor": "nccl_init", "key": "0x1"},
    )
    stranger = _obs("clock_anchor", "zz", T0, attrs={"anchor": "slurm_step", "key": "1.0"})
    keyless = _obs("clock_anchor", "b", T0, attrs={"anchor": "slurm_step"})
    assert anchors_of([ok, inherited, stranger, keyless], resolve) == [
        Anchor("a", "slurm_step", "1.0", T0)
    ]


# -------------------------------------------------------------- end to end (a case written here)
NODES = ["cn-01", "cn-02", "cn-03", "cn-04"]
ADDR = {n: f"10.9.0.{i + 1}" for i, n in enumerate(NODES)}


def _ts(t: datetime, skew: float) -> str:
    return (t + timedelta(seconds=skew)).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _write_case(
    root: Path, skew: float, anchors: bool, second_anchor_skew: float | None = None
) -> Path:
    """cn-04 (clock `skew` s ahead) is OOM-killed at 12:40:00 true; its peers' NCCL errors
    follow at 12:40:20 true. Its journal logs the kill at 12:40:00 + skew."""
    fail = T0 + timedelta(minutes=40)
    (root / "context.json").write_text(
        json.dumps(
            {
                "job_id": "4242",
                "scheduler": "slurm",
                "cluster": "c",
                "state": "FAILED",
                "exit_code": 1,
                "start": T0.isoformat(),
                "end": (fail + timedelta(seconds=40)).isoformat(),
                "nodes": NODES,
                "node_addresses": {n: [a] for n, a in ADDR.items()},
            }
        )
    )
    for i, node in enumerate(NODES):
        d = root / "logs" / node
        d.mkdir(parents=True)
        s = skew if node == "cn-04" else 0.0
        journal = []
        if anchors:
            journal.append(
                f"{_ts(T0 + timedelta(seconds=2), s)} {node} slurmd[311]: slurmd: launch task "
                "StepId=4242.0 request from UID:1000 GID:1000 HOST:10.9.0.100 PORT:4011"
            )
            if second_anchor_skew is not None:
                s2 = second_anchor_skew if node == "cn-04" else 0.0
                journal.append(
                    f"{_ts(T0 + timedelta(minutes=20), s2)} {node} slurmd[311]: slurmd: launch "
                    "task StepId=4242.1 request from UID:1000 GID:1000 HOST:10.9.0.100 PORT:4011"
                )
        if node == "cn-04":
            journal += [
                f"{_ts(fail, s)} {node} kernel: python invoked oom-killer: "
                "gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
                f"{_ts(fail, s)} {node} kernel: Out of memory: Killed process 5120 (python) "
                "total-vm:98233412kB, anon-rss:178821100kB, file-rss:40240kB, shmem-rss:0kB, "
                "UID:1000 pgtables:352830kB oom_score_adj:0",
            ]
            train = [f"{_ts(T0 + timedelta(minutes=39), s)} step 100 | loss 2.1"]
        else:
            t = fail + timedelta(seconds=20)
            peer = ADDR["cn-04"]
            train = [
                f"{_ts(T0 + timedelta(minutes=39), 0)} step 100 | loss 2.1",
                f"{node}:5101:5180 [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got "
                f"completion from peer {peer}<51122> with status=12 opcode=0 len=0 vendor err "
                f"129 (Recv) localGid ::ffff:{ADDR[node]} remoteGids ::ffff:{peer}",
                f"{t.strftime('%Y-%m-%dT%H:%M:%S')}.402000+00:00 [rank{8 * i}]:"
                "[E1102 12:40:20.402000000 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID "
                f"0(default_pg) Rank {8 * i}] Process group watchdog thread terminated with "
                "exception: NCCL error: remote process exited or there was a network error, "
                "NCCL version 2.21.5",
            ]
        (d / "journal.log").write_text("\n".join(journal) + "\n")
        (d / "train.log").write_text("\n".join(train) + "\n")
    return root


def test_a_node_clock_ahead_no_longer_hides_its_own_fault(tmp_path: Path) -> None:
    res = analyze_case(_write_case(tmp_path, skew=60, anchors=True))
    assert (res.status, res.category, res.suspect_nodes) == (
        "attributed",
        "node.host_oom",
        ["cn-04"],
    )
    assert any(
        n.startswith(
            "cn-04's clock reads 60 s ahead of the others (slurmd step launch 4242.0, "
            "4 nodes): its times are corrected by -60 s"
        )
        for n in res.notes
    )
    root = res.symptom_chain[0]
    assert root.role == "root_cause" and root.time == T0 + timedelta(minutes=40)  # corrected
    assert "12:41:00" in Path(tmp_path, root.evidence.locator.rsplit(":", 1)[0]).read_text()


def test_without_anchors_the_same_skew_reads_the_fault_as_a_consequence(tmp_path: Path) -> None:
    res = analyze_case(_write_case(tmp_path, skew=60, anchors=False))
    assert res.category != "node.host_oom"
    assert not any("clock reads" in n for n in res.notes)


def test_disagreeing_anchors_leave_the_times_as_logged(tmp_path: Path) -> None:
    res = analyze_case(_write_case(tmp_path, skew=60, anchors=True, second_anchor_skew=0))
    assert res.category != "node.host_oom"
    assert any(
        n.startswith("cn-04's clock is not corrected: its anchors disagree") for n in res.notes
    )


def test_a_skew_within_tolerance_is_not_corrected(tmp_path: Path) -> None:
    res = analyze_case(_write_case(tmp_path, skew=3, anchors=True))
    assert res.category == "node.host_oom"  # 3 s ahead: still before the peers' errors
    assert not any("clock" in n and "cn-04" in n for n in res.notes)
