"""The keys of a `scheduler: {kind: slurm, ...}` block (docs/slurm.md). Both transports
(slurm/sacct.py, slurm/rest.py) read these; slurm/client.py adds the client they build."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from attribution_dagster.connectors.http import HttpBackendConfig


class SlurmKeys(HttpBackendConfig):
    """`scheduler: {kind: slurm, ...}`: jobs from Slurm accounting (sacct or slurmrestd).
    The retry keys (connectors/http.py) apply to slurmrestd requests."""

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
