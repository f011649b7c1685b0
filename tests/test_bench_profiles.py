"""Issue 16's large bench profiles have a right answer: each generated at a tiny scale (same
shape, fewer nodes and lines) is attributed to its planted cause, and bench/profiles.py
judges the issue's targets per row."""

from __future__ import annotations

import sys
from pathlib import Path

from attribution_dagster.pipeline import analyze_case

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from generate import OPT_IN, PROFILES, gen_fleet, gen_nccl_init_1g4  # noqa: E402
from profiles import DEFAULT_SCALE, MAX_RSS_MB, meets  # noqa: E402


def _count(path: Path, needle: bytes) -> int:
    return path.read_bytes().count(needle)


def test_fleet_1024_at_a_tiny_scale_names_the_ib_port_down(tmp_path: Path) -> None:
    case = gen_fleet(tmp_path / "case", scale=0.0005)  # 8 nodes, about 1 MB each
    nodes = sorted(p.name for p in (case / "logs").iterdir())
    assert len(nodes) == 8
    for host in nodes:
        app, kern = case / "logs" / host / "app.log", case / "logs" / host / "kern.log"
        assert _count(app, b"Init COMPLETE") == 48  # 6 communicators x 8 ranks
        assert _count(app, b"Watchdog caught collective operation timeout") == 8  # every rank
        assert _count(kern, b"Link down") == (host == "node-0007")
        assert b"@HOST@" not in app.read_bytes() + kern.read_bytes()
    res = analyze_case(case)
    assert res.category == "network.fabric" and res.suspect_nodes == ["node-0007"]


def test_nccl_init_1g4_at_a_tiny_scale_names_the_xid_node(tmp_path: Path) -> None:
    case = gen_nccl_init_1g4(tmp_path / "case", scale=0.02)  # 2 nodes, 17 communicators
    for host in ("node-000", "node-001"):
        app = case / "logs" / host / "app.log"
        assert _count(app, b"Init COMPLETE") == 8 * int(875 * 0.02)  # 7,000 at scale 1
        assert _count(app, b"NCCL INFO Channel") >= 16 * 8 * int(875 * 0.02)
    res = analyze_case(case)
    assert res.category == "gpu.lost" and res.suspect_nodes == ["node-001"]


def test_targets_per_row() -> None:
    assert meets("fleet_1024", 0.9, 3.1, 299.0) == {"grep": True, "cat": False, "rss": True}
    assert meets("nccl_init_1g4", 1.2, 2.0, 151.0) == {"grep": False, "cat": True, "rss": False}
    assert "rss" not in meets("today", 1.0, 3.0, 9999.0)  # no RSS limit set for it
    assert MAX_RSS_MB == {"nccl_init_1g4": 150, "fleet_1024": 300}


def test_every_profile_has_a_default_scale_and_the_10g_one_is_opt_in() -> None:
    assert set(DEFAULT_SCALE) == set(PROFILES)
    assert OPT_IN == ("fleet_1024",)
