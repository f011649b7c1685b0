"""A two-node job, its window, the parser anchors and ECS documents: what the Query DSL
log sources' tests (elasticsearch, opensearch) feed their fakes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import Anchor
from attribution_dagster.core.settings import Window

UTC = timezone.utc
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
CUDA = Anchor(literal="CUDA error:")
TIMEOUT = Anchor(literal="Watchdog caught collective operation timeout")
CHILD = Anchor(literal="ChildFailedError", context_after=2)
PROGRESS = Anchor(literal="elapsed time per iteration", last_only=True)


def ctx(nodes: tuple[str, ...] = ("gpu-a", "gpu-b")) -> ExecutionContext:
    return ExecutionContext(
        job_id="es-1", scheduler="slurm", cluster="c", state=JobState.FAILED,
        start=T0, end=T0 + timedelta(minutes=30), nodes=list(nodes),
    )  # fmt: skip


def window() -> Window:
    return Window(start=T0 - timedelta(minutes=1), end=T0 + timedelta(minutes=31))


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def doc(node: str, minute: float, text: str, path: str = "/var/log/app.log") -> dict[str, Any]:
    t = T0 + timedelta(minutes=minute)
    return {"@timestamp": iso(t), "host": {"name": node}, "log": {"file": {"path": path}},
            "message": text}  # fmt: skip
