"""The one configuration of the Dagster code location: a YAML file and/or environment variables.

Resolution order (later wins):

1. defaults in this module;
2. the YAML file named by ``ATTRIBUTION_CONFIG`` (or ``attribution.yaml`` in the working
   directory when it exists);
3. environment variables ``ATTRIBUTION_*`` (table below).

Secrets come only from the environment. A database URL in the YAML file may name a user
but never a password: put the password in an environment variable and name that variable
in ``sink.password_env`` (or give the whole URL in ``ATTRIBUTION_SINK_URL``). Dagster shows
resource configuration in its UI; values read from the environment are passed as
``EnvVar`` so the UI shows the variable's name, not its value.

Example ``attribution.yaml``::

    clusters:                           # one block per cluster; keys of each back-end: README
      atlas:
        scheduler: {kind: slurm}        # sacct on this host (or restd_url + jwt_env)
        logs:
          - {kind: files, root: /shared/logs, paths: ["{node}/syslog*", "{stdout}"]}
          - {kind: loki, url: "http://loki:3100", node_label: host}
        metrics:
          - {kind: prometheus, url: "http://prometheus:9090"}
        topology:                       # docs/topology.md
          - {kind: files, paths: [/etc/slurm/topology.conf], snapshots: /shared/topology}
          - {kind: slurm_scontrol}
    case_root: /data/gpu-cases          # the case-directory sensor watches this
    sink:
      url: postgresql+psycopg://attrib@db.internal:5432/attribution
      password_env: ATTRIBUTION_DB_PASSWORD
      stdout: false                     # also print each result as one JSON line
    sensor:
      enabled: true
      interval_seconds: 30
      max_cases_per_tick: 200
      settle_seconds: 5
    analysis:
      lead_seconds: 120
      lag_seconds: 60
      workers: 2                        # scanner processes for a big job (default: all cores)
    retry:
      max_retries: 2
      delay_seconds: 2
    fleet:                              # window partitions (docs/fleet.md)
      window: daily                     # or hourly
      start: "2026-09-01"
      workers: 2                        # processes per window run
    topology_refresh:                   # the per-cluster topology assets (docs/topology.md)
      cron: "0 5 * * *"                 # daily (UTC)

Environment variables:

| variable | meaning |
| --- | --- |
| ``ATTRIBUTION_CONFIG`` | path of the YAML file |
| ``ATTRIBUTION_CASE_ROOT`` | directory of cases for the sensor (default ``samples``) |
| ``ATTRIBUTION_SINK_URL`` | SQLAlchemy URL of the results database (may hold a password) |
| ``ATTRIBUTION_STORE_URL`` | database for intermediate asset values (default: the sink's) |
| ``ATTRIBUTION_STDOUT_SINK`` | ``1`` to also print every result as a JSON line |
| ``ATTRIBUTION_SENSOR_ENABLED`` | ``0`` to start the sensor stopped |
| ``ATTRIBUTION_CACHE_DIR`` | start-up cache (``~/.cache/attribution-dagster``; ``off``: none) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from attribution_dagster.core.database import default_sqlite_url
from attribution_dagster.core.settings import AnalysisFields

CONFIG_ENV = "ATTRIBUTION_CONFIG"
DEFAULT_CONFIG_FILE = "attribution.yaml"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file and the field."""


class SinkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite file")
    url_env: str | None = Field(default=None, description="env var holding the whole URL")
    password_env: str | None = Field(default=None, description="env var holding the password")
    stdout: bool = Field(default=False, description="also print results as JSON lines")
    store_url: str | None = Field(
        default=None, description="database for intermediate asset values; default: sink"
    )


class SensorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    interval_seconds: int = Field(default=30, ge=1)
    max_cases_per_tick: int = Field(default=200, ge=1, le=10_000)
    settle_seconds: float = Field(
        default=5.0, ge=0, description="ignore a context.json changed this recently"
    )
    # finished-job sensors (one per cluster with a scheduler)
    scheduler_interval_seconds: int = Field(default=60, ge=1)
    max_jobs_per_tick: int = Field(default=200, ge=1, le=10_000)
    overlap_seconds: float = Field(
        default=600.0, ge=0, description="re-list jobs that ended this long before the cursor"
    )
    first_lookback_seconds: float = Field(
        default=3600.0, ge=0, description="on the first tick, jobs that ended this long ago"
    )
    retention_days: float | None = Field(
        default=30.0, gt=0, description="delete `jobs` partitions older than this; None keeps all"
    )


class AnalysisConfig(AnalysisFields):
    """The `analysis:` block: the fields of core/settings.py `AnalysisFields`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A job's files are scanned by all cores once they total PARALLEL_MIN_BYTES (32 MiB;
    # smaller jobs stay in the step's process, where a pool would cost more than it saves):
    # the per-job assets then scan a big job as fast as `attribution analyze` does.
    workers: int | None = Field(
        default=None, ge=1, description="scanner processes per job; None = all cores"
    )


class RetryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_retries: int = Field(default=2, ge=0, le=10)
    delay_seconds: float = Field(default=2.0, ge=0)


class FleetConfig(BaseModel):
    """The fleet path (docs/fleet.md): jobs attributed by cluster x time window."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: Literal["hourly", "daily"] = Field(
        default="daily", description="length of one window partition"
    )
    start: str = Field(default="2026-01-01", description="first window (YYYY-MM-DD, UTC)")
    workers: int | None = Field(
        default=None, ge=1, description="processes per window run; None = cores - 1 (min 1)"
    )
    chunk_size: int = Field(default=50, ge=1, le=10_000, description="jobs per pool task")
    report_start: str = Field(default="2026-01-05", description="first weekly report (a Monday)")
    reports_dir: str = Field(
        default=".attribution/reports", description="weekly reports: <dir>/<scope>/<week>/"
    )
    report_schedule: bool = Field(
        default=True, description="start weekly_report_schedule running (Mondays 06:00 UTC)"
    )
    report_base_url: str | None = Field(
        default=None,
        description="where reports_dir is published (a web server or bucket website you run); "
        "the report asset links <url>/<scope>/<week>/report.html. None: no link",
    )

    @field_validator("report_base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(
                f"{v!r}: expected an http:// or https:// URL (where the "
                "reports directory is published), or leave it out"
            )
        return v.rstrip("/") if v else None

    def reports_path(self, base_dir: str | Path) -> Path:
        p = Path(self.reports_dir).expanduser()
        return p if p.is_absolute() else (Path(base_dir) / p).resolve()


class TopologyRefreshConfig(BaseModel):
    """When the per-cluster `topology` assets are re-read (docs/topology.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str = Field(default="0 5 * * *", description="refresh schedule (UTC); default daily")
    enabled: bool = Field(default=True, description="start topology_refresh_schedule running")


class BackendBlock(BaseModel):
    """One `{kind: ..., ...}` block of a cluster (`scheduler`, an entry of `logs` or of
    `metrics`) as attribution.yaml writes it: `kind`, the optional `name`, and the
    back-end's own keys, kept as given.

    Core checks the shape only; the back-end's keys are validated into its configuration
    model by the connectors' kind registry (`connectors.clusters.check_clusters`, run when
    the configuration is loaded by the CLI and the Dagster resources), which names the
    cluster, the block and the key at fault."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str = Field(min_length=1, description="the back-end: slurm, loki, prometheus, ...")
    name: str | None = Field(
        default=None, description="shown in coverage as '<kind>:<name>'; default the kind"
    )

    @property
    def source_name(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind

    @property
    def keys(self) -> dict[str, Any]:
        """The block as written (kind, name when given, and the back-end's keys)."""
        return self.model_dump(exclude_unset=True)


class ClusterConfig(BaseModel):
    """One cluster: where its jobs come from and where their evidence lives.

    `scheduler`, each `logs` and each `metrics` entry is a `{kind: ..., ...}` block
    (BackendBlock); the back-end's own model validates its keys (see
    `attribution_dagster.connectors`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduler: BackendBlock | None = Field(default=None, description="slurm | kueue | kai | static")
    logs: list[BackendBlock] = Field(
        default_factory=list, description="files | loki | pod_logs | elasticsearch | opensearch"
    )
    metrics: list[BackendBlock] = Field(default_factory=list, description="prometheus")
    topology: list[BackendBlock] = Field(
        default_factory=list,
        description="files | slurm_scontrol | kubernetes_labels (docs/topology.md)",
    )
    sensor: bool = Field(default=True, description="run a finished-job sensor for this cluster")
    dumps: str | None = Field(
        default=None,
        description=(
            "where a job's PyTorch flight-recorder dumps land, as a directory template: "
            "{cluster} and {job_id} are filled in, e.g. /shared/nccl-traces/{job_id}"
        ),
    )

    @field_validator("dumps")
    @classmethod
    def _dumps(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            v.format(cluster="c", job_id="1")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(
                f"dumps template {v!r} may name only {{cluster}} and {{job_id}} ({e})"
            ) from None
        return v

    @field_validator("scheduler", mode="before")
    @classmethod
    def _scheduler(cls, v: Any) -> Any:
        return None if v is None else _block(v, "scheduler")

    @field_validator("logs", mode="before")
    @classmethod
    def _logs(cls, v: Any) -> Any:
        return [_block(b, "logs") for b in _blocks(v, "logs")]

    @field_validator("metrics", mode="before")
    @classmethod
    def _metrics(cls, v: Any) -> Any:
        return [_block(b, "metrics") for b in _blocks(v, "metrics")]

    @field_validator("topology", mode="before")
    @classmethod
    def _topology(cls, v: Any) -> Any:
        return [_block(b, "topology") for b in _blocks(v, "topology")]

    @model_validator(mode="after")
    def _unique_sources(self) -> ClusterConfig:
        # topology sources are named `topology:<name>` in coverage: their own namespace
        for blocks in ([*self.logs, *self.metrics], self.topology):
            names = [b.source_name for b in blocks]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"two sources share the name {dup[0]!r}: give each a 'name'")
        return self


def _block(v: Any, role: str) -> Any:
    if isinstance(v, BackendBlock):
        return v
    if isinstance(v, BaseModel):  # a back-end's own configuration model, already valid
        return v.model_dump(mode="json", exclude_unset=True) | {"kind": getattr(v, "kind", "")}
    if not isinstance(v, dict):
        raise ValueError(f"a {role} block must be a mapping with a 'kind' key")
    if not isinstance(v.get("kind"), str) or not v["kind"]:
        raise ValueError(f"a {role} block needs 'kind', naming its back-end")
    return v


def _blocks(v: Any, role: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"'{role}' must be a list of {{kind: ...}} blocks")
    return v


class AttributionConfig(BaseModel):
    """Everything the code location needs, resolved and validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    clusters: dict[str, ClusterConfig] = Field(default_factory=dict)
    case_root: str = "samples"
    sink: SinkConfig = SinkConfig()
    sensor: SensorConfig = SensorConfig()
    analysis: AnalysisConfig = AnalysisConfig()
    retry: RetryConfig = RetryConfig()
    fleet: FleetConfig = FleetConfig()
    topology_refresh: TopologyRefreshConfig = TopologyRefreshConfig()
    max_partitions_per_run: int = Field(default=100, ge=1, le=10_000)
    base_dir: str = Field(
        default=".", description="relative paths (case_root, default SQLite file) resolve here"
    )

    @property
    def case_root_path(self) -> Path:
        p = Path(self.case_root).expanduser()
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()

    @property
    def sink_url_env(self) -> str | None:
        """Name of the environment variable holding the whole sink URL, if one is used."""
        return self.sink.url_env

    def resolved_sink_url(self, environ: Mapping[str, str] | None = None) -> str:
        """The sink URL with the password from the environment (for plain, non-Dagster use)."""
        env = os.environ if environ is None else environ
        if self.sink.url_env:
            url = env.get(self.sink.url_env)
            if not url:
                raise ConfigError(f"environment variable {self.sink.url_env} is empty")
        else:
            url = self.sink.url or default_sqlite_url(Path(self.base_dir))
        return with_password(
            url, env.get(self.sink.password_env) if self.sink.password_env else None
        )


def with_password(url: str, password: str | None) -> str:
    """Put a password into a SQLAlchemy URL without string building."""
    if not password:
        return url
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=password).render_as_string(hide_password=False)


def _url_has_password(url: str) -> bool:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).password is not None
    except ArgumentError as e:
        raise ConfigError(f"sink.url is not a SQLAlchemy URL: {e}") from None


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> AttributionConfig:
    """Read the YAML file (if any), apply environment overrides, validate.

    Raises ConfigError with the file and field named; never a bare traceback.
    """
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    source = "defaults"
    if path is None and env.get(CONFIG_ENV):
        path = env[CONFIG_ENV]
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        path = DEFAULT_CONFIG_FILE
    if path is not None:
        p = Path(path)
        source = str(p)
        import yaml  # here: a run without a configuration file needs no YAML parser

        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"{p}: cannot read configuration: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
            what = getattr(e, "problem", None) or " ".join(str(e).split())
            raise ConfigError(f"{where}: not valid YAML: {what}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping")
        data = dict(loaded)
        data.setdefault("base_dir", str(p.resolve().parent))
        sink_url = (
            (data.get("sink") or {}).get("url") if isinstance(data.get("sink"), dict) else None
        )
        if isinstance(sink_url, str) and _url_has_password(sink_url):
            raise ConfigError(
                f"{p}: sink.url contains a password; secrets come only from the environment "
                "(set sink.password_env, or ATTRIBUTION_SINK_URL)"
            )
    else:
        data["base_dir"] = str(Path.cwd())

    sink = dict(data.get("sink") or {})
    sensor = dict(data.get("sensor") or {})
    if env.get("ATTRIBUTION_CASE_ROOT"):
        data["case_root"] = env["ATTRIBUTION_CASE_ROOT"]
    if env.get("ATTRIBUTION_SINK_URL"):
        sink["url_env"] = "ATTRIBUTION_SINK_URL"
        sink.pop("url", None)
    if env.get("ATTRIBUTION_STORE_URL"):
        sink["store_url"] = env["ATTRIBUTION_STORE_URL"]
    if env.get("ATTRIBUTION_STDOUT_SINK"):
        sink["stdout"] = _truthy(env["ATTRIBUTION_STDOUT_SINK"])
    if env.get("ATTRIBUTION_SENSOR_ENABLED"):
        sensor["enabled"] = _truthy(env["ATTRIBUTION_SENSOR_ENABLED"])
    data["sink"] = sink
    data["sensor"] = sensor
    try:
        return AttributionConfig.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors()[:3]:
            field = ".".join(str(x) for x in err["loc"])
            problems.append(f"field '{field}': {str(err['msg']).removeprefix('Value error, ')}")
        more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
        raise ConfigError(f"{source}: {'; '.join(problems)}{more}") from None
