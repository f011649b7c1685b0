"""KAI scheduler: accepted in configuration, discovery not implemented.

Sites running NVIDIA's KAI scheduler can still analyse their jobs: write a static
`context.json` per job (docs/case-format.md) and point a `static` scheduler or the
case-directory sensor at those cases.
"""

from __future__ import annotations

from typing import Literal

from attribution_dagster.connectors.base import BackendConfig, JobQuery, SchedulerError
from attribution_dagster.core.context import ExecutionContext

NOT_IMPLEMENTED = (
    "KAI scheduler discovery is not implemented; describe KAI jobs with a static "
    "context.json (docs/case-format.md) and use `attribution analyze CASE` or a "
    "`scheduler: {kind: static, path: ...}` cluster"
)


class KaiConfig(BackendConfig):
    kind: Literal["kai"] = "kai"

    def client(self, cluster: str) -> KaiClient:
        return KaiClient(cluster)


class KaiClient:
    """Every call says discovery is not implemented, in one line, with the way around it."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        raise SchedulerError(NOT_IMPLEMENTED)

    def get_job(self, job_id: str) -> ExecutionContext:
        raise SchedulerError(NOT_IMPLEMENTED)
