"""The engine's cost follows observations, not observations x nodes or x rules (issue 16).

A 1,024-node job's collective fallout is ~20,000 observations. Each shortcut here must give
the answer the plain reading gives: the first applicable rule over the whole rule list, the
median of the other nodes' last lines, the job's last progress per symptom. The plain
readings are written out in these tests and compared on varied inputs.
"""

from __future__ import annotations

import random
import statistics
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from test_engine_peers import ob  # one observation factory for the engine tests (with stream)

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine import load_engine
from attribution_dagster.rules.engine.items import Item
from attribution_dagster.rules.engine.liveness import Seen, Theirs
from attribution_dagster.rules.engine.progress import outlived, outlived_ids
from attribution_dagster.rules.engine.rulebook import Match

ENGINE = load_engine()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)


def _xid79(node: str, minute: float, bus: str, **kw: Any) -> Observation:
    """The root cause of the scale tests: a GPU fallen off the bus (XID 79) on `node`."""
    return ob(
        "xid",
        node,
        minute,
        stream="kern.log",
        code=79,
        excerpt=f"NVRM: Xid (PCI:{bus}): 79, GPU has fallen off the bus.",
        **kw,
    )


def _failed_job(nodes: list[str], minutes: int = 45) -> ExecutionContext:
    """A failed Slurm job on `nodes` that ran `minutes` from T0."""
    return ExecutionContext(
        job_id="1",
        scheduler="slurm",
        state=JobState.FAILED,
        exit_code=1,
        start=T0,
        end=T0 + timedelta(minutes=minutes),
        nodes=nodes,
    )


def _gpu_models() -> list[str | None]:
    named = {m for r in ENGINE.rules for m in (r.gpu_models or [])}
    return [None, "NVIDIA H100 80GB HBM3", "A100-SXM4-80GB", *sorted(named)]


def test_classify_gives_the_first_applicable_rule_of_the_whole_list() -> None:
    """Every rule's example (and the same observation on other GPU models and job states)
    is classified as the plain scan over all rules in file order classifies it."""

    def plain(o: Observation, gpu_model: str | None, state: JobState | None) -> Any:
        return next(
            (r for r in ENGINE.rules if r.match.test(o) and r.applies(gpu_model, state)), None
        )

    examples = [r.example.observation("node-a", T0) for r in ENGINE.rules]
    examples.append(ob("no_such_kind_anywhere", "node-a", 1))
    checked = 0
    for gpu_model in _gpu_models():
        for state in [None, *JobState]:
            for o in examples:
                assert ENGINE.classify(o, gpu_model, state) is plain(o, gpu_model, state), (
                    o.kind,
                    gpu_model,
                    state,
                )
                checked += 1
    assert checked >= len(ENGINE.rules) * 10


def test_classify_tests_only_the_rules_of_the_observations_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Classifying an observation costs the rules of its kind, not the whole catalog."""
    tested: list[tuple[str, ...]] = []
    real = Match.test

    def counting(self: Match, obs: Observation) -> bool:
        tested.append(self.kinds)
        return real(self, obs)

    monkeypatch.setattr(Match, "test", counting)
    o = ob("collective_timeout", "node-a", 1, attrs={"rank": 3, "pg": 0, "seq": 9})
    ENGINE.classify(o, None, JobState.FAILED)
    assert tested and all("collective_timeout" in kinds for kinds in tested)
    of_kind = [r for r in ENGINE.rules if "collective_timeout" in r.match.kinds]
    assert len(tested) <= len(of_kind) < len(ENGINE.rules)


def test_median_of_the_other_nodes_is_the_plain_median_low() -> None:
    """`Theirs` (sorted once per kind of log) against statistics.median_low of the other
    nodes' times, listed anew for each node: ties, one node alone in a log, two nodes."""
    rng = random.Random(7)
    for n_nodes in (1, 2, 3, 4, 9, 40):
        seen: Seen = {}
        for i in range(n_nodes):
            node = f"n{i:02d}"
            streams = {}
            for key in ("app.log", "kern.log", "slurm-#.out"):
                if rng.random() < 0.8 or (key == "app.log" and i < 2):
                    minute = rng.choice([5, 5, 7, 12.5, 30, rng.uniform(0, 40)])
                    streams[key] = ob("log_last_line", node, minute, stream=key)
            seen[node] = streams
        theirs = Theirs(seen)
        for node, streams in seen.items():
            for key, o in streams.items():
                others = [s[key].time for n, s in seen.items() if n != node and key in s]
                want = statistics.median_low(others) if others else None
                assert theirs.median_low(key, o.time) == want, (n_nodes, node, key)  # type: ignore[arg-type]


def test_last_progress_is_read_once_with_the_per_symptom_answer() -> None:
    """`outlived_ids` (the job's last progress read once) against `outlived` per symptom:
    a node with its own progress, nodes without (the job's last counts), untimed symptoms."""
    tuning = ENGINE.tuning
    rng = random.Random(3)
    rule = next(r for r in ENGINE.rules if r.role == "symptom")
    progress = {
        f"n{i}": ob("progress", f"n{i}", rng.uniform(10, 50), attrs={"step": i}) for i in range(5)
    }
    symptoms = []
    for k in range(200):
        node = f"n{rng.randrange(9)}"
        t = T0 + timedelta(minutes=rng.uniform(0, 50))
        hi = t if k % 7 else datetime.max.replace(tzinfo=timezone.utc)
        symptoms.append(Item(ob("collective_timeout", node, 1), rule, t, 0.0, t, hi))
    want = {id(s) for s in symptoms if outlived(s, progress, tuning)}
    assert outlived_ids(symptoms, progress, tuning) == want
    assert 0 < len(want) < len(symptoms)
    assert outlived_ids(symptoms, {}, tuning) == set()


class _CountingNodes(list):  # type: ignore[type-arg]
    lookups = 0

    def __contains__(self, item: object) -> bool:
        type(self).lookups += 1
        return super().__contains__(item)


def test_a_large_job_looks_its_node_list_up_a_bounded_number_of_times() -> None:
    """Membership in the context's node list (a list: 1,024 names) per observation made the
    engine quadratic in a large job; the steps look nodes up in sets."""
    nodes = [f"node-{i:04d}" for i in range(64)]
    ctx = _failed_job(nodes)
    obs = [
        ob("node_address", n, 0.2, attrs={"address": f"10.0.{i // 200}.{i % 200}"})
        for i, n in enumerate(nodes)
    ]
    obs.append(_xid79("node-0017", 20, "0000:91:00", gpu=3))
    for i, n in enumerate(nodes):
        for lr in range(8):
            obs.append(
                ob(
                    "collective_timeout",
                    n,
                    30 + lr / 60,
                    attrs={"rank": i * 8 + lr, "global_rank": i * 8 + lr, "pg": 0, "seq": 48213},
                )
            )
    obs.sort(key=lambda o: o.time)  # type: ignore[arg-type,return-value]
    plain = ENGINE.attribute(ctx, obs, [])
    counted = ctx.model_copy()
    object.__setattr__(counted, "nodes", _CountingNodes(nodes))
    _CountingNodes.lookups = 0
    result = ENGINE.attribute(counted, obs, [])
    assert result.status == plain.status == "attributed"
    assert result.category == "gpu.lost" and result.suspect_nodes == ["node-0017"]
    assert _CountingNodes.lookups < len(nodes), _CountingNodes.lookups


def test_a_chain_of_thousands_of_folded_links_builds_only_those_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every node's timeouts fold into a link each; the chain shows `max_chain_links` of
    them (the root, then the earliest symptom per node) and builds no more than it shows
    twice over."""
    from attribution_dagster.rules.engine import outcome

    built: list[str] = []
    real = outcome.ChainLink

    def counting(**kw: Any) -> Any:
        built.append(kw["node"])
        return real(**kw)

    monkeypatch.setattr(outcome, "ChainLink", counting)
    nodes = [f"node-{i:04d}" for i in range(300)]
    ctx = _failed_job(nodes)
    obs = [_xid79("node-0117", 20, "0000:91:00", gpu=3)]
    for i, n in enumerate(nodes):
        for lr in range(4):
            obs.append(
                ob(
                    "collective_timeout",
                    n,
                    30 + i / 600 + lr / 6000,
                    attrs={"rank": i * 4 + lr, "global_rank": i * 4 + lr, "pg": 0, "seq": 7},
                )
            )
    result = ENGINE.attribute(ctx, obs, [])
    cap = ENGINE.tuning.max_chain_links
    assert result.category == "gpu.lost" and result.suspect_nodes == ["node-0117"]
    chain = result.symptom_chain
    assert len(chain) == cap and chain[0].role == "root_cause"
    symptoms = [lk for lk in chain if lk.role != "root_cause"]
    assert [lk.node for lk in symptoms] == nodes[: cap - 1]  # the earliest, one per node
    assert all(lk.count == 4 for lk in symptoms)  # each node's four timeouts, one link
    assert len(built) <= 2 * cap


def _items(n: int, rng: random.Random) -> list[Item]:
    rule = next(r for r in ENGINE.rules if r.role == "cause")
    out = []
    for _k in range(n):
        node = f"n{rng.randrange(6)}"
        o = ob("xid", node, rng.choice([1, 1, 2, 3.5]), code=79, excerpt=f"x{rng.randrange(3)}")
        t = o.time
        out.append(Item(o, rule, t, 0.0, t, t))  # type: ignore[arg-type]
        if rng.random() < 0.3:  # an equal item, another object
            out.append(Item(o.model_copy(), rule, t, 0.0, t, t))  # type: ignore[arg-type]
    return out


def test_without_is_the_plain_list_membership_test() -> None:
    """Items equal to a dropped one go too (equal observations, other objects); the
    index only narrows which items are compared."""
    from attribution_dagster.rules.engine.items import without

    rng = random.Random(11)
    for _ in range(30):
        items = _items(rng.randrange(1, 40), rng)
        drop = rng.sample(items, rng.randrange(0, len(items) + 1))
        want = [i for i in items if i not in drop]
        got = without(items, drop)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))


def test_widest_burst_is_the_plain_scan_from_each_start() -> None:
    """The sliding window against the plain reading: from each item (in time order), every
    later item within `width` seconds; the first start with the most nodes wins."""
    from attribution_dagster.rules.engine.candidates import _widest_burst

    def plain(its: list[Item], width: float) -> set[str]:
        timed = sorted((i for i in its if i.t is not None), key=lambda i: i.t)  # type: ignore[arg-type,return-value]
        best: set[str] = set()
        for i, first in enumerate(timed):
            nodes = {
                x.obs.node
                for x in timed[i:]
                if (x.t - first.t).total_seconds() <= width  # type: ignore[operator]
            }
            if len(nodes) > len(best):
                best = nodes
        return best

    rng = random.Random(5)
    rule = next(r for r in ENGINE.rules if r.role == "cause")
    for _ in range(200):
        its = []
        for _k in range(rng.randrange(0, 30)):
            node = f"n{rng.randrange(8)}"
            sec = rng.choice([0, 0, 10, 30, 31, 59.5, rng.uniform(0, 300)])
            t = None if rng.random() < 0.1 else T0 + timedelta(seconds=sec)
            its.append(Item(ob("nfs_error", node, 1), rule, t, 0.0))
        width = rng.choice([0.0, 1.0, 30.0, 60.0, 1000.0, -1.0])
        assert _widest_burst(its, width) == plain(its, width)


def test_every_rank_raising_on_many_nodes_compares_no_observations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every rank of 200 nodes raises the same application error, on a shared storage
    outage: grouping and the chain set items apart by index, not by comparing each
    observation with every other (8,192 ranks made that minutes)."""
    compared = [0]
    real = Observation.__eq__

    def counting(self: Observation, other: object) -> bool:
        compared[0] += 1
        return real(self, other)

    monkeypatch.setattr(Observation, "__eq__", counting)
    nodes = [f"node-{i:04d}" for i in range(200)]
    ctx = _failed_job(nodes)
    obs = []
    for i, n in enumerate(nodes):
        obs.append(
            ob("nfs_error", n, 20 + (i % 20) / 60, stream="kern.log", attrs={"server": "nfs1"})
        )
        for lr in range(4):
            r = i * 4 + lr
            obs.append(
                ob(
                    "traceback",
                    n,
                    21,
                    attrs={
                        "exc_type": "OSError",
                        "family": "io",
                        "message": "[Errno 5] Input/output error",
                        "global_rank": r,
                    },
                )
            )
            obs.append(
                ob(
                    "collective_timeout",
                    n,
                    30,
                    attrs={"rank": r, "global_rank": r, "pg": 0, "seq": 7},
                )
            )
    obs.sort(key=lambda o: o.time)  # type: ignore[arg-type,return-value]
    result = ENGINE.attribute(ctx, obs, [])
    assert result.status == "attributed" and result.category == "storage"
    assert compared[0] < len(nodes), compared[0]


def test_an_xid_45_on_every_gpu_reads_only_its_nodes_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """`caused by previous Xid 79` on every GPU of 100 nodes: each XID 45 looks for the XID it
    names among its own node's XIDs, not the whole job's lines; the one node that logged
    the XID 79 is the cause, its XID 45s corroborate it."""
    from attribution_dagster.rules.engine import intake

    looked: list[int] = []
    real = intake.followed

    def spying(obs: Observation, rule: Any, kept: list[Observation], classify: Any) -> Any:
        looked.append(len(kept))
        return real(obs, rule, kept, classify)

    monkeypatch.setattr(intake, "followed", spying)
    nodes = [f"node-{i:04d}" for i in range(100)]
    ctx = _failed_job(nodes)
    obs = [_xid79("node-0005", 19.9, "0000:00:00", pci="0000:00:00")]
    for i, n in enumerate(nodes):
        for g in range(8):
            obs.append(
                ob(
                    "xid",
                    n,
                    20 + g / 60,
                    stream="kern.log",
                    code=45,
                    pci=f"0000:{g:02x}:00",
                    attrs={"previous_xid": 79},
                    excerpt=f"NVRM: Xid (PCI:0000:{g:02x}:00): 45, pid={i}, caused by "
                    "previous Xid 79",
                )
            )
            obs.append(ob("collective_timeout", n, 30, attrs={"rank": i * 8 + g, "pg": 0}))
    obs.sort(key=lambda o: o.time)  # type: ignore[arg-type,return-value]
    result = ENGINE.attribute(ctx, obs, [])
    assert result.category == "gpu.lost" and result.suspect_nodes == ["node-0005"]
    assert len(looked) == 800 and max(looked) <= 9


def test_a_nodes_running_median_is_statistics_median() -> None:
    """Clock offsets: each node's median is read from its offsets kept sorted as they come,
    with statistics.median's arithmetic (odd, even, repeated values)."""
    import bisect

    from attribution_dagster.rules.engine.clocks import _median

    rng = random.Random(9)
    ordered: list[float] = []
    seen: list[float] = []
    for _ in range(300):
        v = rng.choice([0.0, 0.1, -3.5, 90.0, rng.uniform(-100, 100)])
        seen.append(v)
        bisect.insort(ordered, v)
        assert _median(ordered) == statistics.median(seen)


def test_fault_domain_hits_are_the_plain_widest_burst() -> None:
    """The located items of a network cause within `width` of the widest burst, by node,
    against the plain scan from each start (untimed items only when nothing is timed)."""
    from attribution_dagster.rules.engine.faultdomain import _hits
    from attribution_dagster.rules.engine.items import Cand

    def plain(c: Cand, width: float) -> dict[str, list[Item]]:
        located = [i for i in c.items if i.rule.locates]
        timed = sorted((i for i in located if i.t is not None), key=lambda i: i.t)  # type: ignore[arg-type,return-value]
        best = [i for i in located if i.t is None] if not timed else []
        for k, first in enumerate(timed):
            burst = [x for x in timed[k:] if (x.t - first.t).total_seconds() <= width]  # type: ignore[operator]
            if len({x.obs.node for x in burst}) > len({x.obs.node for x in best}):
                best = burst
        out: dict[str, list[Item]] = {}
        for i in best:
            out.setdefault(i.obs.node, []).append(i)
        return out

    rng = random.Random(21)
    rule = next(r for r in ENGINE.rules if r.id == "ib.link_down")
    for _ in range(150):
        its = []
        for _k in range(rng.randrange(1, 25)):
            sec = rng.choice([0, 5, 5, 40, rng.uniform(0, 200)])
            t = None if rng.random() < 0.15 else T0 + timedelta(seconds=sec)
            its.append(Item(ob("ib_link_down", f"n{rng.randrange(6)}", 1), rule, t, 0.0))
        c = Cand(category="network.fabric", scope="shared", items=its, nodes=[], affected=[])
        width = rng.choice([0.0, 10.0, 60.0])
        got = _hits(c, width)
        want = plain(c, width)
        assert got.keys() == want.keys()
        assert all([id(x) for x in got[n]] == [id(x) for x in want[n]] for n in got)
