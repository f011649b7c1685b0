"""A small, tolerant parser for Prometheus text exposition files with timestamps.

Why not `prometheus_client`'s parser: it raises on the first bad line and does not give line
numbers, while a case file must keep going past a garbled line and every sample needs a
`metrics/<file>:<line>` locator. Grammar handled:

    # HELP / # TYPE / other comments           -> ignored
    name{label="value",...} value [timestamp]  -> a sample; timestamp in milliseconds

Label values may contain the escapes `\\"`, `\\\\` and `\\n`; a trailing comma inside the
braces is accepted; values may be `NaN`, `+Inf`, `-Inf`. A sample without a timestamp cannot
be placed in time: the parser returns it with `timestamp_ms=None` and the connector counts
and skips it (reported once per file in coverage.errors) rather than guessing a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from attribution_dagster.core.hosts import strip_port

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class PromSyntaxError(ValueError):
    """One line is not valid exposition text."""


@dataclass(frozen=True)
class PromSample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None
    line: int  # 1-based line number in the file


@dataclass
class PromFile:
    samples: list[PromSample] = field(default_factory=list)
    lines: int = 0
    malformed: list[int] = field(default_factory=list)  # line numbers of bad lines


def _label_value(line: str, pos: int) -> tuple[str, int]:
    """Parse a quoted label value starting after its opening quote; returns (value, pos)."""
    out: list[str] = []
    n = len(line)
    while pos < n:
        ch = line[pos]
        if ch == '"':
            return "".join(out), pos + 1
        if ch == "\\":
            if pos + 1 >= n:
                break
            nxt = line[pos + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            pos += 2
            continue
        out.append(ch)
        pos += 1
    raise PromSyntaxError("unterminated label value")


def _labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    labels: dict[str, str] = {}
    n = len(line)
    while True:
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos < n and line[pos] == "}":
            return labels, pos + 1
        m = _LABEL.match(line, pos)
        if m is None:
            raise PromSyntaxError("bad label name")
        pos = m.end()
        while pos < n and line[pos] in " \t":
            pos += 1
        if not line.startswith("=", pos):
            raise PromSyntaxError("expected '=' after label name")
        pos += 1
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n or line[pos] != '"':
            raise PromSyntaxError("expected '\"' to open label value")
        value, pos = _label_value(line, pos + 1)
        labels[m.group()] = value
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos < n and line[pos] == ",":
            pos += 1
        elif pos < n and line[pos] == "}":
            continue
        else:
            raise PromSyntaxError("expected ',' or '}' after label value")


def parse_line(line: str) -> tuple[str, dict[str, str], float, int | None]:
    """(name, labels, value, timestamp_ms) of one sample line; raises PromSyntaxError."""
    m = _NAME.match(line)
    if m is None:
        raise PromSyntaxError("bad metric name")
    name, pos = m.group(), m.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _labels(line, pos + 1)
    rest = line[pos:].split()
    if not rest or len(rest) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise PromSyntaxError("expected 'value [timestamp]' after the series")
    try:
        value = float(rest[0])
    except ValueError:
        raise PromSyntaxError(f"bad value {rest[0]!r}") from None
    ts: int | None = None
    if len(rest) == 2:
        try:
            ts = int(rest[1])
        except ValueError:
            try:
                ts = int(float(rest[1]))
            except (ValueError, OverflowError):
                raise PromSyntaxError(f"bad timestamp {rest[1]!r}") from None
    return name, labels, value, ts


def iter_samples(lines: Iterable[str], result: PromFile) -> Iterator[PromSample]:
    """Samples of a file's lines; bad lines are recorded in `result.malformed`."""
    for number, raw in enumerate(lines, 1):
        result.lines = number
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, labels, value, ts = parse_line(line)
        except PromSyntaxError:
            result.malformed.append(number)
            continue
        yield PromSample(name, labels, value, ts, number)


def parse_text(text: str) -> PromFile:
    """Parse a whole exposition text (small files, tests)."""
    result = PromFile()
    result.samples = list(iter_samples(text.splitlines(), result))
    return result


NODE_LABELS = ("Hostname", "hostname", "instance", "node", "kubernetes_node", "nodename")


def _label_host(key: str, value: str) -> str:
    """`instance` carries a port (`gpu-7:9400`, `[fd00::7]:9400`): nodes.strip_port drops it."""
    return strip_port(value) if key == "instance" else value


def sample_nodes(labels: dict[str, str]) -> list[str]:
    """Every host a sample's labels may name, in order of preference: `Hostname`, `instance`
    (port stripped), `node`, ... In Kubernetes dcgm-exporter's `Hostname` is the exporter
    pod's name and `instance` often an IP, so the caller takes the first that is a job node."""
    out: list[str] = []
    for key in NODE_LABELS:
        value = labels.get(key)
        if value:
            host = _label_host(key, value)
            if host not in out:
                out.append(host)
    return out


def sample_node(labels: dict[str, str]) -> str | None:
    """The preferred node label of a sample: `Hostname`, `instance` (port stripped), `node`."""
    names = sample_nodes(labels)
    return names[0] if names else None
