"""`topology: [{kind: files, paths: [...], snapshots: <dir>}]`: topology files on disk.

`paths` are topology files (named as in a case's `topology/` directory: topology.conf,
topology.yaml, ibnetdiscover.txt, nodes.json, scontrol-show-topology.txt) or directories
holding them (with `lldp/<node>.json`); together they are the current snapshot, its time the
ibnetdiscover header's or the newest file's mtime. `snapshots` is a directory of dated
subdirectories (`2026-11-01/`, `2026-11-15T06:00/`), each one a `topology/` directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from attribution_dagster.connectors.base import BackendConfig, SourceError
from attribution_dagster.core.formats.topology import (
    read_snapshots,
    read_topology_dir,
    read_topology_file,
)
from attribution_dagster.core.topology import Topology, TopologySnapshots


class TopologyFilesConfig(BackendConfig):
    """`{kind: files, paths: [...], snapshots: <dir>}` under a cluster's `topology:`."""

    kind: Literal["files"] = "files"
    paths: list[str] = Field(
        default_factory=list, description="topology files, or directories holding them"
    )
    snapshots: str | None = Field(
        default=None, description="directory of dated snapshot directories (YYYY-MM-DD[THH:MM])"
    )

    @model_validator(mode="after")
    def _something(self) -> TopologyFilesConfig:
        if not self.paths and not self.snapshots:
            raise ValueError("topology kind files needs 'paths' or 'snapshots'")
        return self

    def client(self, cluster: str) -> FilesTopologySource:
        return FilesTopologySource(self)


class FilesTopologySource:
    def __init__(self, config: TopologyFilesConfig) -> None:
        self.config = config
        self.name = config.source_name

    def current(self) -> Topology | None:
        """The files of `paths`, merged (None when none of them holds a topology)."""
        merged: Topology | None = None
        errors: list[str] = []
        for raw in self.config.paths:
            path = Path(raw).expanduser()
            if path.is_dir():
                topo = read_topology_dir(path, label=str(path))
                if topo is None:
                    errors.append(f"{path}: holds no topology file")
                    continue
            elif path.is_file():
                topo = read_topology_file(path, str(path))
            else:
                errors.append(f"{path}: not found")
                continue
            merged = topo if merged is None else merged.merged(topo)
        if merged is not None:
            merged.errors.extend(errors)
        elif errors and not self.config.snapshots:
            raise SourceError("; ".join(errors)[:500])
        return merged

    def snapshots(self) -> TopologySnapshots:
        snaps = (
            read_snapshots(self.config.snapshots) if self.config.snapshots else TopologySnapshots()
        )
        current = self.current() if self.config.paths else None
        if current is not None:
            snaps = TopologySnapshots(snapshots=[*snaps.snapshots, current], errors=snaps.errors)
        if not snaps.snapshots:
            raise SourceError("; ".join(snaps.errors)[:500] or "no topology snapshot found")
        return snaps
