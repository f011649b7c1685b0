"""What sources return: prefiltered lines, metric samples, per-file tails and progress, and
coverage (what each source read and what it could not)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from attribution_dagster.core.formats.flight_recorder import FlightDump
from attribution_dagster.core.locators import Locator, _as_locator
from attribution_dagster.core.topology import Topology

TimeQuality = Literal["exact", "inherited", "unknown"]
"""`exact`: the line carried its own timestamp; `inherited`: taken from the nearest earlier
timed line of the same file; `unknown`: no timed line before it in the file.

An untimed line is an interval: written at or after `time` (the earlier timed line) and at or
before `time_latest` (the next timed line of the same file; None: the job / file end). A log
store's count per bucket (Loki `count_over_time`) gives the same shape: `inherited`, the
bucket's start and end."""


class Anchor(BaseModel):
    """A literal that a parser needs to see in a line; scanners prefilter on the union.

    `context_after` asks the scanner to append that many following lines to the record
    (for multi-line blocks such as torchrun's ChildFailedError summary).
    """

    model_config = ConfigDict(frozen=True)

    literal: str = Field(min_length=3)
    context_after: int = Field(default=0, ge=0, le=40)
    # not a prefilter hit: the scanner keeps only the LAST line of each file holding it
    # (training progress lines are a large share of a log; the engine needs where they stop)
    last_only: bool = False
    # a switch-side literal (OpenSM, UFM, switch syslog): a cluster-level source keeps such a
    # line even when it names no job node; the engine maps it through the topology
    switch_side: bool = False


class MetricFamily(BaseModel):
    """Metric names read together, and what makes a series worth fetching: what the metric
    rules want from a metric source, as anchors are what the log rules want from a log
    source (the parser catalog's `metrics:` specs; pipeline.py passes them).

    `mode` says which series can become an observation (increase | last_value | positive |
    state | below | any); `normal` and `steady_after` refine `state`; `companions` are
    fetched with the screened series, never screened (the denominator of mode `below`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    names: tuple[str, ...]
    mode: str
    normal: float | None = None
    steady_after: int | None = None
    companions: tuple[str, ...] = ()


class RawRecord(BaseModel):
    """One log line (plus requested continuation lines) that passed the prefilter."""

    model_config = ConfigDict(frozen=True)

    source: str  # "files", "loki", "k8s_pods", ...
    node: str
    locator: Locator  # logs/node-b/kern.log:1532 (FileLine), a LogQL query plus time (QueryAt)
    time: datetime | None
    time_quality: TimeQuality = "exact"
    time_latest: datetime | None = None  # untimed lines: the next timed line's time (upper bound)
    text: str  # the line; continuation lines follow after "\n" when an anchor asked for them
    stream: str = ""  # file name or stream label ("kern.log", "stdout"); hints system vs app output
    # the last timed line of its file (not a prefilter hit): where the source stops writing
    last_of_file: bool = False
    # a line repeated in its file with only its timestamps changed (an XID storm) is one
    # record: how many lines it stands for, and the last one's time and locator
    count: int = Field(default=1, ge=1)
    time_last: datetime | None = None
    locator_last: Locator | None = None
    text_last: str | None = None  # the last repeat as written (its own timestamps)
    # a line that states the same facts as later lines of its file stands for them all
    # (LineGrouper): the parser ids whose facts it stands for, `count` lines of them, the
    # last at `locator_last`; None: every parser's (a line grouped whole, or not grouped)
    only: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


ScanLine = tuple[int, datetime | None, str, str]
"""A kept line as a scanner has it: line number, time, time quality, text."""

LinePart = tuple[tuple[str, ...] | None, Hashable]
"""(parser ids or None for all, key): lines of one file with equal keys state one fact."""


class LineGrouper(Protocol):
    """Which kept lines of one file state the same facts, so a repeated fact crosses the
    process boundary once (issue 16). The rules layer implements it (it knows what a line
    says); a scanner calls it where it scans, file by file, in its worker process."""

    def parts(
        self, node: str, stream: str, lines: Sequence[ScanLine]
    ) -> list[list[LinePart] | None]:
        """Per line: None to keep it as it is, else its parts: a line whose every part's key
        was seen before in the file is folded into the lines that hold them."""
        ...


class MetricSample(BaseModel):
    """One sample of a Prometheus series, from a `.prom` file or a PromQL query."""

    model_config = ConfigDict(frozen=True)

    source: str  # "files", "prometheus"
    node: str
    locator: Locator  # metrics/dcgm.prom:12 (FileLine), or a PromQL query plus time (QueryAt)
    time: datetime
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float = Field(allow_inf_nan=False)  # JSON has no NaN / inf: it would come back null

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


CoverageStatus = Literal["ok", "partial", "failed", "empty"]


class SourceCoverage(BaseModel):
    """What one evidence source delivered, so a result can say what it did not see."""

    source: str  # "files:logs", "files:metrics", "prometheus", "loki", ...
    status: CoverageStatus = "ok"
    nodes_read: list[str] = Field(default_factory=list)
    nodes_missing: list[str] = Field(default_factory=list)
    pods_read: list[str] = Field(default_factory=list)  # Kubernetes pod logs: `ns/pod`
    pods_missing: list[str] = Field(default_factory=list)  # pods gone (404) or unreadable
    files: int = 0
    queries: int = 0  # requests made to a back-end (Loki, Prometheus, Kubernetes API)
    bytes: int = 0  # bytes read from files or received from a back-end
    lines: int = 0
    samples: int = 0
    records: int = 0  # lines or samples kept as raw evidence
    out_of_window: int = 0
    invalid_utf8_lines: int = 0
    overlong_lines: int = 0
    binary_lines: int = 0
    files_skipped: int = 0  # rotated files whose time span cannot overlap the window: not read
    context_lines: int = 0  # cluster-level lines naming no job node: context only, not kept
    errors: list[str] = Field(default_factory=list)
    retryable: bool = Field(
        default=False, description="the failure was transient (timeout, 429, 5xx): retry may help"
    )

    @property
    def problems(self) -> int:
        return self.invalid_utf8_lines + self.overlong_lines + self.binary_lines


class LogBatch(BaseModel):
    """What one log source returns for one job (the LogSource contract, connectors/base.py).

    `tails` and `progress` are state the engine relies on (its silence and progress tests),
    so they are first-class serialized fields here and on RawEvidence, never hidden inside
    coverage: a Dagster asset that stores raw evidence and reads it back sees them too.
    """

    records: list[RawRecord] = Field(default_factory=list)
    tails: list[RawRecord] = Field(
        default_factory=list,
        description="the last timed line of each file read (Loki: the last bucket with lines "
        "of each stream, an interval; pod logs: each container log's last line, not for a log "
        "cut at max_bytes_per_pod): where each source stopped writing (engine: silence)",
    )
    progress: list[RawRecord] = Field(
        default_factory=list,
        description="the last line of each file holding a `last_only` anchor (training "
        "progress; Loki: each node's last ones): where the job stopped advancing",
    )
    coverage: SourceCoverage

    def pair(self) -> tuple[list[RawRecord], SourceCoverage]:
        """(records, coverage), for callers that look at neither tails nor progress."""
        return self.records, self.coverage


class RawEvidence(BaseModel):
    """Everything fetched for one job: prefiltered lines, where each file stops (`tails`)
    and where training progress stops (`progress`), metric samples and coverage."""

    job_id: str
    records: list[RawRecord] = Field(default_factory=list)
    tails: list[RawRecord] = Field(default_factory=list)
    progress: list[RawRecord] = Field(default_factory=list)
    samples: list[MetricSample] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)
    dumps: list[FlightDump] = Field(
        default_factory=list,
        description="PyTorch flight-recorder dumps of the case (`dumps/`), read through the "
        "restricted unpickler and slimmed to plain fields (issue 18)",
    )
    topology: Topology | None = Field(
        default=None,
        description="where the job's nodes sit in the fabric: the case's `topology/`, else "
        "the cluster's topology sources at the job's start (issue 23); None when unknown",
    )
