"""The one Slurm hostlist expander (core/hostlist.py): strict for records and topology
files, lenient for names found in free text."""

from __future__ import annotations

import pytest

from attribution_dagster.connectors.slurm import records
from attribution_dagster.core import hosts
from attribution_dagster.core.hostlist import expand_hostlist, expand_hostlist_lenient


def test_one_implementation_behind_every_layer() -> None:
    assert records.expand_hostlist is expand_hostlist
    assert hosts.expand_hostlist is expand_hostlist_lenient


def test_strict_expands_what_topology_files_write() -> None:
    assert expand_hostlist("lrdn[0001-0003,0013]") == [
        "lrdn0001",
        "lrdn0002",
        "lrdn0003",
        "lrdn0013",
    ]
    assert expand_hostlist("isw1[0100,0102]") == ["isw10100", "isw10102"]
    assert expand_hostlist("s[0-2],s1") == ["s0", "s1", "s2"]
    assert len(expand_hostlist("gpu-[0000-4095]")) == 4096
    with pytest.raises(ValueError, match="bad range"):
        expand_hostlist("node-[a-b]")


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("cn-[01-02],node-[b-c]", ["cn-01", "cn-02", "node-[b-c]"]),  # a bad part kept
        ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
        ("n[0-99999999]", ["n[0-99999999]"]),  # wider than HOSTLIST_MAX: not expanded
        ("x]y,z", ["x]y", "z"]),
    ],
)
def test_lenient_keeps_what_it_cannot_expand(expr: str, names: list[str]) -> None:
    assert expand_hostlist_lenient(expr) == names
