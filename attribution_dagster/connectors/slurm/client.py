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

Modules: slurm/config.py the block's keys (`SlurmKeys`), this one the registered
`kind: slurm` model that builds a transport's client; slurm/records.py the shared parsing
and the record -> context step; slurm/sacct.py and slurm/rest.py the transports (both type
against `SlurmKeys`, so nothing imports back here: no cycle). docs/slurm.md has the keys,
the state table, permissions and version notes.
"""

from __future__ import annotations

from attribution_dagster.connectors.slurm.config import SlurmKeys
from attribution_dagster.connectors.slurm.rest import RestClient
from attribution_dagster.connectors.slurm.sacct import SacctClient


class SlurmConfig(SlurmKeys):
    """The registered `kind: slurm` block: its keys (SlurmKeys) and the client it builds."""

    def client(self, cluster: str) -> SacctClient | RestClient:
        if self.uses_restd:
            if not self.restd_url:
                raise ValueError("scheduler kind slurm with transport slurmrestd needs restd_url")
            return RestClient(self, cluster)
        return SacctClient(self, cluster)
