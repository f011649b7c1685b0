"""context.json loading (connectors/static.py): valid cases and one readable error each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attribution_dagster.connectors.static.client import ContextError, StaticContextClient
from attribution_dagster.core.context import JobState

GOOD = {
    "job_id": "12345",
    "scheduler": "slurm",
    "cluster": "alpha",
    "state": "FAILED",
    "exit_code": 1,
    "start": "2026-11-02T10:00:00Z",
    "end": "2026-11-02T10:45:00Z",
    "nodes": ["node-a", "node-b"],
    "gpu_model": "H100",
    "log_timezone": "Europe/Berlin",
    "something_else": {"kept": True},
}


def write_case(tmp_path: Path, data: object, name: str = "case") -> Path:
    case = tmp_path / name
    case.mkdir(parents=True)
    text = data if isinstance(data, str) else json.dumps(data)
    (case / "context.json").write_text(text)
    return case


def load_error(case: Path) -> str:
    with pytest.raises(ContextError) as info:
        StaticContextClient().load(case)
    return str(info.value)


def test_loads_valid_context(tmp_path: Path) -> None:
    ctx = StaticContextClient().load(write_case(tmp_path, GOOD))
    assert ctx.job_id == "12345"
    assert ctx.state is JobState.FAILED
    assert ctx.nodes == ["node-a", "node-b"]
    assert ctx.start.utcoffset() is not None
    assert ctx.log_timezone == "Europe/Berlin"
    assert ctx.model_extra == {"something_else": {"kept": True}}


def test_optional_fields_default(tmp_path: Path) -> None:
    minimal = {k: GOOD[k] for k in ("job_id", "scheduler", "state", "start", "end", "nodes")}
    ctx = StaticContextClient().load(write_case(tmp_path, minimal))
    assert ctx.log_timezone == "UTC" and ctx.cluster is None and ctx.exit_code is None


def test_missing_case_dir(tmp_path: Path) -> None:
    msg = load_error(tmp_path / "nope")
    assert msg == f"case path does not exist: {tmp_path / 'nope'}"


def test_missing_context_file(tmp_path: Path) -> None:
    case = tmp_path / "c"
    case.mkdir()
    assert load_error(case) == f"{case / 'context.json'}: no such file"


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    case = write_case(tmp_path, '{\n  "job_id": "1",\n  "nodes": [,]\n}')
    msg = load_error(case)
    assert msg.startswith(f"{case / 'context.json'}: not valid JSON (line 3 column")


def test_not_an_object(tmp_path: Path) -> None:
    assert "expected a JSON object" in load_error(write_case(tmp_path, "[1, 2]"))


@pytest.mark.parametrize("field", ["job_id", "scheduler", "state", "start", "end", "nodes"])
def test_missing_required_field(tmp_path: Path, field: str) -> None:
    data = {k: v for k, v in GOOD.items() if k != field}
    case = write_case(tmp_path, data)
    assert load_error(case).startswith(f"{case / 'context.json'}: field '{field}' is missing")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start", "yesterday"),
        ("start", "2026-11-02T10:00:00"),  # no offset: ambiguous, rejected
        ("end", "2026-13-02T10:00:00Z"),
        ("state", "EXPLODED"),
        ("scheduler", "pbs"),
        ("nodes", []),
        ("nodes", "node-a"),
        ("exit_code", "one"),
        ("log_timezone", "Mars/Olympus"),
        ("nodes", ["node-a", ""]),
    ],
)
def test_bad_field_value(tmp_path: Path, field: str, value: object) -> None:
    case = write_case(tmp_path, {**GOOD, field: value})
    msg = load_error(case)
    assert msg.startswith(f"{case / 'context.json'}: field '{field}")
    assert "\n" not in msg


def test_end_before_start(tmp_path: Path) -> None:
    case = write_case(tmp_path, {**GOOD, "end": "2026-11-02T09:00:00Z"})
    assert "field 'end' is invalid" in load_error(case)


def test_list_cases_recursive_and_sorted(tmp_path: Path) -> None:
    write_case(tmp_path, GOOD, "b")
    write_case(tmp_path, GOOD, "a/nested")
    (tmp_path / "not-a-case").mkdir()
    (tmp_path / "not-a-case" / "readme.txt").write_text("x")
    found = StaticContextClient().list_cases(tmp_path)
    assert found == [tmp_path / "a" / "nested", tmp_path / "b"]


def test_list_cases_missing_root(tmp_path: Path) -> None:
    with pytest.raises(ContextError):
        StaticContextClient().list_cases(tmp_path / "missing")


def test_partition_keys_are_short_stable_and_never_shared():
    """issue 19: a safe short key is kept; a cleaned or long one ends in `~` + a hash of the
    exact name, so `a/b` and `a_b` (or Slurm `4812+1` and array task `4812_1`) differ."""
    from dagster import DagsterInstance

    from attribution_dagster.core.context import MAX_KEY, job_partition_key

    assert job_partition_key("gb200-nvl72-east", "4812") == "gb200-nvl72-east.4812"
    assert job_partition_key(None, "7") == "default.7"
    pairs = [("c", "a/b"), ("c", "a_b"), ("s", "4812+1"), ("s", "4812_1"), ("c", "a...b")]
    long_ids = [("gke-a3-mega-usc1", f"team-llm/{'pretrain-' * 12}{i}") for i in range(3)]
    keys = [job_partition_key(c, j) for c, j in pairs + long_ids]
    assert len(set(keys)) == len(keys)
    assert keys[1] == "c.a_b" and keys[0].startswith("c.a_b~") and keys[2].startswith("s.4812_1~")
    for (cluster, job), key in zip(pairs + long_ids, keys, strict=True):
        assert key == job_partition_key(cluster, job)  # stable
        assert key.split(".", 1)[0] == cluster  # the cluster is never cut
        assert len(key) <= MAX_KEY and "..." not in key
    with DagsterInstance.ephemeral() as instance:  # Dagster takes every key as it is
        instance.add_dynamic_partitions("jobs", keys)
        assert instance.get_dynamic_partitions("jobs") == keys
    # a long key keeps the end of the job id (the workload's own name)
    assert keys[-1].startswith("gke-a3-mega-usc1.") and "pretrain-2~" in keys[-1]
