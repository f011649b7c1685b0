"""What every process start would rebuild, cached between processes: the parsed catalogs
(parsers, rules, kinds, categories, XIDs) and the compiled hyperscan databases.

Parsing the catalog YAML is a good part of a small `attribution analyze` (libyaml scans fast,
but PyYAML builds every node in Python); `marshal` reads the same data back in a millisecond.
An entry is keyed by a digest of what it was built from (the YAML's bytes; the literals and
flags of a hyperscan database) and of the package and Python versions: an operator's edit
is seen at once (the digest changes and the file is parsed afresh). A catalog entry is
written only after its caller validated the data (`store`), so a cached catalog is one that
loaded without error before; it may carry what the caller derived from it (the parser
catalog keeps its regexes' group names, to compile each regex only when first used).

Where: `$ATTRIBUTION_CACHE_DIR`, else `$XDG_CACHE_HOME/attribution-dagster`, else
`~/.cache/attribution-dagster`; `ATTRIBUTION_CACHE_DIR=off` turns it off. One file per
catalog path (per database), replaced atomically (temp file + `os.replace`); an entry
another user owns is ignored (a shared `ATTRIBUTION_CACHE_DIR` cannot feed one). Any error
reading or writing it (missing, stale, corrupt, unwritable) falls back to building afresh,
silently: the cache only ever saves time. Data marshal cannot hold exactly (anything but
plain YAML scalars, dates and timestamps) is not cached; what is written is read back and
compared first.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from attribution_dagster import __version__
from attribution_dagster.core.formats import yamltext

ENV = "ATTRIBUTION_CACHE_DIR"
_OFF = ("off", "0", "none", "false", "no")
_MAGIC = b"ADSC1\n"  # the file format; a new layout gets a new magic
_DATE, _DATETIME = "\x00yaml-date", "\x00yaml-datetime"


def cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    """Where entries live, or None when caching is off."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV, "").strip()
    if chosen.lower() in _OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "attribution-dagster"
    try:
        return Path.home() / ".cache" / "attribution-dagster"
    except (RuntimeError, KeyError, OSError):  # no home directory (a bare container user)
        return None


def digest(*parts: bytes | str) -> bytes:
    """An entry's key: what it was built from, with the package and Python versions."""
    h = hashlib.sha256(_MAGIC)
    h.update(f"{__version__}\n{sys.version}\n{marshal.version}\n".encode())
    for part in parts:
        b = part.encode() if isinstance(part, str) else part
        h.update(len(b).to_bytes(8, "little") + b)
    return h.digest()


def read_entry(name: str, key: bytes) -> bytes | None:
    """The body stored under `name` if it was built from `key`; else (missing, stale,
    corrupt, caching off) None."""
    where = cache_dir()
    if where is None:
        return None
    try:
        with open(where / name, "rb") as f:
            if not _own(os.fstat(f.fileno())):
                return None  # someone else's file (a shared cache directory): not trusted
            raw = f.read()
        head = len(_MAGIC)
        if raw[:head] != _MAGIC or raw[head : head + 32] != key:
            return None  # another format, or built from something else (the YAML was edited)
        body = raw[head + 64 :]
        if hashlib.sha256(body).digest() != raw[head + 32 : head + 64]:
            return None  # torn or corrupt
        return body
    except Exception:  # noqa: BLE001 - any unreadable entry means: build afresh
        return None


def _own(st: os.stat_result) -> bool:
    """The entry belongs to this user (where the platform has users)."""
    getuid = getattr(os, "getuid", None)
    return getuid is None or st.st_uid == getuid()


def write_entry(name: str, key: bytes, body: bytes) -> None:
    """Store `body` under `name` (temp file + rename: a reader sees the old or the new one).
    Never raises."""
    where = cache_dir()
    if where is None:
        return
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".tmp-", suffix=".bin")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + key + hashlib.sha256(body).digest() + body)
            os.replace(tmp, where / name)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # noqa: BLE001 - unwritable, full: no cache, no error
        return


# --- catalog YAML ---------------------------------------------------------------------


@dataclass
class Loaded:
    """A catalog file's data; `derived` is what the caller stored with it (None when parsed
    afresh: the caller validates and then calls `store`)."""

    data: Any
    derived: Any
    cached: bool
    name: str
    key: bytes


def _name(path: Path) -> str:
    """One entry per catalog file: its stem and a digest of its absolute path."""
    try:
        where = str(path.absolute())
    except OSError:  # the working directory is gone: the path as given
        where = str(path)
    return f"{path.stem}-{hashlib.sha256(where.encode()).hexdigest()[:16]}.bin"


def load(path: Path, text: bool = True) -> Loaded:
    """The file's data, from the cache when an entry of these very bytes exists. Raises what
    reading (OSError), decoding (`text`: UTF-8, UnicodeDecodeError) and parsing
    (yamltext.YAMLError) raise."""
    return loaded_from(path, path.read_bytes(), text)


def loaded_from(path: Path, blob: bytes, text: bool = True) -> Loaded:
    """`load`, for a caller that read the bytes itself."""
    key, name = digest(b"yaml", blob), _name(path)
    body = read_entry(name, key)
    if body is not None:
        try:
            tagged, data, derived = marshal.loads(body)
            return Loaded(_untag(data) if tagged else data, derived, True, name, key)
        except Exception:  # noqa: BLE001 - an entry of another shape: parse the YAML
            pass
    data = yamltext.safe_load(blob.decode("utf-8") if text else blob)
    return Loaded(data, None, False, name, key)


def store(loaded: Loaded, derived: Any = None) -> None:
    """Cache a validated file's data (and what was derived from it). Never raises."""
    if loaded.cached and loaded.derived == derived:
        return
    try:
        tagged = _has_dates(loaded.data)
        data = _tag(loaded.data) if tagged else loaded.data
        body = marshal.dumps((tagged, data, derived))
        back = marshal.loads(body)
        if (_untag(back[1]) if tagged else back[1]) != loaded.data or back[2] != derived:
            return  # not held exactly: parse the YAML every time instead
    except Exception:  # noqa: BLE001 - unmarshallable (a YAML type marshal lacks): no cache
        return
    write_entry(loaded.name, loaded.key, body)


def _has_dates(v: Any) -> bool:
    if isinstance(v, date):
        return True
    if isinstance(v, dict):
        return any(_has_dates(k) or _has_dates(x) for k, x in v.items())
    if isinstance(v, (list, tuple, set)):
        return any(_has_dates(x) for x in v)
    return False


def _tag(v: Any) -> Any:
    """Dates and timestamps as tagged tuples (YAML's safe loader makes no tuple of a str
    starting with NUL, and `store` compares the round trip)."""
    if isinstance(v, datetime):
        return (_DATETIME, v.isoformat())
    if isinstance(v, date):
        return (_DATE, v.isoformat())
    if isinstance(v, dict):
        return {_tag(k): _tag(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_tag(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_tag(x) for x in v)
    return v


def _untag(v: Any) -> Any:
    if isinstance(v, tuple):
        if len(v) == 2 and v[0] == _DATETIME:
            return datetime.fromisoformat(v[1])
        if len(v) == 2 and v[0] == _DATE:
            return date.fromisoformat(v[1])
        return tuple(_untag(x) for x in v)
    if isinstance(v, dict):
        return {_untag(k): _untag(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_untag(x) for x in v]
    return v
