"""Line prefixes: what stands between a log line's start and what the application printed.

Timestamps, `host tag[pid]:`, container-runtime and launcher prefixes (srun, torchrun, Ray,
mpirun, kubectl), and the message field of a JSON log line. Parsers with `strip_prefix`
match after them; torchrun's summary block is read without them.
"""

from __future__ import annotations

import json
import re

# Log-line prefixes that stand between a line's start and what the application printed:
# ISO / RFC 3164 / dmesg stamps, an optional `host tag[pid]: `, and launcher prefixes: srun's
# `N: ` task label, torchrun's `[rankN]:` / `[defaultN]:`, Ray's `(Name pid=N, ip=A)`, mpirun's
# `[j,r]<stderr>:`, kubectl's `[pod/p/c]`. Bounded quantifiers keep it linear on long lines.
_PREFIX = re.compile(
    r"^(?:(?:\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)?"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
    r"|\[ {0,12}\d{1,12}\.\d{1,9}\])\s{1,4}"
    r"(?:std(?:out|err) [PF] )?"  # CRI container log: stream, partial/full tag
    r"(?:[\w.-]{1,64} [\w./-]{1,64}(?:\[\d{1,10}\])?: )?)?"
    # launcher prefixes (parsers.yaml `origins`): Ray `(Name pid=N, ip=A) `, kubectl
    # `[pod/<pod>/<container>] `, srun `N: `, torchrun `[rankN]:` / `[defaultN]:`, mpirun
    # `[j,r]<stderr>:`, several in a row
    r"(?:\((?:raylet|(?:[A-Za-z_][\w.:-]{0,80} )?pid=\d{1,10})(?:, ip=[0-9A-Fa-f.:]{3,45})?\)\s"
    r"|\[pod/[\w.-]{1,253}/[\w.-]{1,253}\]\s"
    r"|\s{0,6}\d{1,6}: "
    r"|\[(?:rank|default)\d{0,7}\]:\s?"
    r"|\[\d{1,6},\d{1,7}\]<(?:stdout|stderr|stddiag)>:\s?){0,4}"
)


# The message field of a JSON log line (Fluent Bit / docker `log`, Vector `message`, journald
# `MESSAGE`, zap / logrus `msg`): a key right after `{` or `,` (one inside an escaped string
# follows a backslash), its string value with JSON escapes.
_JSON_MSG = re.compile(
    r'[{,]\s{0,4}"(?:log|message|MESSAGE|msg)"\s{0,2}:\s{0,2}"((?:[^"\\]|\\.){0,65536})"'
)


def json_message(line: str) -> str | None:
    """The message of a JSON log line (`{"log": "...", ...}`), unescaped, or None when the
    line is not one. Only lines starting with `{` are looked at."""
    if not line.lstrip(" \t")[:1] == "{":
        return None
    m = _JSON_MSG.search(line)
    if m is None:
        return None
    try:
        msg = json.loads(f'"{m.group(1)}"')
    except ValueError:
        msg = m.group(1)
    return msg.rstrip("\r\n")


def strip_prefix(line: str) -> str:
    """The line without timestamp / host / srun / torchrun prefixes; a JSON log line's
    message field (without its own prefixes)."""
    if line[:1] in "{ \t":
        msg = json_message(line)
        if msg is not None:
            line = msg.split("\n", 1)[0]
    # each branch of `_PREFIX` starts with `[`, `(`, an ASCII capital, a digit, or (srun's
    # `N: `) up to 6 blanks and a digit: most lines (a torchrun summary's `  host : ...` and
    # `====`, a message) start otherwise and skip the regex
    c = line[:1]
    if c != "[" and c != "(" and not ("A" <= c <= "Z" or c.isdecimal()):
        if not (c.isspace() and line.lstrip()[:1].isdecimal()):
            return line
    m = _PREFIX.match(line)
    return line[m.end() :] if m and m.end() else line
