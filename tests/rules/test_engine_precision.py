"""Issue 9, item 8: precision before recall, as properties.

A result is `attributed` only when a cause explains the failure. Random mixtures of noise,
warnings, launcher exits, SIGKILLs, downstream tracebacks and peer errors (connection closed /
reset toward any peers, IB flush errors) on any nodes at any times never produce `attributed`:
they are symptoms, and without a cause the answer is `unattributed`.

Excluded on purpose: IB completion status 12/13 (transport retry exhaustion), which the taxonomy
lists under network.fabric (so retry exhaustion toward many unrelated peers is a fabric cause),
and silence (a node that stopped writing, corroborated by its peers, is node.down).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine import load_engine

ENGINE = load_engine()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
NODES = [f"n{i:02d}" for i in range(8)]
IPS = {n: f"10.1.0.{i + 1}" for i, n in enumerate(NODES)}


def _obs(kind: str, node: str, sec: int, line: int, **kw: Any) -> Observation:
    return Observation(
        kind=kind,
        node=node,
        time=T0 + timedelta(seconds=sec),
        excerpt=f"{kind} noise",
        source="files",
        locator=f"logs/{node}/app.log:{line}",
        parser="prop",
        **kw,
    )


NOISE: list[tuple[str, dict[str, Any]]] = [
    ("collective_timeout", {"attrs": {"rank": 3, "op": "ALLREDUCE"}}),
    ("watchdog_failure", {"attrs": {"process_down": True}}),
    ("nccl_warn", {"attrs": {"message": "Could not find real path of /sys/class/net/ib0"}}),
    ("nccl_remote_error", {}),
    ("nccl_abort", {"attrs": {"what": "communicator was aborted"}}),
    ("child_failed", {"attrs": {"exitcode": -9, "signal": 9}}),
    ("child_failed", {"attrs": {"exitcode": 1}}),
    ("process_exit", {"attrs": {"exit_code": 137, "signal_name": "SIGKILL"}}),
    ("traceback", {"attrs": {"family": "nccl", "exc_type": "torch.distributed.DistBackendError"}}),
    ("traceback", {"attrs": {"family": "signal", "exc_type": "SignalException"}}),
    ("traceback", {"attrs": {"family": "child_failed", "exc_type": "ChildFailedError"}}),
    ("xid", {"code": 92, "attrs": {"mnemonic": "High single-bit ECC error rate"}}),
    ("xid", {"code": 45}),
    ("xid", {"code": 43}),
    ("xid", {"code": 154, "attrs": {"action": "None"}}),
    ("pcie_aer", {"attrs": {"severity": "corrected"}}),
    ("ib_link_up", {"port": "ibp24s0"}),
    ("storage_recovered", {"attrs": {"fs": "nfs"}}),
    ("nvlink_counter", {"gpu": 1, "attrs": {"origin": "dcgm", "counter": "replay"}}),
    ("cuda_error", {"attrs": {"error": "launch_failure"}}),
    ("slurm_cancelled", {"attrs": {"reason": "none"}}),
]

event = st.tuples(
    st.integers(0, len(NOISE) - 1),
    st.sampled_from(NODES),
    st.integers(-60, 3700),
)
peer_event = st.tuples(
    st.sampled_from(NODES),
    st.sampled_from(NODES + ["10.200.0.9", "login-01"]),
    st.integers(0, 3700),
    st.sampled_from(["peer_lost", "ib5"]),
    st.booleans(),  # name the peer by IP (else by host name)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event, max_size=40),
    peers=st.lists(peer_event, max_size=30),
    state=st.sampled_from([JobState.FAILED, JobState.FAILED, JobState.CANCELLED]),
    n_nodes=st.integers(2, 8),
    addresses=st.booleans(),
)
def test_noise_and_peer_errors_without_a_cause_are_never_attributed(
    events: list[tuple[int, str, int]],
    peers: list[tuple[str, str, int, str, bool]],
    state: JobState,
    n_nodes: int,
    addresses: bool,
) -> None:
    nodes = NODES[:n_nodes]
    ctx = ExecutionContext(
        job_id="p",
        scheduler="slurm",
        state=state,
        exit_code=1,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=nodes,
        node_addresses={n: [IPS[n]] for n in nodes} if addresses else {},
    )
    obs: list[Observation] = []
    line = 0
    for i, node, sec in events:
        line += 1
        kind, kw = NOISE[i]
        obs.append(_obs(kind, node, sec, line, **kw))
    for node, peer, sec, what, by_ip in peers:
        line += 1
        name = IPS.get(peer, peer) if by_ip else peer
        if what == "peer_lost":
            obs.append(_obs("peer_lost", node, sec, line, peer=name))
        else:
            obs.append(_obs("ib_completion_error", node, sec, line, peer=name, attrs={"status": 5}))
    # every node kept writing to the end: nobody went silent
    obs += [_obs("log_last_line", n, 3590, 10**6) for n in nodes]
    result = ENGINE.attribute(ctx, obs, [])
    if state is JobState.CANCELLED:
        # the scheduler's own verdict is a cause (scheduler.cancelled); nothing else may be
        assert result.status != "attributed" or result.category == "scheduler.cancelled"
    else:
        assert result.status == "unattributed", (result.category, result.summary)
    assert set(result.suspect_nodes) <= set(nodes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event, max_size=30),
    culprit=st.sampled_from(NODES[:4]),
    sec=st.integers(0, 3000),
)
def test_control_the_same_noise_plus_one_real_cause_is_attributed(
    events: list[tuple[int, str, int]], culprit: str, sec: int
) -> None:
    """The property above is not vacuous: the same generator plus one XID 79 is attributed."""
    nodes = NODES[:4]
    ctx = ExecutionContext(
        job_id="p",
        scheduler="slurm",
        state=JobState.FAILED,
        exit_code=1,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=nodes,
    )
    obs = [
        _obs(NOISE[i][0], node, sec + 30 + s % 600, n + 1, **NOISE[i][1])
        for n, (i, node, s) in enumerate(events)
        if node in nodes  # the noise follows the fault here (before it, the fault is late)
    ]
    obs.append(_obs("xid", culprit, sec, 10**5, code=79))
    obs += [_obs("collective_timeout", n, sec + 600, 10**5 + k) for k, n in enumerate(nodes)]
    result = ENGINE.attribute(ctx, obs, [])
    assert (result.status, result.category) == ("attributed", "gpu.lost")
    assert result.suspect_nodes == [culprit]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event, max_size=30),
    stops=st.lists(st.integers(0, 3600), min_size=8, max_size=8),
    n_nodes=st.integers(2, 8),
)
def test_silence_without_corroboration_is_never_attributed(
    events: list[tuple[int, str, int]], stops: list[int], n_nodes: int
) -> None:
    """Nodes whose logs stop at random times, with noise but no peer pointing at them, no
    scheduler line naming them and no NODE_FAIL: silence alone is no cause."""
    nodes = NODES[:n_nodes]
    ctx = ExecutionContext(
        job_id="p",
        scheduler="slurm",
        state=JobState.FAILED,
        exit_code=1,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=nodes,
    )
    obs = [
        _obs(NOISE[i][0], node, sec, n + 1, **NOISE[i][1])
        for n, (i, node, sec) in enumerate(events)
        if node in nodes
    ]
    obs += [_obs("log_last_line", n, stops[k], 10**6 + k) for k, n in enumerate(nodes)]
    result = ENGINE.attribute(ctx, obs, [])
    assert result.status == "unattributed", (result.category, result.summary)
    assert result.suspect_nodes == []
