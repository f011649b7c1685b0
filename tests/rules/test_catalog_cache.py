"""The start-up cache of the catalogs (core/formats/startcache.py): a catalog read through it is the
catalog parsed from YAML, whatever state the cache is in (missing, stale, corrupt,
unwritable, off), an edit of the YAML is seen at once, and a bad regex is still refused."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from attribution_dagster.core.formats import startcache
from attribution_dagster.rules.engine import load_engine
from attribution_dagster.rules.engine.engine import DEFAULT_RULES
from attribution_dagster.rules.parsers import CATALOG_PATH, CatalogError, load_catalog
from attribution_dagster.rules.vocabulary import RULES_DIR, load_vocabulary

FRESH = load_catalog()  # parsed from YAML, every regex compiled


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(startcache.ENV, str(where))
    return where


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The packaged parsers.yaml, copied: the tests edit it."""
    dst = tmp_path / "cat" / "parsers.yaml"
    dst.parent.mkdir()
    shutil.copy(CATALOG_PATH, dst)
    return dst


def _parsed_examples(cat) -> list[tuple[str, list[str]]]:  # type: ignore[no-untyped-def]
    """Every parser example replayed: the observations' parser, kind, node and attrs."""
    out = []
    for p in cat.parsers:
        for ex in p.spec.examples:
            obs = cat.example_observations(ex)
            out.append((p.spec.id, sorted(f"{o.parser}/{o.kind}/{o.node}/{o.attrs}" for o in obs)))
    return out


def _same_as_fresh(cat) -> None:  # type: ignore[no-untyped-def]
    assert cat.describe() == FRESH.describe()
    assert [p.spec for p in cat.parsers] == [p.spec for p in FRESH.parsers]
    assert [a.model_dump() for a in cat.anchors(last_only=True)] == [
        a.model_dump() for a in FRESH.anchors(last_only=True)
    ]
    assert _parsed_examples(cat) == _parsed_examples(FRESH)


def test_a_cached_catalog_is_the_parsed_one(cache: Path, copy: Path) -> None:
    first = load_catalog(copy, cached=True)  # parsed, validated, then stored
    entries = list(cache.glob("parsers-*.bin"))
    assert len(entries) == 1
    second = load_catalog(copy, cached=True)  # from the entry
    # the cached catalog compiles its regexes on first use: none is compiled yet
    assert all(p._rx is None for p in second.parsers)
    assert all(p._rx is not None for p in first.parsers)
    assert [p.group_names for p in second.parsers] == [p.group_names for p in FRESH.parsers]
    _same_as_fresh(first)
    _same_as_fresh(second)


def test_an_edit_of_the_yaml_is_seen_at_once(cache: Path, copy: Path) -> None:
    load_catalog(copy, cached=True)
    load_catalog(copy, cached=True)
    text = copy.read_text(encoding="utf-8")
    first = FRESH.parsers[0].spec.id
    edited = text.replace(f"- id: {first}\n", f"- id: {first}_edited\n", 1)
    assert edited != text
    copy.write_text(edited, encoding="utf-8")
    cat = load_catalog(copy, cached=True)
    assert cat.parsers[0].spec.id == f"{first}_edited"
    assert [p.spec.id for p in cat.parsers[1:]] == [p.spec.id for p in FRESH.parsers[1:]]
    copy.write_text(text, encoding="utf-8")  # and back
    assert load_catalog(copy, cached=True).parsers[0].spec.id == first


def test_a_corrupt_or_foreign_entry_falls_back_to_the_yaml(cache: Path, copy: Path) -> None:
    load_catalog(copy, cached=True)
    (entry,) = cache.glob("parsers-*.bin")
    good = entry.read_bytes()
    damaged = [
        b"",  # empty
        good[:100],  # torn
        good[:-10] + b"x" * 10,  # body changed: its digest no longer matches
        b"garbage" + good[7:],  # another format
        good[:6] + bytes(32) + good[38:],  # another key (stale)
    ]
    for bad in damaged:
        entry.write_bytes(bad)
        cat = load_catalog(copy, cached=True)
        assert cat.describe() == FRESH.describe()
        assert all(p._rx is not None for p in cat.parsers)  # parsed and compiled afresh
        again = load_catalog(copy, cached=True)  # the entry was written again
        assert all(p._rx is None for p in again.parsers)
    _same_as_fresh(load_catalog(copy, cached=True))


def test_an_unwritable_or_disabled_cache_still_loads(
    tmp_path: Path, copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(startcache.ENV, str(blocker / "cache"))  # cannot be created
    _same_as_fresh(load_catalog(copy, cached=True))
    for off in ("off", "0", "none"):
        monkeypatch.setenv(startcache.ENV, off)
        assert startcache.cache_dir() is None
        cat = load_catalog(copy, cached=True)
        assert all(p._rx is not None for p in cat.parsers)
        assert cat.describe() == FRESH.describe()


def test_a_bad_regex_is_refused_with_or_without_the_cache(cache: Path, tmp_path: Path) -> None:
    good = (
        "parsers:\n  - id: x\n    kind: xid\n    anchors: [abcd]\n    regex: 'ab(?P<c>cd)'\n"
        "    examples: [{line: abcd, expect: {}}]\n"
    )
    path = tmp_path / "p.yaml"
    path.write_text(good)
    load_catalog(path, cached=True)
    assert load_catalog(path, cached=True).parsers[0]._rx is None  # a cached, good catalog
    path.write_text(good.replace("(?P<c>cd)", "(?P<c>cd"))  # the operator's typo
    for _ in range(2):  # a refused catalog is never cached
        with pytest.raises(CatalogError, match="bad regex"):
            load_catalog(path, cached=True)
    with pytest.raises(CatalogError, match="bad regex"):
        load_catalog(path)


def test_a_file_that_is_not_utf8_is_a_catalog_error(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(b"parsers: []\nnoise: ['\xff\xfe']\n")
    for cached in (True, False):
        with pytest.raises(CatalogError):
            load_catalog(path, cached=cached)


def test_vocabulary_and_rules_through_the_cache(cache: Path) -> None:
    fresh = load_vocabulary()
    assert load_vocabulary(cached=True) == fresh  # parsed and stored
    names = sorted(p.name.split("-")[0] for p in cache.glob("*.bin"))
    assert names == ["categories", "kinds", "xids"]  # xids.yaml holds dates: tagged, kept
    assert load_vocabulary(cached=True) == fresh
    assert all(isinstance(x.date, date) for x in load_vocabulary(cached=True).xids.values())

    engine = load_engine(DEFAULT_RULES)
    for _ in range(2):
        cached = load_engine(DEFAULT_RULES, cached=True)
        assert cached.rulebook == engine.rulebook
        assert cached.rules_version == engine.rules_version
    assert len(list(cache.glob("rules-*.bin"))) == 1
    assert RULES_DIR == DEFAULT_RULES.parent
