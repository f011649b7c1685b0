"""kinds.yaml, categories.yaml and xids.yaml: the vocabulary operators edit.

Every kind a parser emits and every category a rule names must exist in the data; every kind
the data lists must have a producer; every XID entry must say where it came from and when.
Malformed files fail with the file and the entry named.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml

from attribution_dagster.rules import catalog
from attribution_dagster.rules.engine import outcome, peers
from attribution_dagster.rules.engine.rulebook import SYMPTOMS_TOKEN
from attribution_dagster.rules.vocabulary import (
    RULES_DIR,
    VocabularyError,
    category_meanings,
    load_vocabulary,
    vocabulary,
)

VOCAB = vocabulary()
PARSERS = catalog.parsers()
ENGINE = catalog.engine()


def _parser_kinds() -> set[str]:
    kinds = {p.spec.kind for p in PARSERS.parsers}
    kinds |= {k for m in PARSERS.metric_specs for k in (m.kind, m.recover_kind) if k}
    for p in PARSERS.parsers:
        for ex in p.spec.examples:
            expects = ex.expect if isinstance(ex.expect, list) else [ex.expect]
            kinds |= {e["kind"] for e in expects if isinstance(e, dict) and "kind" in e}
    return kinds


def test_vocabulary_is_cached_once() -> None:
    assert vocabulary() is vocabulary()
    assert load_vocabulary() == VOCAB  # the uncached loader reads the same files


def test_every_kind_a_parser_emits_is_in_kinds_yaml() -> None:
    assert _parser_kinds() <= set(VOCAB.kinds)


def test_every_listed_kind_has_a_producer() -> None:
    emitted = _parser_kinds()
    for name, kind in VOCAB.kinds.items():
        if kind.made_by == "parser":
            assert name in emitted, f"{name}: no parser emits it (made_by: parser)"
        else:
            assert name not in emitted, f"{name}: a parser emits it, yet made_by: {kind.made_by}"


def test_every_kind_the_engine_names_is_in_kinds_yaml() -> None:
    named = (
        peers.ENDING_KINDS
        | peers.PEER_KINDS
        | set(outcome.KIND_LABELS)
        | {"job_state", "node_silent", "progress", "log_last_line"}
    )
    assert named <= set(VOCAB.kinds)
    assert VOCAB.kinds["job_state"].made_by == "engine"
    assert VOCAB.kinds["node_silent"].made_by == "engine"


def test_every_category_a_rule_names_is_in_categories_yaml() -> None:
    cats = set(VOCAB.categories)
    for rule in ENGINE.rules:
        if rule.role == "cause":
            assert rule.category in cats, rule.id
        assert set(rule.rivals) <= cats, rule.id
        for entry in rule.explains + rule.yields_to:
            base = entry.split("@", 1)[0]
            assert base == SYMPTOMS_TOKEN or base in cats or base in VOCAB.kinds, (rule.id, entry)


def test_every_category_has_a_rule_and_a_meaning() -> None:
    used = {r.category for r in ENGINE.rules if r.role == "cause"}
    assert used == set(VOCAB.categories)
    assert category_meanings() == {k: c.meaning for k, c in VOCAB.categories.items()}


def test_every_xid_entry_has_a_source_and_a_date() -> None:
    assert len(VOCAB.xids) >= 40
    for code, x in VOCAB.xids.items():
        assert x.code == code
        assert x.source in VOCAB.sources, code
        assert VOCAB.sources[x.source].url.startswith("https://"), code
        assert isinstance(x.date, date) and x.date <= date.today(), code
        assert x.subsystem in VOCAB.subsystems, code
        assert x.meaning, code


def test_every_xid_code_a_rule_matches_is_in_the_table() -> None:
    codes: set[int] = set()
    for rule in ENGINE.rules:
        pred = rule.match.where.get("code")
        if "xid" not in rule.match.kinds or pred is None:
            continue
        codes |= {int(v) for v in pred.in_ or []}
        codes |= {int(pred.eq)} if pred.eq != "__unset__" else set()
        if pred.range:
            codes |= set(range(int(pred.range[0]), int(pred.range[1]) + 1))
    assert codes, "no rule matches XIDs by code"
    assert codes <= set(VOCAB.xids), sorted(codes - set(VOCAB.xids))


def test_the_xid_decoder_reads_the_table() -> None:
    from attribution_dagster.rules.decoders import DECODERS

    for code, x in VOCAB.xids.items():
        draft: dict = {"fields": {"code": code}, "attrs": {}}
        assert DECODERS["xid"]({"rest": "test"}, f"Xid {code}", draft)
        assert (draft["attrs"]["mnemonic"], draft["attrs"]["subsystem"]) == (
            x.mnemonic,
            x.subsystem,
        )
    draft = {"fields": {"code": 999}, "attrs": {}}
    DECODERS["xid"]({"rest": ""}, "Xid 999", draft)
    assert draft["attrs"]["mnemonic"] == "UNKNOWN"


# ---- malformed files ---------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    for name in ("kinds.yaml", "categories.yaml", "xids.yaml"):
        shutil.copy(RULES_DIR / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def test_an_xid_without_a_source_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "xids.yaml", lambda d: d["xids"][0].pop("source"))
    with pytest.raises(VocabularyError, match=r"xids.yaml: xids\.8\.source"):
        load_vocabulary(root)


def test_an_xid_with_an_unknown_source_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "xids.yaml", lambda d: d["xids"][0].update(source="a-blog"))
    with pytest.raises(VocabularyError, match="xid 8: source 'a-blog'"):
        load_vocabulary(root)


def test_an_xid_listed_twice_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "xids.yaml", lambda d: d["xids"].append(dict(d["xids"][0])))
    with pytest.raises(VocabularyError, match="xid 8: listed twice"):
        load_vocabulary(root)


def test_a_kind_with_an_unknown_domain_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "kinds.yaml", lambda d: d["kinds"]["xid"].update(domain="fpga"))
    with pytest.raises(VocabularyError, match=r"kinds.yaml: kinds\.xid\.domain"):
        load_vocabulary(root)


def test_a_category_without_meaning_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "categories.yaml", lambda d: d["categories"]["storage"].pop("meaning"))
    with pytest.raises(VocabularyError, match=r"categories.yaml: categories\.storage\.meaning"):
        load_vocabulary(root)
