"""Where results go: a SQL database (SQLite by default, any SQLAlchemy URL) and stdout.

Plain classes with no Dagster import, so the CLI and reports use them directly.
"""

from attribution_dagster.sinks.sql import SqlSink
from attribution_dagster.sinks.stdout import StdoutSink

__all__ = ["SqlSink", "StdoutSink"]
