"""Every model that crosses an asset or process boundary round-trips without loss.

The per-job assets store each step's value as JSON and the next asset reads it back
(sinks/asset_store.py); a scheduler's context is kept in the job index the same way, and the
window path and `export` write results and contexts out. A field that does not survive
`model_validate(model_dump(mode="json"))` is state the next step silently loses: this is how
`SourceCoverage.file_tails` (then `exclude=True`) made the Dagster path give other verdicts
than `attribution analyze` (issue 15). One hypothesis property per model, over values as wide
as the model allows: aware datetimes with microseconds and offsets, naive times where the
model accepts them, finite floats, frozen models, `extra="allow"` keys, every Locator variant.
Both the dict form and the JSON text form (what the asset store writes) are checked.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from attribution_dagster.assets.per_job import ObservationSet
from attribution_dagster.connectors.base import JobQuery, SourceLimits
from attribution_dagster.connectors.topology.source import ClusterTopology, SourceSnapshots
from attribution_dagster.core.context import ExecutionContext, JobState, PodRef
from attribution_dagster.core.evidence import (
    Anchor,
    LogBatch,
    MetricSample,
    RawEvidence,
    RawRecord,
    SourceCoverage,
)
from attribution_dagster.core.formats.flight_recorder import FlightDump, FrEntry, FrGroup
from attribution_dagster.core.locators import (
    DumpEntry,
    FileLine,
    KubeObject,
    Locator,
    Note,
    QueryAt,
    SearchHit,
)
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import (
    AttributionResult,
    Candidate,
    ChainLink,
    Evidence,
    Lead,
    Suspect,
)
from attribution_dagster.core.settings import AnalysisSettings, Window
from attribution_dagster.core.topology import Cable, Switch, Topology, TopologySnapshots
from attribution_dagster.rules.vocabulary import vocabulary

SETTINGS = settings(max_examples=60, deadline=None)

# --- building blocks ---------------------------------------------------------------------------
text = st.text(max_size=40)
name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=20)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
offsets = st.sampled_from(
    [timezone.utc, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5, minutes=30))]
)
aware = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=offsets
)
# RawRecord / Observation times are `datetime | None`: aware from every connector, but naive
# values are accepted and must survive too
any_time = (
    st.none() | aware | st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1))
)
json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(name, inner, max_size=3),
    max_leaves=6,
)
attr_value = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text
attrs = st.dictionaries(name, attr_value, max_size=4)
quality = st.sampled_from(["exact", "inherited", "unknown"])

file_line = st.builds(
    FileLine,
    root=st.none() | text,
    path=text,
    line=st.none() | st.integers(0, 10**9),
    field=st.none() | name,
)
query_at = st.builds(
    QueryAt,
    language=st.sampled_from(["logql", "promql"]),
    query=text,
    at_ns=st.integers(0, 2**62),
)
kube_object = st.builds(
    KubeObject,
    kind=st.sampled_from(["pod_log", "event"]),
    namespace=name,
    name=name,
    container=st.none() | name,
    previous=st.booleans(),
    field=st.none() | text,
)
note = st.builds(Note, text=text)
dump_entry = st.builds(
    DumpEntry, path=name, pg=st.none() | name, seq=st.none() | st.integers(0, 10**9)
)
search_hit = st.builds(
    SearchHit, index=name, doc_id=name, stream_key=text, at_ns=st.integers(0, 2**62)
)
locator = st.one_of(file_line, query_at, kube_object, note, dump_entry, search_hit)

pod_ref = st.builds(
    PodRef,
    namespace=name,
    name=name,
    node=st.none() | name,
    host_ip=st.none() | name,
    pod_ip=st.none() | name,
    containers=st.lists(name, max_size=3),
    restarts=st.integers(0, 1000),
    started=st.none() | aware,
)


@st.composite
def execution_context(draw: Any) -> ExecutionContext:
    start = draw(aware)
    extra = draw(
        st.dictionaries(st.sampled_from(["site", "labels", "priority"]), json_value, max_size=2)
    )
    return ExecutionContext(
        job_id=draw(name),
        scheduler=draw(st.sampled_from(["slurm", "kueue", "static", "kai"])),
        cluster=draw(st.none() | name),
        state=draw(st.sampled_from(list(JobState))),
        exit_code=draw(st.none() | st.integers(-255, 255)),
        start=start,
        end=start + draw(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=9))),
        nodes=draw(st.lists(name, min_size=1, max_size=4)),
        gpu_model=draw(st.none() | text),
        node_addresses=draw(st.dictionaries(name, st.lists(name, max_size=2), max_size=2)),
        gpus_per_node=draw(st.none() | st.integers(0, 16)),
        reason=draw(st.none() | text),
        pods=draw(st.lists(pod_ref, max_size=2)),
        case_dir=draw(st.none() | text),
        **extra,
    )


raw_record = st.builds(
    RawRecord,
    source=name,
    node=name,
    locator=locator,
    time=any_time,
    time_quality=quality,
    time_latest=any_time,
    text=text,
    stream=text,
    last_of_file=st.booleans(),
)
metric_sample = st.builds(
    MetricSample,
    source=name,
    node=name,
    locator=locator,
    time=aware,
    name=name,
    labels=st.dictionaries(name, text, max_size=3),
    value=finite,
)
count = st.integers(0, 10**9)
source_coverage = st.builds(
    SourceCoverage,
    source=name,
    status=st.sampled_from(["ok", "partial", "failed", "empty"]),
    nodes_read=st.lists(name, max_size=3),
    nodes_missing=st.lists(name, max_size=3),
    pods_read=st.lists(name, max_size=2),
    files=count,
    queries=count,
    bytes=count,
    lines=count,
    records=count,
    overlong_lines=count,
    errors=st.lists(text, max_size=2),
    retryable=st.booleans(),
)
small = st.none() | st.integers(-(2**31), 2**31)
fr_entry = st.builds(
    FrEntry,
    record_id=small,
    pg_id=st.none() | name,
    collective_seq_id=small,
    profiling_name=st.none() | name,
    state=st.none() | st.sampled_from(["scheduled", "started", "completed"]),
    input_sizes=st.lists(st.lists(st.integers(0, 10**6), max_size=3), max_size=2),
    input_dtypes=st.lists(name, max_size=2),
    time_created_ns=st.none() | st.integers(0, 2**62),
    timeout_ms=small,
    is_p2p=st.booleans(),
)
flight_dump = st.builds(
    FlightDump,
    path=name,
    rank=st.none() | st.integers(0, 10**6),
    node=st.none() | name,
    version=st.none() | name,
    pg_config=st.dictionaries(
        name,
        st.builds(FrGroup, name=st.none() | name, desc=st.none() | name,
                  ranks=st.lists(st.integers(0, 4096), max_size=4)),
        max_size=2,
    ),
    pg_status=st.dictionaries(name, st.dictionaries(name, small, max_size=3), max_size=2),
    entries=st.lists(fr_entry, max_size=3),
)
switch = st.builds(
    Switch,
    name=name,
    tier=st.none() | st.integers(0, 3),
    parent=st.none() | name,
    uplinks=st.lists(name, max_size=2),
    guid=st.none() | name,
    description=st.none() | text,
)
cable = st.builds(
    Cable,
    node=name,
    host_port=name,
    switch=name,
    switch_port=name,
    fabric=st.sampled_from(["ib", "ethernet"]),
    host_port_num=st.none() | st.integers(0, 64),
    host_guid=st.none() | name,
)
topology = st.builds(
    Topology,
    taken_at=st.none() | aware,
    sources=st.lists(text, max_size=2),
    switches=st.dictionaries(name, switch, max_size=3),
    leaf_of=st.dictionaries(name, name, max_size=3),
    cables=st.lists(cable, max_size=3),
    nvlink_domain_of=st.dictionaries(name, name, max_size=2),
    errors=st.lists(text, max_size=2),
)
topology_snapshots = st.builds(
    TopologySnapshots, snapshots=st.lists(topology, max_size=3), errors=st.lists(text, max_size=2)
)
cluster_topology = st.builds(
    ClusterTopology,
    cluster=name,
    read_at=aware,
    sources=st.lists(
        st.builds(
            SourceSnapshots,
            source=name,
            snapshots=topology_snapshots,
            error=st.none() | text,
            retryable=st.booleans(),
        ),
        max_size=2,
    ),
)
raw_evidence = st.builds(
    RawEvidence,
    topology=st.none() | topology,
    dumps=st.lists(flight_dump, max_size=2),
    job_id=name,
    records=st.lists(raw_record, max_size=3),
    tails=st.lists(raw_record, max_size=3),
    progress=st.lists(raw_record, max_size=2),
    samples=st.lists(metric_sample, max_size=3),
    coverage=st.lists(source_coverage, max_size=2),
)
log_batch = st.builds(
    LogBatch,
    records=st.lists(raw_record, max_size=3),
    tails=st.lists(raw_record, max_size=3),
    progress=st.lists(raw_record, max_size=2),
    coverage=source_coverage,
)
observation = st.builds(
    Observation,
    kind=st.sampled_from(sorted(vocabulary().kinds)),
    node=name,
    time=any_time,
    time_quality=quality,
    time_latest=any_time,
    gpu=st.none() | st.integers(0, 15),
    pci=st.none() | name,
    port=st.none() | name,
    peer=st.none() | name,
    code=st.none() | st.integers(-(2**31), 2**31),
    attrs=attrs,
    excerpt=text,
    source=name,
    locator=locator,
    parser=name,
)
observation_set = st.builds(
    ObservationSet,
    observations=st.lists(observation, max_size=3),
    coverage=st.lists(source_coverage, max_size=2),
    topology=st.none() | topology,
)
evidence = st.builds(
    Evidence,
    source=name,
    locator=text,
    ref=st.none() | locator,
    time=any_time,
    node=name,
    excerpt=text,
    time_latest=any_time,
)
chain_link = st.builds(
    ChainLink,
    time=any_time,
    node=name,
    kind=st.sampled_from(sorted(vocabulary().kinds)),
    role=st.sampled_from(["root_cause", "symptom"]),
    summary=text,
    evidence=evidence,
    gpu=st.none() | st.integers(0, 15),
    count=st.integers(1, 1000),
    time_quality=quality,
    time_latest=any_time,
)
candidate = st.builds(
    Candidate,
    category=st.sampled_from(sorted(vocabulary().categories)),
    nodes=st.lists(name, max_size=3),
    score=finite,
    rule=st.none() | name,
    summary=st.none() | text,
)
suspect = st.builds(
    Suspect, node=name, gpu=st.none() | st.integers(0, 15), pci=st.none() | name,
    port=st.none() | name,
)  # fmt: skip
lead = st.builds(
    Lead,
    node=name,
    gpu=st.none() | st.integers(0, 15),
    rank=st.none() | st.integers(0, 10**6),
    process_group=st.none() | name,
    seq=st.none() | st.integers(0, 10**9),
    why=text,
    evidence=st.lists(text, max_size=3),
)
attribution_result = st.builds(
    AttributionResult,
    leads=st.lists(lead, max_size=2),
    job_id=name,
    failed=st.booleans(),
    status=st.sampled_from(["attributed", "ambiguous", "unattributed", "not_failed"]),
    category=st.none() | st.sampled_from(sorted(vocabulary().categories)),
    candidates=st.lists(candidate, max_size=2),
    suspect_nodes=st.lists(name, max_size=2),
    symptom_chain=st.lists(chain_link, max_size=2),
    evidence=st.lists(evidence, max_size=2),
    rules_version=name,
    confidence=st.none() | finite,
    scope=st.none() | st.sampled_from(["node", "shared"]),
    suspects=st.lists(suspect, max_size=2),
    notes=st.lists(text, max_size=2),
    coverage=st.lists(source_coverage, max_size=2),
    analyzed_at=st.none() | aware,
)
# the window path: the query a window asks the scheduler, the window, the settings
job_query = st.builds(
    JobQuery,
    since=aware,
    until=st.none() | aware,
    states=st.lists(st.sampled_from(list(JobState)), max_size=3).map(tuple),
    partitions=st.lists(name, max_size=2).map(tuple),
    namespaces=st.lists(name, max_size=2).map(tuple),
    limit=st.none() | st.integers(1, 10**6),
)
window = st.builds(Window, start=aware, end=aware)
analysis_settings = st.builds(
    AnalysisSettings,
    lead_seconds=st.floats(0, 1e7),
    lag_seconds=st.floats(0, 1e7),
    skew_seconds=st.floats(0, 1e4),
    max_line_bytes=st.integers(256, 1 << 24),
    workers=st.none() | st.integers(1, 64),
)
anchor = st.builds(
    Anchor, literal=st.text(min_size=3, max_size=20), context_after=st.integers(0, 40),
    last_only=st.booleans(),
)  # fmt: skip
source_limits = st.builds(SourceLimits, max_line_bytes=st.none() | st.integers(1, 1 << 24))

MODELS: list[tuple[type[BaseModel], Any]] = [
    (ExecutionContext, execution_context()),
    (PodRef, pod_ref),
    (RawRecord, raw_record),
    (MetricSample, metric_sample),
    (SourceCoverage, source_coverage),
    (LogBatch, log_batch),
    (RawEvidence, raw_evidence),
    (Observation, observation),
    (ObservationSet, observation_set),
    (Evidence, evidence),
    (ChainLink, chain_link),
    (Candidate, candidate),
    (Suspect, suspect),
    (Lead, lead),
    (FlightDump, flight_dump),
    (Topology, topology),
    (TopologySnapshots, topology_snapshots),
    (ClusterTopology, cluster_topology),
    (AttributionResult, attribution_result),
    (JobQuery, job_query),
    (Window, window),
    (AnalysisSettings, analysis_settings),
    (Anchor, anchor),
    (SourceLimits, source_limits),
]


def _roundtrip(model: type[BaseModel], value: BaseModel) -> None:
    assert model.model_validate(value.model_dump(mode="json")) == value
    assert model.model_validate_json(value.model_dump_json()) == value  # the asset store's form


@pytest.mark.parametrize(("model", "strategy"), MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_model_round_trips(model: type[BaseModel], strategy: Any) -> None:
    @SETTINGS
    @given(strategy)
    def check(value: BaseModel) -> None:
        _roundtrip(model, value)

    check()


@SETTINGS
@given(locator)
def test_locator_union_round_trips_and_keeps_its_variant(loc: Any) -> None:
    """A Locator read back is the same variant with the same fields, and renders the same."""
    adapter: TypeAdapter[Any] = TypeAdapter(Locator)
    back = adapter.validate_python(adapter.dump_python(loc, mode="json"))
    assert back == loc and type(back) is type(loc) and str(back) == str(loc)


def test_tails_and_progress_survive_the_asset_store() -> None:
    """The bug this file guards: what the engine's silence and progress tests read is still
    there after the raw_evidence asset's value is stored and read back."""
    t = datetime(2026, 11, 2, 10, 0, 0, 123456, tzinfo=timezone.utc)
    tail = RawRecord(
        source="files", node="node-a", time=t, text="last line", stream="app.log",
        locator=FileLine(root="/cases/c1", path="logs/node-a/app.log", line=32), last_of_file=True,
    )  # fmt: skip
    raw = RawEvidence(
        job_id="1", tails=[tail], progress=[tail.model_copy(update={"last_of_file": False})]
    )
    back = RawEvidence.model_validate_json(raw.model_dump_json())
    assert back.tails == [tail] and back.progress == raw.progress
    assert (
        back.tails[0].locator.root == "/cases/c1"
        and str(back.tails[0].locator) == "logs/node-a/app.log:32"
    )


def test_a_locator_renders_as_the_contract_string() -> None:
    """The spec's `locator` strings, unchanged by typing them."""
    assert (
        str(FileLine(root="/c", path="logs/node-b/kern.log", line=32)) == "logs/node-b/kern.log:32"
    )
    assert str(FileLine(path="context.json", field="state")) == "context.json:state"
    assert str(QueryAt(language="logql", query='{host="a"}', at_ns=17)) == '{host="a"} @ns:17'
    at = 1763630000_123_000_000
    assert str(QueryAt(language="promql", query="up", at_ns=at)) == "promql: up @ 1763630000.123"
    assert (
        str(QueryAt(language="promql", query="up", at_ns=1763630060 * 10**9))
        == "promql: up @ 1763630060"
    )
    pod = KubeObject(
        kind="pod_log", namespace="ns", name="p", container="c", previous=True, field="line 3"
    )
    assert str(pod) == "pod ns/p container c previous @ line 3"
    assert str(KubeObject(kind="event", namespace="default", name="n.1")) == "event default/n.1"


def test_a_non_finite_sample_is_refused_not_lost() -> None:
    """JSON has no NaN or infinity: a sample holding one would come back as null. Sources
    drop non-finite values; the model refuses them so none can slip through a boundary."""
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            MetricSample(
                source="x", node="n", locator=Note(text="x"), time=datetime.now(timezone.utc),
                name="m", value=bad,
            )  # fmt: skip


def test_extra_context_keys_survive_when_json_native() -> None:
    """ExecutionContext allows extra keys (a scheduler's own detail, context.json keys we do
    not model); they come from JSON, and come back equal."""
    ctx = ExecutionContext(
        job_id="1", scheduler="static", state="FAILED", nodes=["a"], site={"rack": [1, 2]},
        start=datetime(2026, 1, 1, tzinfo=timezone.utc),
        end=datetime(2026, 1, 1, 1, tzinfo=timezone.utc),
    )  # fmt: skip
    back = ExecutionContext.model_validate(ctx.model_dump(mode="json"))
    assert back == ctx and back.model_extra == {"site": {"rack": [1, 2]}}


# --- the step values of every bundled case survive the asset boundary --------------------------

_ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
_CASES = sorted(
    p.parent
    for base in (_ROOT / "samples", _ROOT / "tests" / "heldout")
    for p in base.glob("**/expected.json")
    if (p.parent / "context.json").is_file()
)


def test_every_case_gives_the_same_result_after_each_step_is_stored_and_read_back() -> None:
    """What the per-job assets do (execution_context -> raw_evidence -> observations ->
    attribution, each value stored as JSON and read back by the next) gives the full result
    the direct path gives, on every sample and held-out case: what was lost before
    (`file_tails` / `file_progress`, excluded from serialization) now crosses the boundary."""
    from attribution_dagster import pipeline

    assert len(_CASES) > 100
    differ = []
    for case in _CASES:
        ctx = pipeline.load_context(case)
        raw = pipeline.collect_evidence(case, ctx)
        direct = pipeline.attribute(
            ctx, pipeline.normalize(raw, ctx), raw.coverage, topology=raw.topology
        )
        ctx2 = ExecutionContext.model_validate_json(ctx.model_dump_json())
        raw2 = RawEvidence.model_validate_json(raw.model_dump_json())
        assert raw2.topology == raw.topology
        obs = ObservationSet(
            observations=pipeline.normalize(raw2, ctx2),
            coverage=raw2.coverage,
            topology=raw2.topology,
        )
        obs2 = ObservationSet.model_validate_json(obs.model_dump_json())
        assert obs2.topology == raw.topology
        stored = pipeline.attribute(ctx2, obs2.observations, obs2.coverage, topology=obs2.topology)
        stored = AttributionResult.model_validate_json(stored.model_dump_json())
        if stored.model_dump(exclude={"analyzed_at"}) != direct.model_dump(exclude={"analyzed_at"}):
            differ.append(case.name)
    assert differ == []
