"""Slurm scheduler connector: finished jobs and their execution context from accounting.

Two transports, chosen by `transport` in the cluster's scheduler block:

- `sacct` (default): runs `sacct --parsable2 --noheader` with an explicit field list, in UTC
  (`TZ=UTC`, ISO times), once for the allocations (`-X`) and once for the steps of the jobs
  that did not complete (to name the failing step). Fields a Slurm version lacks (`StdOut`,
  `StdErr` arrived in sacct 24.05) are dropped after sacct rejects them, and the job's
  output paths then come from `scontrol show job` while slurmctld still remembers the job
  (MinJobAge). Node addresses come from one `scontrol show node` call.
- `slurmrestd`: the slurmdbd job endpoints over HTTP with a JWT, for dbv0.0.38 (22.05) and
  v0.0.39-v0.0.42 (23.02-25.11). 22.05 reports wrong exit codes in JSON (every job
  `SUCCESS`/0); for that version the connector asks slurmctld's `/slurm/v0.0.38/jobs`
  (raw wait status) while it still knows the job, and otherwise leaves the exit code unset
  rather than report a false 0 for a failed job.

Both transports produce the same intermediate `SlurmJob` records, turned into
ExecutionContexts by one function, so states, arrays (`123_4`), heterogeneous jobs (`123+0`,
merged into one context `123`), exit codes and paths mean the same whatever the transport.

Modules: this one holds the configuration (registered as `kind: slurm`) and re-exports;
`slurm_records` the shared parsing and the record -> context step; `slurm_sacct` and
`slurm_rest` the transports (imported only when a client is built). docs/slurm.md has the
keys, the state table, permissions and version notes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from attribution_dagster.connectors.base import BackendConfig
from attribution_dagster.connectors.slurm.records import (
    STATE_MAP,
    SlurmJob,
    SlurmStep,
    decode_wait_status,
    expand_hostlist,
    expand_output_pattern,
    gpus_from_tres,
    map_state,
    parse_exit_code,
    to_context,
)

if TYPE_CHECKING:
    from attribution_dagster.connectors.slurm.rest import RestClient
    from attribution_dagster.connectors.slurm.sacct import SacctClient


class SlurmConfig(BackendConfig):
    """`scheduler: {kind: slurm, ...}`: jobs from Slurm accounting (sacct or slurmrestd)."""

    kind: Literal["slurm"] = "slurm"
    transport: Literal["auto", "sacct", "slurmrestd"] = Field(
        default="auto",
        description="auto: slurmrestd when restd_url is set, else sacct/scontrol on this host",
    )
    # sacct transport
    sacct: str = Field(default="sacct", description="sacct binary (name on PATH or a path)")
    scontrol: str = Field(default="scontrol", description="scontrol binary, for node addresses")
    slurm_conf: str | None = Field(
        default=None, description="SLURM_CONF for the commands (default: theirs)"
    )
    sacct_cluster: str | None = Field(
        default=None, description="sacct -M: the Slurm cluster in a shared slurmdbd"
    )
    # slurmrestd transport
    restd_url: str | None = Field(default=None, description="http://slurmrestd:6820")
    api_version: str = Field(
        default="auto",
        description="v0.0.38 (22.05) ... v0.0.42 (25.11), or auto: newest the server answers",
    )
    jwt_env: str = Field(default="SLURM_JWT", description="NAME of the env var holding the JWT")
    user_name: str | None = Field(
        default=None, description="X-SLURM-USER-NAME; default $USER of this process"
    )
    verify_tls: bool = True
    # both
    node_addresses: bool = Field(
        default=True, description="look up NodeAddr / NodeHostName of the jobs' nodes"
    )
    ctld_details: bool = Field(
        default=True,
        description="fill output paths / exit codes that accounting lacks from slurmctld, "
        "for jobs it still remembers (MinJobAge)",
    )

    @property
    def uses_restd(self) -> bool:
        return self.transport == "slurmrestd" or (self.transport == "auto" and bool(self.restd_url))

    def client(self, cluster: str) -> SacctClient | RestClient:
        if self.uses_restd:
            if not self.restd_url:
                raise ValueError("scheduler kind slurm with transport slurmrestd needs restd_url")
            from attribution_dagster.connectors.slurm.rest import RestClient

            return RestClient(self, cluster)
        from attribution_dagster.connectors.slurm.sacct import SacctClient

        return SacctClient(self, cluster)


def __getattr__(name: str) -> object:
    """`from attribution_dagster.connectors.slurm.client import SacctClient, RestClient, ...`
    without importing httpx or subprocess code until a transport is used."""
    if name in _SACCT:
        from attribution_dagster.connectors.slurm import sacct as slurm_sacct

        return getattr(slurm_sacct, name)
    if name in _REST:
        from attribution_dagster.connectors.slurm import rest as slurm_rest

        return getattr(slurm_rest, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SACCT = {"SacctClient", "RunResult", "Runner", "subprocess_runner", "parse_parsable",
          "job_from_row", "addresses_from_scontrol", "parse_scontrol_records",
          "classify_sacct_error", "ALLOC_FIELDS", "STEP_FIELDS"}  # fmt: skip
_REST = {"RestClient", "job_from_rest", "REST_VERSIONS"}

__all__ = [
    "STATE_MAP",
    "RestClient",
    "SacctClient",
    "SlurmConfig",
    "SlurmJob",
    "SlurmStep",
    "decode_wait_status",
    "expand_hostlist",
    "expand_output_pattern",
    "gpus_from_tres",
    "map_state",
    "parse_exit_code",
    "to_context",
]
