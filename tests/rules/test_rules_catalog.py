"""Every rule in rules.yaml fires on its own example and yields its role / category;
a malformed rules file is refused with the rule id and field named."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.rules.docs import rules_markdown
from attribution_dagster.rules.engine import load_engine
from attribution_dagster.rules.engine.engine import DEFAULT_RULES
from attribution_dagster.rules.engine.rulebook import RulebookError
from attribution_dagster.rules.vocabulary import vocabulary

ENGINE = load_engine()
RULES = ENGINE.rules
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
EVENT = T0 + timedelta(minutes=30)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def _ctx(state: JobState, gpu_model: str | None) -> ExecutionContext:
    return ExecutionContext(
        job_id="cat-1",
        scheduler="slurm",
        state=state,
        exit_code=0 if state is JobState.COMPLETED else 1,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=["node-a", "node-b"],
        gpu_model=gpu_model,
    )


def _timeout(node: str, t: datetime) -> Observation:
    return Observation(
        kind="collective_timeout",
        node=node,
        time=t,
        excerpt="[Rank 3] Watchdog caught collective operation timeout",
        source="files",
        locator=f"logs/{node}/app.log:10",
        parser="test",
    )


def test_version_names_the_file_hash() -> None:
    assert re.fullmatch(r"\d{4}\.\d+\.\d+\+[0-9a-f]{8}", ENGINE.rules_version)
    import hashlib

    digest = hashlib.sha256(DEFAULT_RULES.read_bytes()).hexdigest()[:8]
    assert ENGINE.rules_version.endswith(digest)


def test_catalog_covers_every_category() -> None:
    covered = {r.category for r in RULES if r.role == "cause"}
    assert covered == set(vocabulary().categories)


# Every XID of FIELD-FACTS section 1, as its own description reads: (role, category) on a
# Blackwell job (the NVLink5 XIDs 144-150 exist only there). Hardware faults are causes;
# IGNORE-resolution events and XID 154 are informational; 43 / 45 follow another error.
# XID 63 (a row remap that succeeded, IGNORE) is the spec's gpu.memory example, so it is a
# cause of low weight that only counts when no other cause fits (test_engine covers that).
_XID_ROLES: dict[int, tuple[str, str | None]] = {
    **{c: ("cause", "gpu.memory") for c in (48, 64, 94, 95, 140, 157)},
    **{c: ("cause", "gpu.nvlink") for c in (74, 136, *range(144, 151), 155, 166, 170)},
    **{c: ("cause", "gpu.driver") for c in (8, 46, 62, 109, 119, 120, 143, 158, 169)},
    **{c: ("cause", "gpu.lost") for c in (79, 167)},
    **{c: ("cause", "app.error") for c in (13, 31, 32, 69)},
    **{c: ("symptom", None) for c in (43, 45, 92, 121, 137, 154, 156, 162, 163, 164, 165, 168)},
    63: ("cause", "gpu.memory"),
}


def test_every_xid_in_the_table_has_its_field_facts_role() -> None:
    assert set(_XID_ROLES) == set(vocabulary().xids)
    wrong = {}
    for code, want in _XID_ROLES.items():
        obs = Observation(
            kind="xid", node="node-a", time=EVENT, code=code, attrs={"fatal": None},
            excerpt=f"NVRM: Xid (PCI:0000:91:00): {code}, test", source="t", locator="t:1",
            parser="t",
        )  # fmt: skip
        hit = ENGINE.classify(obs, "GB200", JobState.FAILED)
        got = (hit.role, hit.category) if hit else None
        if got != want:
            wrong[code] = (got, want)
    assert not wrong


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_classifies_its_example(rule) -> None:  # type: ignore[no-untyped-def]
    obs = rule.example.observation("node-a", EVENT)
    state = rule.example.state or JobState.FAILED
    hit = ENGINE.classify(obs, rule.example.gpu_model, state)
    assert hit is not None and hit.id == rule.id, (
        f"example of {rule.id} classified by {hit and hit.id}"
    )


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_fires_in_a_job(rule) -> None:  # type: ignore[no-untyped-def]
    state = rule.example.state or JobState.FAILED
    ctx = _ctx(state, rule.example.gpu_model)
    obs = [rule.example.observation("node-a", EVENT, locator="logs/node-a/kern.log:7")]
    if rule.example.kind == "job_state":
        obs = (
            []
            if state
            in (
                JobState.TIMEOUT,
                JobState.NODE_FAIL,
                JobState.OUT_OF_MEMORY,
                JobState.PREEMPTED,
                JobState.CANCELLED,
            )
            else obs
        )
    obs.append(_timeout("node-b", EVENT + timedelta(seconds=4)))
    result = ENGINE.attribute(ctx, obs, [])
    AttributionResult.model_validate_json(result.model_dump_json())
    kinds = {(lk.kind, lk.role) for lk in result.symptom_chain}
    if rule.role == "cause" and rule.rivals:
        # the line fits several categories: a candidate of each, nothing decides
        assert result.status == "ambiguous", result.notes
        assert {c.category for c in result.candidates} == {rule.category, *rule.rivals}
        assert (rule.example.kind, "root_cause") in kinds
        assert result.suspect_nodes == ["node-a"]
    elif rule.role == "cause":
        assert result.status == "attributed", result.notes
        assert result.category == rule.category
        assert result.rule == rule.id
        assert (rule.example.kind, "root_cause") in kinds
        if rule.locates and rule.scope == "node":
            assert result.suspect_nodes == ["node-a"]
        if not rule.locates:
            assert result.suspect_nodes == []
    elif rule.role == "symptom":
        assert result.status == "unattributed"
        assert (rule.example.kind, "symptom") in kinds
    else:
        assert result.status == "unattributed"
        assert all(lk.kind != rule.example.kind for lk in result.symptom_chain)


def test_nonfatal_nvlink_counter_example_is_noise_but_fatal_is_cause() -> None:
    nonfatal = next(r for r in RULES if r.id == "xid.nvlink5.nonfatal").example
    fatal_obs = nonfatal.model_copy(update={"attrs": {"fatal": True}}).observation("node-a", EVENT)
    assert ENGINE.classify(fatal_obs, "GB200", JobState.FAILED).role == "cause"  # type: ignore[union-attr]
    assert (
        ENGINE.classify(nonfatal.observation("node-a", EVENT), "GB200", JobState.FAILED).role
        == "noise"
    )  # type: ignore[union-attr]


def test_describe_lists_every_rule() -> None:
    described = ENGINE.describe()
    assert [d["id"] for d in described] == [r.id for r in RULES]
    assert all(d["example"] for d in described)
    assert all(d["category"] in vocabulary().categories for d in described if d["role"] == "cause")


def test_docs_are_generated_from_the_catalog() -> None:
    md = rules_markdown(ENGINE)
    for r in RULES:
        assert f"`{r.id}`" in md
    assert DOCS.exists(), (
        "run: attribution rules --markdown > docs/rules.md (make docs)"
    )
    assert DOCS.read_text() == md, "docs/rules.md is stale; regenerate it"


# ---- malformed catalogs --------------------------------------------------------------


def _write(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(DEFAULT_RULES.read_text())
    mutate(data)
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _rule(data: dict, rid: str) -> dict:
    return next(r for r in data["rules"] if r["id"] == rid)


@pytest.mark.parametrize(
    ("rid", "mutation", "field"),
    [
        ("xid.79.fallen_off_bus", lambda r: r.update(category="gpu.lots"), "category"),
        ("xid.79.fallen_off_bus", lambda r: r.update(role="culprit"), "role"),
        ("ib.link_down", lambda r: r["match"].update(kind="ib_link_dwn"), "match"),
        ("lustre.error", lambda r: r["match"].update({"attrs.rc": {"regex": "(["}}), "match"),
        ("lustre.error", lambda r: r["match"].update({"colour": "red"}), "match"),
        ("cuda.oom", lambda r: r.update(weight=250), "weight"),
        ("cuda.oom", lambda r: r["example"].update(kind="nccl_warn"), "example"),
        ("cuda.oom", lambda r: r.update(explains=["gpu.wat"]), "explains"),
        ("cuda.oom", lambda r: r.update(summary="OOM {nonsense}"), "summary"),
        ("nccl.warn", lambda r: r.update(category="app.error"), "category"),
        ("nccl.warn", lambda r: r.update(terminal=True), "terminal"),
        ("nfs.not_responding", lambda r: r.update(recovered_by={"kind": "nfs_ok"}), "recovered_by"),
    ],
)
def test_bad_rule_names_rule_and_field(tmp_path: Path, rid: str, mutation, field: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, lambda d: mutation(_rule(d, rid)))
    with pytest.raises(RulebookError) as err:
        load_engine(path)
    msg = str(err.value)
    assert f"rule '{rid}'" in msg and field in msg, msg


def test_duplicate_rule_id_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda d: d["rules"].append(dict(d["rules"][0])))
    with pytest.raises(RulebookError, match="duplicate"):
        load_engine(path)


def test_not_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules: [ {id: x\n")
    with pytest.raises(RulebookError, match="not valid YAML"):
        load_engine(path)


def test_operator_can_add_a_rule_without_code(tmp_path: Path) -> None:
    """A new rule placed above the generic ones takes effect and changes the version."""

    def add(d: dict) -> None:
        rule = {
            "id": "xid.121.c2c",
            "description": "Grace-GPU chip-to-chip error",
            "match": {"kind": "xid", "code": 121},
            "role": "cause",
            "category": "gpu.lost",
            "weight": 80,
            "summary": "XID 121 C2C error on {node} {gpu_ref}",
            "example": {"kind": "xid", "code": 121},
        }
        d["rules"].insert(0, rule)

    engine = load_engine(_write(tmp_path, add))
    assert engine.rules_version != ENGINE.rules_version
    obs = Observation(
        kind="xid",
        node="node-a",
        time=EVENT,
        code=121,
        excerpt="Xid 121",
        source="files",
        locator="kern.log:1",
        parser="t",
    )
    result = engine.attribute(_ctx(JobState.FAILED, "GB200"), [obs, _timeout("node-b", EVENT)], [])
    assert (result.status, result.category, result.rule) == (
        "attributed",
        "gpu.lost",
        "xid.121.c2c",
    )
    # the packaged catalog only lists it as a symptom
    assert ENGINE.attribute(_ctx(JobState.FAILED, "GB200"), [obs], []).status == "unattributed"
