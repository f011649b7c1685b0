"""One SQLAlchemy engine per database URL per process, shared by the result sink (sinks/),
the Dagster value store and the Kueue placement record (connectors/kueue/): the engines,
their SQLite pragmas and the default results database live here so that no layer reaches
into another's module for them."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where an engine is made: a CLI run that stores nothing never pays
    from sqlalchemy.engine import Engine

RESULTS_DB_RELATIVE = Path(".attribution") / "results.db"


def default_sqlite_url(repo_root_or_cwd: str | Path | None = None) -> str:
    """``sqlite:///<abs>/.attribution/results.db`` under the given directory (default: cwd)."""
    root = Path(repo_root_or_cwd) if repo_root_or_cwd is not None else Path.cwd()
    return f"sqlite:///{(root.resolve() / RESULTS_DB_RELATIVE).as_posix()}"


def aware(t: datetime | None) -> datetime | None:
    """A time read back from a database: naive ones (SQLite) are UTC."""
    if t is None:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def shared_engine(url: str) -> Engine:
    """One engine (and pool) per URL per process; schema setup runs once per engine."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _make_engine(url)
            _engines[url] = engine
        return engine


def _make_engine(url: str) -> Engine:
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            # Several run processes may write at once (sensor runs); WAL lets readers go on.
            if u.database and u.database != ":memory:":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    return create_engine(u, pool_pre_ping=True)
