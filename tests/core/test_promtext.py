"""Prometheus text exposition parsing (connectors/promtext.py)."""

from __future__ import annotations

import math

import pytest

from attribution_dagster.core.formats.promtext import (
    PromSyntaxError,
    parse_line,
    parse_text,
    sample_node,
    sample_nodes,
)


def test_sample_with_labels_and_ms_timestamp() -> None:
    name, labels, value, ts = parse_line(
        'DCGM_FI_DEV_XID_ERRORS{Hostname="node-b",gpu="3"} 149 1793613791000'
    )
    assert (name, labels, value, ts) == (
        "DCGM_FI_DEV_XID_ERRORS",
        {"Hostname": "node-b", "gpu": "3"},
        149.0,
        1793613791000,
    )


def test_no_labels_no_timestamp() -> None:
    assert parse_line("up 1") == ("up", {}, 1.0, None)


def test_escaped_label_values() -> None:
    _, labels, _, _ = parse_line(r'm{a="say \"hi\"",b="back\\slash",c="two\nlines",d=""} 2 5')
    assert labels == {"a": 'say "hi"', "b": "back\\slash", "c": "two\nlines", "d": ""}


def test_trailing_comma_and_spaces() -> None:
    assert parse_line('m{ a = "1" , } 3 7')[1] == {"a": "1"}


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("NaN", math.isnan),
        ("+Inf", math.isinf),
        ("-Inf", math.isinf),
        ("1.5e3", lambda v: v == 1500),
    ],
)
def test_special_values(text: str, check) -> None:  # type: ignore[no-untyped-def]
    assert check(parse_line(f"m {text} 1")[2])


@pytest.mark.parametrize(
    "line",
    [
        '{a="1"} 3',  # no name
        'm{a="1} 3',  # unterminated value
        "m{a=1} 3",  # unquoted value
        'm{a="1" b="2"} 3',  # missing comma
        "m abc",  # bad value
        "m 1 2 3",  # too many fields
        "m 1 notats",  # bad timestamp
        "m",  # no value
        'm{a="1"}3',  # no space before value
        "9m 1",
    ],
)
def test_malformed_lines_raise(line: str) -> None:
    with pytest.raises(PromSyntaxError):
        parse_line(line)


def test_parse_text_skips_comments_and_counts_malformed() -> None:
    text = (
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        'DCGM_FI_DEV_GPU_TEMP{Hostname="n1",gpu="0"} 45 1000\n'
        "\n"
        "garbage line here\n"
        'DCGM_FI_DEV_GPU_TEMP{Hostname="n1",gpu="1"} 46 2000\n'
    )
    parsed = parse_text(text)
    assert [(s.line, s.value, s.timestamp_ms) for s in parsed.samples] == [
        (3, 45, 1000),
        (6, 46, 2000),
    ]
    assert parsed.malformed == [5]
    assert parsed.lines == 6


@pytest.mark.parametrize(
    ("labels", "node"),
    [
        ({"Hostname": "node-a", "instance": "x:9400"}, "node-a"),
        ({"instance": "node-b:9100"}, "node-b"),
        ({"instance": "node-b"}, "node-b"),
        ({"instance": "[fe80::1]:9100"}, "fe80::1"),
        ({"node": "node-c"}, "node-c"),
        ({"gpu": "0"}, None),
    ],
)
def test_sample_node(labels: dict[str, str], node: str | None) -> None:
    assert sample_node(labels) == node


def test_sample_nodes_lists_every_node_label_in_preference_order() -> None:
    labels = {"Hostname": "dcgm-exporter-x7", "instance": "10.0.0.7:9400", "node": "gpu-7"}
    assert sample_nodes(labels) == ["dcgm-exporter-x7", "10.0.0.7", "gpu-7"]
    assert sample_nodes({"instance": "gpu-7:9100", "node": "gpu-7"}) == ["gpu-7"]
    assert sample_nodes({"gpu": "0"}) == []
