"""Issue 9, items 1, 2 and 7: peer blame and silent nodes, on hand-built observations.

Errors that name a remote peer are symptoms about it; when most reporters name one node, that
node's own evidence decides (XID, OOM, silence -> node.down), and when it shows nothing the
result is unattributed with that node named. A node whose logs stop while the others go on is
node.down when something corroborates it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine import load_engine
from attribution_dagster.rules.engine.liveness import converge, learn_addresses, peer_node

ENGINE = load_engine()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
NODES = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
IPS = {n: f"10.42.1.{i + 1}" for i, n in enumerate(NODES)}
_n = iter(range(1, 10**6))


def ctx(state: JobState = JobState.FAILED, **kw: Any) -> ExecutionContext:
    base: dict[str, Any] = dict(
        job_id="1",
        scheduler="slurm",
        state=state,
        exit_code=None if state is JobState.NODE_FAIL else 1,
        start=T0,
        end=T0 + timedelta(minutes=45),
        nodes=NODES,
    )
    base.update(kw)
    return ExecutionContext(**base)


def ob(kind: str, node: str, minute: float, stream: str = "app.log", **kw: Any) -> Observation:
    return Observation(
        kind=kind,
        node=node,
        time=T0 + timedelta(minutes=minute),
        excerpt=kw.pop("excerpt", f"{kind} line"),
        source="files",
        locator=f"logs/{node}/{stream}:{next(_n)}",
        parser="test",
        **kw,
    )


def bootstrap() -> list[Observation]:
    return [ob("node_address", n, 0.2, attrs={"address": IPS[n]}) for n in NODES]


def retry_exceeded(node: str, peer: str, minute: float = 20) -> Observation:
    return ob("ib_completion_error", node, minute, peer=peer, attrs={"status": 12})


def tails(until: dict[str, float]) -> list[Observation]:
    return [ob("log_last_line", n, m) for n, m in until.items()]


def run(c: ExecutionContext, obs: list[Observation]):  # type: ignore[no-untyped-def]
    r = ENGINE.attribute(c, obs, [])
    assert (r.category is not None) == (r.status == "attributed")
    return r


def test_addresses_from_nccl_lines_and_context_resolve_peers() -> None:
    c = ctx(node_addresses={"gpu-04": ["10.9.9.4"]})
    index = learn_addresses(c, bootstrap())
    assert peer_node(ob("peer_lost", "gpu-01", 1, peer="10.42.1.2"), index) == "gpu-02"
    assert peer_node(ob("peer_lost", "gpu-01", 1, peer="10.9.9.4"), index) == "gpu-04"
    assert peer_node(ob("peer_lost", "gpu-01", 1, peer="gpu-03.cluster.local"), index) == "gpu-03"
    assert peer_node(ob("peer_lost", "gpu-01", 1, peer="10.1.1.1"), index) is None
    # an address two nodes claim (a docker bridge) resolves to neither
    dup = [ob("node_address", n, 0.1, attrs={"address": "172.17.0.1"}) for n in NODES[:2]]
    assert (
        peer_node(ob("peer_lost", "gpu-03", 1, peer="172.17.0.1"), learn_addresses(c, dup)) is None
    )


def test_convergence_needs_most_reporters_and_no_tie() -> None:
    assert converge({"a": {"b", "c", "d"}}, 4).suspect == "a"
    assert converge({"a": {"b", "c"}, "b": {"a", "d"}}, 4).suspect is None  # tie
    assert converge({"a": {"b"}}, 4).suspect is None  # one reporter in a big job
    assert converge({"a": {"b"}}, 2).suspect == "a"  # two-node job, a does not complain
    assert converge({"a": {"b"}}, 2, complaining={"a", "b"}).suspect is None


def test_retry_exceeded_toward_a_node_with_an_xid_is_that_node_not_the_fabric() -> None:
    obs = bootstrap() + [ob("xid", "gpu-02", 14, "kern.log", code=79)]
    obs += [retry_exceeded(n, IPS["gpu-02"]) for n in NODES if n != "gpu-02"]
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "gpu.lost", ["gpu-02"])


def test_app_error_on_the_named_node_is_not_made_ambiguous_by_peer_network_errors() -> None:
    app = ob("traceback", "gpu-03", 22, attrs={"family": "app", "exc_type": "KeyError"})
    obs = (
        bootstrap()
        + [app]
        + [retry_exceeded(n, IPS["gpu-03"], 22.2) for n in NODES if n != "gpu-03"]
    )
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["gpu-03"])


def test_errors_converging_on_a_node_that_shows_nothing_are_unattributed_naming_it() -> None:
    obs = bootstrap() + [retry_exceeded(n, IPS["gpu-02"]) for n in NODES if n != "gpu-02"]
    obs += tails({n: 44 for n in NODES})  # gpu-02 kept writing: not silent, no fault either
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("unattributed", None, ["gpu-02"])
    assert "gpu-02" in (r.summary or "")


def test_retry_exceeded_toward_many_unrelated_peers_stays_the_fabric() -> None:
    obs = bootstrap()
    for i, n in enumerate(NODES):
        obs.append(retry_exceeded(n, IPS[NODES[(i + 1) % 4]]))
        obs.append(retry_exceeded(n, IPS[NODES[(i + 2) % 4]]))
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "network.fabric", [])


def test_silent_node_that_peers_point_at_is_node_down_with_its_last_line() -> None:
    obs = bootstrap() + tails({"gpu-01": 44, "gpu-02": 44, "gpu-03": 21, "gpu-04": 44})
    obs += [ob("peer_lost", n, 40, peer="gpu-03") for n in NODES if n != "gpu-03"]
    obs += [ob("collective_timeout", n, 41) for n in NODES if n != "gpu-03"]
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "node.down", ["gpu-03"])
    root = next(lk for lk in r.symptom_chain if lk.role == "root_cause")
    assert root.kind == "node_silent" and root.node == "gpu-03"
    assert root.time == T0 + timedelta(minutes=21)


def test_quiet_kern_log_next_to_chatty_app_logs_is_not_silence() -> None:
    obs = tails({"gpu-01": 44, "gpu-02": 44, "gpu-04": 44})
    obs += [ob("log_last_line", "gpu-03", 1, "kern.log")]  # it has no app log at all
    obs += [ob("log_last_line", n, 1, "kern.log") for n in ("gpu-01", "gpu-02")]
    obs += [ob("peer_lost", n, 40, peer="gpu-03") for n in NODES if n != "gpu-03"]
    r = run(ctx(), obs)
    assert r.status == "unattributed" and r.suspect_nodes == ["gpu-03"]


def test_silence_alone_without_corroboration_is_no_cause() -> None:
    obs = tails({"gpu-01": 44, "gpu-02": 44, "gpu-03": 21, "gpu-04": 44})
    obs += [ob("collective_timeout", n, 41) for n in NODES]
    r = run(ctx(), obs)
    assert r.status == "unattributed" and r.suspect_nodes == []


def test_node_fail_state_and_one_silent_node_is_node_down_there() -> None:
    obs = tails({"gpu-01": 44, "gpu-02": 44, "gpu-03": 44, "gpu-04": 12})
    obs += [ob("collective_timeout", n, 22) for n in NODES if n != "gpu-04"]
    r = run(ctx(JobState.NODE_FAIL), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "node.down", ["gpu-04"])


def test_node_failure_line_about_x_makes_x_the_suspect() -> None:
    """Item 7: a cluster-level line (slurmctld / srun / NodeNotReady) naming X."""
    down = ob(
        "node_unreachable",
        "gpu-01",
        30,
        "slurm-1.out",
        attrs={"failed_host": "gpu-02", "logged_on": "gpu-01"},
    )
    obs = [down] + [ob("collective_timeout", n, 31) for n in NODES if n != "gpu-02"]
    r = run(ctx(JobState.NODE_FAIL), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "node.down", ["gpu-02"])


def test_sigkill_with_no_cause_is_not_attributed() -> None:
    obs = [ob("child_failed", "gpu-02", 26, attrs={"exitcode": -9, "signal": 9})]
    obs += [ob("peer_lost", n, 26.1, peer="gpu-02") for n in NODES if n != "gpu-02"]
    r = run(ctx(), obs)
    assert (r.status, r.suspect_nodes) == ("unattributed", ["gpu-02"])


def test_links_down_on_some_nodes_in_one_second_name_them_as_a_shared_switch() -> None:
    """Item 6: a subset of the job's nodes loses its links at once -> those nodes, scope shared."""
    hit = ["gpu-02", "gpu-03", "gpu-04"]
    obs = [ob("ib_link_down", n, 10, "kern.log", port="ibp92s0") for n in hit]
    obs += [ob("collective_timeout", n, 20) for n in NODES]
    nodes = [*NODES, "gpu-05", "gpu-06"]
    r = run(ctx(nodes=nodes), obs)
    assert (r.status, r.category, r.scope) == ("attributed", "network.fabric", "shared")
    assert r.suspect_nodes == hit
    assert {(s.node, s.port) for s in r.suspects} == {(n, "ibp92s0") for n in hit}
    assert "common switch" in (r.summary or "")


def test_links_down_on_every_node_name_no_node() -> None:
    obs = [ob("ib_link_down", n, 10, "kern.log", port="ib0") for n in NODES]
    obs += [ob("collective_timeout", n, 20) for n in NODES]
    r = run(ctx(), obs)
    assert (r.status, r.category, r.scope, r.suspect_nodes) == (
        "attributed",
        "network.fabric",
        "shared",
        [],
    )


def test_ranks_named_in_errors_resolve_through_nccl_init_lines() -> None:
    """`Ranks 9 failed to pass monitoredBarrier` names a rank; NCCL's world-communicator init
    lines say which host runs it (ranks of smaller communicators are not global)."""
    inits = [
        ob("node_address", n, 0.1, attrs={"rank": r, "nranks": 16})
        for n, r in (("gpu-01", 0), ("gpu-02", 4), ("gpu-03", 9), ("gpu-04", 12))
    ]
    inits.append(ob("node_address", "gpu-01", 0.1, attrs={"rank": 9, "nranks": 4}))  # a TP comm
    barrier = [
        ob("peer_lost", n, 30, attrs={"peer_rank": 9, "peer_ranks": "9"})
        for n in ("gpu-01", "gpu-02", "gpu-04")
    ]
    obs = inits + barrier + [ob("xid", "gpu-03", 20, "kern.log", code=79)]
    obs += tails({n: 44 for n in NODES})
    r = run(ctx(), obs)
    assert (r.category, r.suspect_nodes) == ("gpu.lost", ["gpu-03"])
    assert any("converge on gpu-03" in n for n in r.notes)


def test_node_whose_processes_exited_on_their_own_is_not_silent_node_down() -> None:
    """An app crash: the crashing node's log ends with its own traceback and torchrun exit; the
    others wait for the NCCL timeout ten minutes and then name it. That node did not vanish."""
    obs = tails({"gpu-01": 33, "gpu-02": 33, "gpu-03": 22.5, "gpu-04": 33})
    obs.append(ob("traceback", "gpu-03", 22, attrs={"family": "app", "exc_type": "KeyError"}))
    obs.append(ob("child_failed", "gpu-03", 22.4, attrs={"exitcode": 1}))
    obs += [ob("peer_lost", n, 32.5, peer="gpu-03") for n in NODES if n != "gpu-03"]
    obs += [ob("collective_timeout", n, 32.4) for n in NODES if n != "gpu-03"]
    r = run(ctx(), obs)
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "app.error", ["gpu-03"])
    assert all(lk.kind != "node_silent" for lk in r.symptom_chain)


def _exit(node: str, minute: float, code: int, how: str = "Exited with exit code") -> Observation:
    signal = {"Terminated": 15, "Killed": 9}.get(how)
    attrs: dict[str, Any] = {"exit_code": code, "how": how}
    if signal:
        attrs["signal"] = signal
    return ob("process_exit", node, minute, attrs=attrs)


def test_the_lone_task_that_failed_on_its_own_is_where_to_look():
    """Nothing explains the failure, but one node's task exited by itself (exit code 1) and
    srun terminated the others after it: unattributed, that node named; two nodes failing
    on their own, or a kill, name nobody."""
    lone = [_exit("gpu-03", 30, 1), _exit("gpu-01", 30.1, 0, "Terminated")]
    lone += [_exit("gpu-02", 30.1, 0, "Terminated"), _exit("gpu-04", 30.1, 0, "Terminated")]
    r = ENGINE.attribute(ctx(), lone, [])
    assert r.status == "unattributed" and r.category is None
    assert r.suspect_nodes == ["gpu-03"]
    assert "first task to fail on its own ran on gpu-03" in r.summary
    both = [_exit("gpu-03", 30, 1), _exit("gpu-01", 30.2, 1)]
    assert ENGINE.attribute(ctx(), both, []).suspect_nodes == []
    killed = [_exit("gpu-03", 30, 137, "Killed"), _exit("gpu-01", 30.2, 0, "Terminated")]
    assert ENGINE.attribute(ctx(), killed, []).suspect_nodes == []
