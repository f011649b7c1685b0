"""PyTorch NCCL flight-recorder dumps: a restricted reader, a slim serializable model, and the
cross-rank comparison that `torchfrtrace` makes (who is missing at a sequence number, who
called a different collective).

A dump is written by ProcessGroupNCCL with `TORCH_NCCL_TRACE_BUFFER_SIZE>0` and
`TORCH_NCCL_DUMP_ON_TIMEOUT=1`, one file per global rank, `<prefix><rank>` (default prefix
`nccl_trace_rank_`, set by `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` / `TORCH_FR_DUMP_TEMP_FILE`). It
is a pickle of a plain dict: `version`, `pg_config` (pg name -> {name, desc, ranks: "[0, 1]"}),
`pg_status` (pg name -> last_enqueued_collective / last_started_collective /
last_completed_collective) and `entries` (record_id, pg_id, collective_seq_id,
profiling_name such as `nccl:all_reduce`, state scheduled / started / completed,
input_sizes, input_dtypes, time_created_ns, timeout_ms, ...).

A dump is untrusted input. `read_dump` never calls plain `pickle.load`: its unpickler accepts
builtin containers and scalars only (the opcodes for dict, list, tuple, str, bytes, int, float,
bool, None; `builtins.set` / `frozenset`, and `_codecs.encode` that protocol 2 uses for bytes)
and refuses every other global (`os.system`, `subprocess.Popen`, any class) with
`DumpRefused`: nothing is imported or called. The caller records the refusal as a coverage
error.
"""

from __future__ import annotations

import io
import pickle
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

DEFAULT_PREFIX = "nccl_trace_rank_"
MAX_DUMP_BYTES = 64 * 1024 * 1024
KEEP_ENTRIES_PER_PG = 64  # the entries nearest the frontier: what a hang analysis needs
_ALLOWED_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("__builtin__", "set"),
    ("__builtin__", "frozenset"),
    ("_codecs", "encode"),  # protocol 2 pickles bytes as _codecs.encode(str, "latin1")
}
_RANK_SUFFIX = re.compile(r"(\d{1,7})(?:\.pkl|\.pickle)?$")


class DumpRefused(pickle.UnpicklingError):
    """The dump holds something other than builtin containers and scalars."""


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise DumpRefused(
            f"refused global {module}.{name}: a flight-recorder dump may hold only builtin "
            "containers and scalars"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise DumpRefused("refused persistent id: not a plain flight-recorder dump")


def safe_loads(data: bytes) -> Any:
    """Unpickle `data` allowing only builtin containers and scalars (raises DumpRefused)."""
    try:
        return _RestrictedUnpickler(io.BytesIO(data)).load()
    except DumpRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - a truncated or garbled pickle
        raise DumpRefused(f"not a readable pickle: {type(exc).__name__}: {exc}") from None


# ---- the model -----------------------------------------------------------------------------


class FrEntry(BaseModel):
    """One flight-recorder entry, as far as a hang analysis needs it."""

    record_id: int | None = None
    pg_id: str | None = None
    collective_seq_id: int | None = None
    p2p_seq_id: int | None = None
    profiling_name: str | None = None
    state: str | None = None
    input_sizes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    output_sizes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    time_created_ns: int | None = None
    timeout_ms: int | None = None
    is_p2p: bool = False


class FrGroup(BaseModel):
    name: str | None = None
    desc: str | None = None
    ranks: list[int] = Field(default_factory=list)


class FlightDump(BaseModel):
    """One rank's dump, slimmed to plain serializable fields (RawEvidence carries it between
    Dagster assets; reports/export.py writes it back as a pickle of plain dicts)."""

    path: str  # as shown in locators: dumps/nccl_trace_rank_17, dumps/node-b/nccl_trace_rank_9
    rank: int | None = None  # the global rank, from the file name
    node: str | None = None  # dumps/<node>/...: the node that wrote it
    version: str | None = None
    pg_config: dict[str, FrGroup] = Field(default_factory=dict)
    pg_status: dict[str, dict[str, int | None]] = Field(default_factory=dict)
    entries: list[FrEntry] = Field(default_factory=list)

    def to_plain(self) -> dict[str, Any]:
        """The dump in PyTorch's own layout (plain dicts), for export."""
        return {
            "version": self.version,
            "pg_config": {
                k: {"name": g.name, "desc": g.desc, "ranks": str(g.ranks)}
                for k, g in self.pg_config.items()
            },
            "pg_status": {k: dict(v) for k, v in self.pg_status.items()},
            "entries": [
                {
                    **{k: v for k, v in e.model_dump().items() if k != "pg_id"},
                    "pg_id": int(e.pg_id) if e.pg_id and e.pg_id.isdigit() else e.pg_id,
                    "process_group": (
                        e.pg_id,
                        (self.pg_config.get(e.pg_id or "") or FrGroup()).desc,
                    ),
                }
                for e in self.entries
            ],
        }


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return None


def _ranks(v: Any) -> list[int]:
    if isinstance(v, (list, tuple, set, frozenset)):
        return sorted(r for r in (_int(x) for x in v) if r is not None)
    if isinstance(v, str):
        return [int(x) for x in re.findall(r"-?\d+", v)]
    return []


def _sizes(v: Any) -> list[list[int]]:
    out = []
    for s in v if isinstance(v, (list, tuple)) else []:
        if isinstance(s, (list, tuple)):
            out.append([i for i in (_int(x) for x in s) if i is not None])
    return out


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else []


def from_plain(data: Any, path: str, rank: int | None, node: str | None) -> FlightDump:
    """A dump's dict, slimmed (unknown keys dropped; raises DumpRefused when not a dump)."""
    if not isinstance(data, dict) or "entries" not in data:
        raise DumpRefused("not a flight-recorder dump: no dict with `entries`")
    groups: dict[str, FrGroup] = {}
    for key, g in (data.get("pg_config") or {}).items():
        if isinstance(g, dict):
            groups[str(key)] = FrGroup(
                name=str(g.get("name")) if g.get("name") is not None else None,
                desc=str(g.get("desc")) if g.get("desc") is not None else None,
                ranks=_ranks(g.get("ranks")),
            )
    status: dict[str, dict[str, int | None]] = {}
    for key, s in (data.get("pg_status") or {}).items():
        if isinstance(s, dict):
            status[str(key)] = {str(k): _int(v) for k, v in s.items() if _int(v) is not None}
    entries: list[FrEntry] = []
    for e in data.get("entries") or []:
        if not isinstance(e, dict):
            continue
        pg = e.get("pg_id")
        if pg is None and isinstance(e.get("process_group"), (list, tuple)) and e["process_group"]:
            pg = e["process_group"][0]
        name = e.get("profiling_name")
        entries.append(
            FrEntry(
                record_id=_int(e.get("record_id")),
                pg_id=str(pg) if pg is not None else None,
                collective_seq_id=_int(e.get("collective_seq_id")),
                p2p_seq_id=_int(e.get("p2p_seq_id")),
                profiling_name=str(name) if name is not None else None,
                state=str(e["state"]) if e.get("state") is not None else None,
                input_sizes=_sizes(e.get("input_sizes")),
                input_dtypes=_strs(e.get("input_dtypes")),
                output_sizes=_sizes(e.get("output_sizes")),
                output_dtypes=_strs(e.get("output_dtypes")),
                time_created_ns=_int(e.get("time_created_ns")),
                timeout_ms=_int(e.get("timeout_ms")),
                is_p2p=bool(e.get("is_p2p")) or _is_p2p(name),
            )
        )
    # keep the newest entries of each process group: the frontier is what a hang shows
    per_pg: dict[str | None, list[FrEntry]] = defaultdict(list)
    for e in entries:
        per_pg[e.pg_id].append(e)
    kept = [
        e
        for es in per_pg.values()
        for e in sorted(es, key=lambda x: (x.collective_seq_id or 0, x.record_id or 0))[
            -KEEP_ENTRIES_PER_PG:
        ]
    ]
    kept.sort(key=lambda x: (x.record_id if x.record_id is not None else -1))
    version = data.get("version")
    return FlightDump(
        path=path,
        rank=rank,
        node=node,
        version=str(version) if version is not None else None,
        pg_config=groups,
        pg_status=status,
        entries=kept,
    )


def _is_p2p(name: Any) -> bool:
    return isinstance(name, str) and any(w in name for w in ("send", "recv"))


def read_dump(path: Path, shown: str, node: str | None = None) -> FlightDump:
    """One dump file, through the restricted unpickler (raises DumpRefused, OSError)."""
    data = path.read_bytes() if path.stat().st_size <= MAX_DUMP_BYTES else None
    if data is None:
        raise DumpRefused(f"larger than {MAX_DUMP_BYTES} bytes: not read")
    m = _RANK_SUFFIX.search(path.name)
    return from_plain(safe_loads(data), shown, int(m.group(1)) if m else None, node)


class DumpScan(BaseModel):
    dumps: list[FlightDump] = Field(default_factory=list)
    files: int = 0
    bytes: int = 0
    errors: list[str] = Field(default_factory=list)


def read_dumps(case: Path, nodes: list[str] | None = None) -> DumpScan:
    """Every dump under `case/dumps/` (and `dumps/<node>/`), shown relative to the case."""
    return read_dump_dir(Path(case) / "dumps", Path(case), nodes)


def read_dump_dir(root: Path, shown_from: Path | None, nodes: list[str] | None = None) -> DumpScan:
    """Every dump under `root` (and `root/<node>/`). A file is shown relative to `shown_from`
    (a case directory), or by its full path for a cluster's dump directory. A refused or
    unreadable file is an error line (path and reason); the others are still read."""
    scan = DumpScan()
    if not root.is_dir():
        return scan
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        rel = p.relative_to(shown_from).as_posix() if shown_from is not None else str(p)
        parts = p.relative_to(root).parts
        node = parts[0] if len(parts) > 1 else None
        if node is not None and nodes is not None and node not in nodes:
            node = None
        scan.files += 1
        try:
            scan.bytes += p.stat().st_size
            scan.dumps.append(read_dump(p, rel, node))
        except (DumpRefused, OSError, ValueError) as exc:
            scan.errors.append(f"{rel}: {exc}")
    return scan


# ---- comparing ranks -----------------------------------------------------------------------


class Finding(BaseModel):
    """What the dumps say about one rank: its progress in a group, its absence at a sequence
    number the others are in, or a collective that differs from the others'."""

    what: str  # progress | missing | mismatch
    rank: int
    pg: str
    path: str
    node: str | None = None
    seq: int | None = None
    op: str | None = None
    state: str | None = None
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None
    error_type: str | None = None
    detail: str = ""
    time_ns: int | None = None


def _frontier(d: FlightDump, pg: str) -> tuple[int | None, int | None, int | None]:
    st = d.pg_status.get(pg) or {}
    enq = st.get("last_enqueued_collective")
    sta = st.get("last_started_collective")
    com = st.get("last_completed_collective")
    coll = [e for e in d.entries if e.pg_id == pg and not e.is_p2p and e.collective_seq_id]
    if enq is None and coll:
        enq = max(e.collective_seq_id or 0 for e in coll)
    if com is None and coll:
        done = [e.collective_seq_id or 0 for e in coll if e.state == "completed"]
        com = max(done) if done else None
    return enq, sta, com


def _entry(d: FlightDump, pg: str, seq: int | None) -> FrEntry | None:
    if seq is None:
        return None
    for e in d.entries:
        if e.pg_id == pg and not e.is_p2p and e.collective_seq_id == seq:
            return e
    return None


def _signature(e: FrEntry) -> tuple[Any, ...]:
    return (e.profiling_name, tuple(map(tuple, e.input_sizes)), tuple(e.input_dtypes))


def compare(dumps: list[FlightDump]) -> list[Finding]:
    """Per process group: each rank's progress; the ranks without an entry at the sequence
    number the others are in; the first sequence number whose op, sizes or dtype differ
    (the minority is the culprit; a tie names nobody)."""
    # Long on purpose: one walk over the ranks of each process group; its three findings
    # (progress, missing, mismatch) share the per-group tables
    out: list[Finding] = []
    by_pg: dict[str, list[FlightDump]] = defaultdict(list)
    for d in dumps:
        if d.rank is None:
            continue
        for pg in set(d.pg_status) | {e.pg_id for e in d.entries if e.pg_id is not None}:
            by_pg[pg].append(d)
    for pg, ds in sorted(by_pg.items()):
        fronts = {d.rank: _frontier(d, pg) for d in ds}
        top = max((f[0] for f in fronts.values() if f[0] is not None), default=None)
        for d in ds:
            enq, sta, com = fronts[d.rank]
            last = _entry(d, pg, enq)
            out.append(
                Finding(
                    what="progress", rank=d.rank, pg=pg, path=d.path, node=d.node, seq=enq,  # type: ignore[arg-type]
                    op=last.profiling_name if last else None,
                    state=last.state if last else None,
                    last_enqueued=enq, last_started=sta, last_completed=com,
                    time_ns=last.time_created_ns if last else None,
                )
            )
        # a rank whose dump has no entry at the frontier the others are in never joined it
        if top is not None and len(ds) > 1:
            there = [d for d in ds if _entry(d, pg, top) is not None]
            ref = _entry(there[0], pg, top) if there else None
            for d in ds:
                if _entry(d, pg, top) is None:
                    out.append(
                        Finding(
                            what="missing", rank=d.rank, pg=pg, path=d.path, node=d.node,  # type: ignore[arg-type]
                            seq=top, op=ref.profiling_name if ref else None,
                            last_enqueued=fronts[d.rank][0],
                            last_completed=fronts[d.rank][2],
                            detail=f"{len(there)} other rank(s) are in it",
                            time_ns=ref.time_created_ns if ref else None,
                        )
                    )
        # the first sequence number at which the ranks' collectives differ
        seqs = sorted({e.collective_seq_id for d in ds for e in d.entries
                       if e.pg_id == pg and not e.is_p2p and e.collective_seq_id})
        for seq in seqs:
            here = {d.rank: (d, e) for d in ds if (e := _entry(d, pg, seq)) is not None}
            if len(here) < 2:
                continue
            sigs = Counter(_signature(e) for _, e in here.values())
            if len(sigs) == 1:
                continue
            (major, n_major), *rest = sigs.most_common()
            if rest and rest[0][1] == n_major:
                # a tie: no majority says which call was the odd one; name nobody
                out.append(Finding(what="mismatch", rank=-1, pg=pg, path="", seq=seq,
                                   error_type="UNDECIDED",
                                   detail=f"{len(sigs)} different calls, no majority"))
                break
            for rank, (d, e) in sorted(here.items()):
                if _signature(e) == major:
                    continue
                ref = next(x for _, x in here.values() if _signature(x) == major)
                if e.profiling_name != ref.profiling_name:
                    kind = "COLLECTIVE_TYPE_MISMATCH"
                    detail = f"{e.profiling_name} where the others call {ref.profiling_name}"
                elif e.input_sizes != ref.input_sizes:
                    kind = "SIZE_OR_SYNTAX_MISMATCH"
                    detail = (f"{e.profiling_name} with input sizes {e.input_sizes} where "
                              f"the others pass {ref.input_sizes}")
                else:
                    kind = "DTYPE_MISMATCH"
                    detail = (f"{e.profiling_name} with dtype {e.input_dtypes} where the "
                              f"others pass {ref.input_dtypes}")
                out.append(
                    Finding(
                        what="mismatch", rank=rank, pg=pg, path=d.path, node=d.node, seq=seq,  # type: ignore[arg-type]
                        op=e.profiling_name, state=e.state, error_type=kind, detail=detail,
                        time_ns=e.time_created_ns,
                    )
                )
            break
    return out
