"""core/formats/startcache.py: entries keyed by what they were built from, written atomically, and
never an error; YAML data round-trips exactly (dates included) or is not cached; a cached
hyperscan database finds what a freshly compiled one finds."""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster.core.formats import matchers, startcache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(startcache.ENV, str(where))
    return where


def test_where_the_cache_lives(tmp_path: Path) -> None:
    default = Path.home() / ".cache" / "attribution-dagster"
    assert startcache.cache_dir({}) == default
    xdg = {"XDG_CACHE_HOME": str(tmp_path)}
    assert startcache.cache_dir(xdg) == tmp_path / "attribution-dagster"
    assert startcache.cache_dir({"XDG_CACHE_HOME": "relative"}) == default  # XDG: ignored
    env = {startcache.ENV: str(tmp_path / "c"), "XDG_CACHE_HOME": "/x"}
    assert startcache.cache_dir(env) == tmp_path / "c"
    for off in ("off", "OFF", "0", "none", "false", "no"):
        assert startcache.cache_dir({startcache.ENV: off}) is None


def test_no_home_directory_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def nowhere() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(startcache.ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(nowhere))
    assert startcache.cache_dir() is None
    path = tmp_path / "d.yaml"
    path.write_text("a: 1\n")
    loaded = startcache.load(path)
    startcache.store(loaded)  # nowhere to write: no error
    assert loaded.data == {"a": 1} and not startcache.load(path).cached


def test_entries_are_keyed_and_checked(cache: Path) -> None:
    key = startcache.digest(b"yaml", b"a: 1\n")
    assert startcache.read_entry("x.bin", key) is None  # nothing yet
    startcache.write_entry("x.bin", key, b"body")
    assert startcache.read_entry("x.bin", key) == b"body"
    assert startcache.read_entry("x.bin", startcache.digest(b"yaml", b"a: 2\n")) is None
    raw = (cache / "x.bin").read_bytes()
    (cache / "x.bin").write_bytes(raw[:-1] + b"B")  # body no longer matches its digest
    assert startcache.read_entry("x.bin", key) is None
    assert [p.name for p in cache.iterdir()] == ["x.bin"]  # no temp file left behind
    # the parts of a key are delimited: ("ab", "c") and ("a", "bc") differ
    assert startcache.digest(b"ab", b"c") != startcache.digest(b"a", b"bc")


def test_another_users_entry_is_not_read(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = startcache.digest(b"k")
    startcache.write_entry("x.bin", key, b"body")
    assert startcache.read_entry("x.bin", key) == b"body"
    owner = (cache / "x.bin").stat().st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # as if another user wrote it
    assert startcache.read_entry("x.bin", key) is None


def test_a_failed_write_leaves_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: str, dst: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    startcache.write_entry("x.bin", startcache.digest(b"k"), b"body")  # no exception
    assert list(cache.iterdir()) == []


def test_yaml_data_round_trips_exactly(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        "day: 2026-12-05\nat: 2026-12-05T10:00:00+02:00\nnaive: 2026-12-05 10:00:00\n"
        "n: 1\nf: 1.5\nb: true\nnone: null\n7: seven\nlist: [1, '2', [2026-01-01]]\n"
    )
    first = startcache.load(path)
    assert not first.cached
    startcache.store(first)
    second = startcache.load(path)
    assert second.cached
    assert second.data == first.data
    assert second.data["at"].utcoffset() == timedelta(hours=2)
    assert second.data["naive"].tzinfo is None
    assert type(second.data["day"]) is date and type(second.data["at"]) is datetime
    assert second.data[7] == "seven"  # a non-string key stays an int
    assert second.data["list"][2] == [date(2026, 1, 1)]
    assert datetime(2026, 12, 5, 8, tzinfo=timezone.utc) == second.data["at"]


def test_data_marshal_cannot_hold_is_not_cached(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("s: !!set {2026-12-05: null}\n")  # a set of dates: not tagged
    loaded = startcache.load(path)
    startcache.store(loaded)  # no exception, no entry
    assert not startcache.load(path).cached
    assert startcache.load(path).data == {"s": {date(2026, 12, 5)}}


@pytest.mark.skipif(not matchers.HYPERSCAN_IMPORTABLE, reason="hyperscan wheel not installed")
def test_a_cached_hyperscan_database_finds_the_same_lines(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lits = [b"Xid", b"NCCL WARN", b"error", b"link down"]
    text = b"ok\nNVRM: Xid 79\nfine\nNCCL WARN x\nlink down, error\n"
    buf = bytearray(text)
    fresh = matchers.HyperscanMatcher(lits)  # compiled, then stored
    assert len(list(cache.glob("scan.hs"))) == 1
    with monkeypatch.context() as m:  # loaded: no database is compiled
        m.setattr(matchers._hs, "Database", None)
        cached = matchers.HyperscanMatcher(lits)
    want = fresh.hit_lines(buf, memoryview(buf), len(buf))
    assert [bytes(buf[s:e]) for s, e in want] == [
        b"NVRM: Xid 79",
        b"NCCL WARN x",
        b"link down, error",
    ]
    assert cached.hit_lines(buf, memoryview(buf), len(buf)) == want
    # other literals: another key, compiled afresh (not the cached database)
    other = matchers.HyperscanMatcher([b"fine"])
    assert [bytes(buf[s:e]) for s, e in other.hit_lines(buf, memoryview(buf), len(buf))] == [
        b"fine"
    ]
    # a damaged entry: compiled afresh, same lines
    entry = cache / "scan.hs"
    raw = entry.read_bytes()
    key = startcache.digest(b"unused")
    entry.write_bytes(raw[:6] + raw[6:38] + key + raw[70:])  # body digest wrong
    again = matchers.HyperscanMatcher(lits)
    assert again.hit_lines(buf, memoryview(buf), len(buf)) == want
