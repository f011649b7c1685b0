"""A case's `topology/` directory (spec: "Topology files"), and dated snapshots of one.

Every form present is read and merged into one Topology (Topology.merged: a fact read from
an earlier form wins; the order below puts the cabling first). `taken_at` is the
ibnetdiscover header's time when a file has one (a copied file's mtime says when it was
copied, a header when the fabric was read), else the newest file's mtime. A file that
cannot be read is an error in Topology.errors, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from attribution_dagster.core.formats.topology.ibnetdiscover import read_ibnetdiscover
from attribution_dagster.core.formats.topology.kube_labels import read_nodes_json
from attribution_dagster.core.formats.topology.lldp import read_lldp_json
from attribution_dagster.core.formats.topology.slurm import read_topology_conf, read_topology_yaml
from attribution_dagster.core.topology import Topology, TopologySnapshots

MAX_FILE_BYTES = 512 * 1024 * 1024  # a topology file larger than this is not read

Reader = Callable[[str, str], Topology]
# file name (in topology/) -> reader; ibnetdiscover first: cables and GUIDs are the most exact
FILE_READERS: dict[str, Reader] = {
    "ibnetdiscover.txt": read_ibnetdiscover,
    "ibnetdiscover": read_ibnetdiscover,
    "topology.yaml": read_topology_yaml,
    "topology.conf": read_topology_conf,
    "scontrol-show-topology.txt": read_topology_conf,
    "nodes.json": read_nodes_json,
}
_STAMP = re.compile(
    r"(?P<d>\d{4}-\d{2}-\d{2})(?:[T_ ](?P<h>\d{2})[:-]?(?P<m>\d{2})(?:[:-]?(?P<s>\d{2}))?)?"
)


def read_topology_file(path: Path, source: str | None = None) -> Topology:
    """One topology file by its name (FILE_READERS, or `lldp/<node>.json`), dated by its
    header, else its mtime."""
    topo = _read(path, source or path.name)
    if topo.taken_at is None:
        topo.taken_at = _mtime(path)
    return topo


def _read(path: Path, source: str) -> Topology:
    """The file's topology, `taken_at` only from a header in it."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return Topology(sources=[source], errors=[f"{source}: larger than {MAX_FILE_BYTES}"])
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return Topology(sources=[source], errors=[f"{source}: cannot read: {exc.strerror or exc}"])
    if path.parent.name == "lldp" and path.suffix == ".json":
        return read_lldp_json(text, path.stem, source)
    if path.name in FILE_READERS:
        return FILE_READERS[path.name](text, source)
    return Topology(sources=[source], errors=[f"{source}: not a known topology file"])


def topology_files(path: Path) -> list[Path]:
    """The topology files of a directory, in merge order."""
    found = [path / name for name in FILE_READERS if (path / name).is_file()]
    lldp = path / "lldp"
    if lldp.is_dir():
        found += sorted(p for p in lldp.glob("*.json") if p.is_file())
    return found


def read_topology_dir(path: str | Path, *, label: str | None = None) -> Topology | None:
    """Every form in `path` (a case's `topology/`) merged; None when it holds none.
    `label` prefixes each source (`topology/ibnetdiscover.txt`)."""
    path = Path(path)
    if not path.is_dir():
        return None
    files = topology_files(path)
    if not files:
        return None
    prefix = f"{label}/" if label else ""
    merged: Topology | None = None
    headers, mtimes = [], []
    for f in files:
        topo = _read(f, prefix + str(f.relative_to(path)))
        if topo.taken_at is not None:
            headers.append(topo.taken_at)
        elif (m := _mtime(f)) is not None:
            mtimes.append(m)
        merged = topo if merged is None else merged.merged(topo)
    assert merged is not None
    times = headers or mtimes
    merged.taken_at = max(times) if times else None
    return merged


def read_snapshots(path: str | Path) -> TopologySnapshots:
    """A directory of dated snapshots: each subdirectory is one `topology/` directory, its
    time the date in its name (`2026-11-01`, `2026-11-01T06:00`, UTC) when it has one, else
    its files' (header or mtime)."""
    path = Path(path)
    out = TopologySnapshots()
    if not path.is_dir():
        out.errors.append(f"{path}: snapshot directory not found")
        return out
    snaps: list[Topology] = []
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        topo = read_topology_dir(sub, label=str(sub))
        if topo is None:
            out.errors.append(f"{sub}: holds no topology file")
            continue
        stamp = parse_stamp(sub.name)
        if stamp is not None:
            topo.taken_at = stamp
        snaps.append(topo)
    return TopologySnapshots(snapshots=snaps, errors=out.errors)


def parse_stamp(name: str) -> datetime | None:
    m = _STAMP.search(name)
    if not m:
        return None
    try:
        day = datetime.strptime(m.group("d"), "%Y-%m-%d")
        return day.replace(
            hour=int(m.group("h") or 0),
            minute=int(m.group("m") or 0),
            second=int(m.group("s") or 0),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    except OSError:
        return None
