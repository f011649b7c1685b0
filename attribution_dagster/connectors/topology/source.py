"""What a topology source promises, and a cluster's topology over all its sources.

`TopologySource.snapshots()` returns what the source knows now: a file source its files
and dated snapshot directories, a live source one snapshot taken now. `ClusterTopology`
is every source's snapshots, the value of the Dagster `topology` asset; `at(t)` gives the
topology in force at `t` (each source's snapshot at `t`, merged in configured order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from attribution_dagster.connectors.base import utc_now
from attribution_dagster.core.topology import Topology, TopologySnapshots


@runtime_checkable
class TopologySource(Protocol):
    """A cluster's topology from one place. `name` is shown in coverage as
    `topology:<name>`. `snapshots()` raises SourceError only when nothing could be read;
    what could not be read alongside is in the snapshots' `errors`."""

    name: str

    def snapshots(self) -> TopologySnapshots: ...


class SourceSnapshots(BaseModel):
    """One source's snapshots, or why it gave none."""

    source: str
    snapshots: TopologySnapshots = Field(default_factory=TopologySnapshots)
    error: str | None = None  # the source failed as a whole
    retryable: bool = False


class ClusterTopology(BaseModel):
    """A cluster's topology as read at `read_at` from every configured source."""

    cluster: str
    read_at: datetime
    sources: list[SourceSnapshots] = Field(default_factory=list)

    def at(self, when: datetime | None) -> Topology | None:
        """The topology in force at `when`: each source's snapshot at `when`, merged (an
        earlier source's fact wins); None when no source has one."""
        merged: Topology | None = None
        for src in self.sources:
            snap = src.snapshots.snapshot_at(when)
            if snap is not None:
                merged = snap if merged is None else merged.merged(snap)
        return merged

    def as_sources(self) -> tuple[TopologySource, ...]:
        """These snapshots as sources again (the per-job assets read the stored value)."""
        return tuple(StoredTopologySource(s) for s in self.sources)


@dataclass(frozen=True)
class StoredTopologySource:
    """Snapshots already read (the `topology` asset's value) as a TopologySource."""

    stored: SourceSnapshots

    @property
    def name(self) -> str:
        return self.stored.source

    def snapshots(self) -> TopologySnapshots:
        if self.stored.error is not None:
            from attribution_dagster.connectors.base import SourceError

            raise SourceError(self.stored.error, transient=self.stored.retryable)
        return self.stored.snapshots


class CachedTopologySource:
    """A source whose snapshots are reused for `ttl_seconds`: a topology changes over days,
    and the CLI and the fleet path ask once per job (thousands of jobs a window). A failure
    is not kept: the next job asks again."""

    def __init__(self, source: TopologySource, ttl_seconds: float = 600.0) -> None:
        self.source = source
        self.name = source.name
        self.ttl = ttl_seconds
        self._kept: tuple[float, TopologySnapshots] | None = None

    def snapshots(self) -> TopologySnapshots:
        import time

        now = time.monotonic()
        if self._kept is not None and now - self._kept[0] < self.ttl:
            return self._kept[1]
        got = self.source.snapshots()
        self._kept = (now, got)
        return got


def read_cluster_topology(cluster: str, sources: Sequence[TopologySource]) -> ClusterTopology:
    """Every source's snapshots now; a failing source is recorded, the others still count."""
    out = ClusterTopology(cluster=cluster, read_at=utc_now())
    for src in sources:
        try:
            out.sources.append(SourceSnapshots(source=src.name, snapshots=src.snapshots()))
        except Exception as exc:  # noqa: BLE001 - one source failing is partial topology
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            out.sources.append(
                SourceSnapshots(
                    source=src.name,
                    error=text[:500],
                    retryable=bool(getattr(exc, "transient", False)),
                )
            )
    return out
