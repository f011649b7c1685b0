"""Wall-clock timestamps at the start of a log line, in the formats real clusters write.

One bytes regex recognises every supported prefix so that a scanner can (a) parse the time
of a line it already holds and (b) search a block *backwards* for the nearest earlier timed
line with a single C-level regex pass (`TIMED_LINE_START` begins with a literal newline,
which lets `re` skip ahead with a fast byte search).

Supported prefixes (optionally preceded by a few blanks, a syslog `<PRI>` / RFC 5424 `<PRI>1 `,
an srun task label `12: `, more blanks and an opening `[`: Megatron-LM prints
` [2026-11-02 10:03:05] iteration ...`, srun labels `0:  [2026-...]`):

- ISO 8601 with offset: `2026-11-02T10:03:11.123456+00:00`, `...Z`, `...+0000` (journald
  short-iso), with a space instead of `T` and `,` for fractions (Python logging);
- ISO 8601 without offset: interpreted in the context's `log_timezone`;
- RFC 3164 syslog: `Nov  2 10:03:11 host ...`, year inferred from the job start (a line
  more than ~6 months after the start belongs to the previous year, more than ~6 months
  before it to the next: a December line for a January job is last year's);
- `dmesg -T`: `[Mon Nov  2 10:03:11 2026] ...`, in `log_timezone`;
- NVIDIA Fabric Manager: `[Jul 23 2024 07:53:55] [ERROR] [tid 841] ...`, in `log_timezone`;
- glog / PyTorch c10 prefixes: `[rank3]:[E1102 10:03:11.123456789 ProcessGroupNCCL.cpp:697]`,
  `E0813 08:21:22.980000 1245483 torch/...`, year inferred like syslog, in `log_timezone`.

- JSON log lines (Vector, Fluent Bit, docker json-file, `journalctl -o json`): the `time`,
  `timestamp`, `@timestamp`, `date`, `ts` or `__REALTIME_TIMESTAMP` field, as ISO 8601, epoch
  seconds (`1700000000.123`) or journald microseconds (`"1700000000123456"`).

A raw `dmesg` stamp `[6781741.548779]` is seconds since boot, not wall time: such lines
count as untimed. Every parsed time is returned tz-aware in UTC.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {
    m.encode(): i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}

# A JSON log line (Vector, Fluent Bit, docker json-file, journalctl -o json, Elastic): its
# time is a field, not a prefix. Only a line starting with `{` tries this branch; the key must
# follow `{` or `,` (a key quoted inside an escaped message string is preceded by `\`), and
# the lazy scan for it is bounded (JSON_TIME_SCAN bytes) so a long line costs at most that.
JSON_TIME_SCAN = 4096
_JSON = (
    rb"\{(?:[^\n]{0,%d}?,)?[ \t]{0,4}\"(?:time|timestamp|@timestamp|date|ts|__REALTIME_TIMESTAMP)\""
    rb"[ \t]{0,2}:[ \t]{0,2}(?:"
    rb"\"(?P<jy>\d{4})-(?P<jmo>\d\d)-(?P<jd>\d\d)[T ](?P<jh>\d\d):(?P<jmi>\d\d):(?P<js>\d\d)"
    rb"(?:[.,](?P<jf>\d{1,9}))?(?P<jtz>Z|[+-]\d\d:?\d\d)?\""
    rb"|\"(?P<jus>\d{16})\""  # journald __REALTIME_TIMESTAMP: microseconds since the epoch
    rb"|(?P<jep>\d{10})(?:\.(?P<jepf>\d{1,9}))?(?=[,} \t])"  # Fluent Bit `double`, zap `ts`
    rb")"
) % JSON_TIME_SCAN

_BODY = (
    rb"[ \t]{0,4}(?:" + _JSON + rb"|"
    rb"(?:<\d{1,3}>(?:1 )?)?(?:\d{1,5}: )?(?:\[rank\d{1,6}\]:)?[ \t]{0,4}\[?"
    rb"(?:"
    # ISO 8601 / RFC 3339 / python logging / journald short-iso / RFC 5424
    rb"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    rb"(?:[.,](?P<f>\d{1,9}))?[ ]?(?P<tz>Z|[+-]\d\d:?\d\d)?"
    rb"|"
    # dmesg -T: weekday month day time year
    rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<tmon>[A-Z][a-z]{2}) +(?P<td>\d{1,2}) "
    rb"(?P<th>\d\d):(?P<tmi>\d\d):(?P<ts>\d\d) (?P<ty>\d{4})\]"
    rb"|"
    # RFC 3164 syslog: month day time (no year)
    # (NVIDIA Fabric Manager: `[Jul 23 2024 07:53:55]`, the year between day and time)
    rb"(?P<bmon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<bd>\d{1,2}) "
    rb"(?:(?P<by>\d{4}) )?"
    rb"(?P<bh>\d\d):(?P<bmi>\d\d):(?P<bs>\d\d)(?:\.(?P<bf>\d{1,6}))?(?=[ \]])"
    rb"|"
    # glog / PyTorch c10: severity letter, [M]MDD, time (no year): `[rank3]:[E1102 10:10:30.1234`
    rb"[IWEF](?P<gmd>[01]?\d[0-3]\d) (?P<gh>\d\d):(?P<gmi>\d\d):(?P<gs>\d\d)"
    rb"(?:\.(?P<gf>\d{1,9}))?(?= )"
    rb"))"
)

JSON_BRANCH, LINE_BODY = _JSON, _BODY  # the sources, for core/formats/timed_lines.py
LINE_TIME = re.compile(_BODY)
"""Match at a line start (`LINE_TIME.match(buf, line_start)`)."""

TIMED_LINE_START = re.compile(b"\n" + _BODY)
"""Search for a timed line start anywhere in a buffer (the match starts at its newline)."""

_HALF_YEAR = timedelta(days=183)


def earlier(a: datetime, b: datetime) -> bool:
    """a < b for times read from logs: aware ones compare directly (the hot case of folding
    repeats), a naive one counts as UTC."""
    try:
        return a < b
    except TypeError:  # naive vs aware
        a, b = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (a, b))
        return a < b


def _offset(tz: bytes) -> tzinfo:
    if tz == b"Z":
        return timezone.utc
    sign = -1 if tz[:1] == b"-" else 1
    digits = tz[1:].replace(b":", b"")
    minutes = int(digits[:2]) * 60 + int(digits[2:4])
    return timezone(sign * timedelta(minutes=minutes)) if minutes else timezone.utc


def _micros(frac: bytes | None) -> int:
    if not frac:
        return 0
    return int(frac[:6].ljust(6, b"0"))


def load_zone(name: str) -> tzinfo:
    """An IANA zone, or UTC when the name is unknown (the context loader validates it)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


class TimestampParser:
    """Parses line-start timestamps for one case: knows its log timezone and start year."""

    def __init__(self, reference: datetime, log_timezone: str = "UTC") -> None:
        self.reference = reference.astimezone(timezone.utc)
        self.zone = load_zone(log_timezone)
        self._offsets: dict[bytes, tzinfo] = {}
        # the last stamp parsed: storms and chatty logs repeat one second-resolution stamp
        # (`Nov  2 10:03:11`) thousands of times, and parsing is the scan's dearest step
        self._last: tuple[bytes | None, datetime | None] = (None, None)

    def parse_line(self, line: bytes) -> datetime | None:
        """UTC time of the line's leading timestamp, or None when it carries none."""
        m = LINE_TIME.match(line)
        return self.from_match(m) if m else None

    def from_match(self, m: re.Match[bytes]) -> datetime | None:
        """Turn a LINE_TIME / TIMED_LINE_START match into an aware UTC datetime."""
        key = m.group(0)
        if key == self._last[0]:
            return self._last[1]
        t = self._parse(m)
        self._last = (key, t)
        return t

    def _parse(self, m: re.Match[bytes]) -> datetime | None:
        try:
            g = m.group
            if g("jy") is not None or g("jus") is not None or g("jep") is not None:
                return self._json(m)
            if g("y") is not None:
                tz = g("tz")
                zone: tzinfo = self.zone
                if tz is not None:
                    zone = self._offsets.get(tz) or self._offsets.setdefault(tz, _offset(tz))
                t = datetime(
                    int(g("y")),
                    int(g("mo")),
                    int(g("d")),
                    int(g("h")),
                    int(g("mi")),
                    int(g("s")),
                    _micros(g("f")),
                    tzinfo=zone,
                )
            elif g("ty") is not None:
                t = datetime(
                    int(g("ty")),
                    _MONTHS[g("tmon")],
                    int(g("td")),
                    int(g("th")),
                    int(g("tmi")),
                    int(g("ts")),
                    tzinfo=self.zone,
                )
            elif g("gmd") is not None:
                md = int(g("gmd"))
                hms = int(g("gh")), int(g("gmi")), int(g("gs"))
                t = self._near_reference(md // 100, md % 100, hms, _micros(g("gf")))
            else:
                t = self._syslog(m)
            return t.astimezone(timezone.utc)
        except (ValueError, KeyError, OverflowError):
            return None

    def _json(self, m: re.Match[bytes]) -> datetime:
        """The time field of a JSON line: ISO 8601 (no offset: log_timezone), journald
        microseconds or epoch seconds."""
        g = m.group
        if g("jus") is not None:
            return datetime.fromtimestamp(int(g("jus")) / 1e6, timezone.utc)
        if g("jep") is not None:
            return datetime.fromtimestamp(int(g("jep")), timezone.utc) + timedelta(
                microseconds=_micros(g("jepf"))
            )
        tz = g("jtz")
        zone = self.zone if tz is None else _offset(tz)
        t = datetime(
            int(g("jy")),
            int(g("jmo")),
            int(g("jd")),
            int(g("jh")),
            int(g("jmi")),
            int(g("js")),
            _micros(g("jf")),
            tzinfo=zone,
        )
        return t.astimezone(timezone.utc)

    def _syslog(self, m: re.Match[bytes]) -> datetime:
        g = m.group
        month, day = _MONTHS[g("bmon")], int(g("bd"))
        hms = int(g("bh")), int(g("bmi")), int(g("bs"))
        if g("by") is not None:
            return datetime(int(g("by")), month, day, *hms, _micros(g("bf")), tzinfo=self.zone)
        return self._near_reference(month, day, hms, _micros(g("bf")))

    def _near_reference(
        self, month: int, day: int, hms: tuple[int, int, int], micros: int
    ) -> datetime:
        """A yearless date: the year that puts it within half a year of the job start."""
        year = self.reference.year
        for candidate in (year, year - 1, year + 1):
            try:
                t = datetime(candidate, month, day, *hms, micros, tzinfo=self.zone)
            except ValueError:  # Feb 29 in a non-leap year: try the neighbours
                continue
            delta = t - self.reference
            if -_HALF_YEAR <= delta <= _HALF_YEAR:
                return t
        raise ValueError("syslog date too far from the job start")
