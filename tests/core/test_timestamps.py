"""Line-start timestamp formats (connectors/timestamps.py), one test per format."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from attribution_dagster.core.formats.timestamps import TIMED_LINE_START, TimestampParser

UTC = timezone.utc
REF = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def parser() -> TimestampParser:
    return TimestampParser(REF)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"2026-11-02T10:03:11.123456+00:00 node-a kernel: x", utc(2026, 11, 2, 10, 3, 11, 123456)),
        (b"2026-11-02T10:03:11Z node-a kernel: x", utc(2026, 11, 2, 10, 3, 11)),
        (b"2026-11-02T12:03:11.5+02:00 msg", utc(2026, 11, 2, 10, 3, 11, 500000)),
        (b"2026-11-02T05:03:11-0500 node-a kernel: x", utc(2026, 11, 2, 10, 3, 11)),
        (b"2026-11-02T10:03:11+0000 node-a kernel: journald", utc(2026, 11, 2, 10, 3, 11)),
        (b"2026-11-02 10:03:11,123 INFO train.py: step", utc(2026, 11, 2, 10, 3, 11, 123000)),
        (b"[2026-11-02 10:03:11,123] WARNING x", utc(2026, 11, 2, 10, 3, 11, 123000)),
        (b"2026-11-02T10:03:11.123456789Z nanos", utc(2026, 11, 2, 10, 3, 11, 123456)),
        (b"Nov  2 10:03:11 node-a kernel: NVRM", utc(2026, 11, 2, 10, 3, 11)),
        (b"Nov 12 10:03:11 node-a kernel: x", utc(2026, 11, 12, 10, 3, 11)),
        (b"[Mon Nov  2 10:03:11 2026] NVRM: Xid", utc(2026, 11, 2, 10, 3, 11)),
        (b"<13>1 2026-11-02T10:03:11.000Z node-a app - - - msg", utc(2026, 11, 2, 10, 3, 11)),
        (b"<4>Nov  2 10:03:11 node-a kernel: x", utc(2026, 11, 2, 10, 3, 11)),
        (b"12: 2026-11-02 10:03:11,000 srun task label", utc(2026, 11, 2, 10, 3, 11)),
    ],
)
def test_formats(parser: TimestampParser, line: bytes, expected: datetime) -> None:
    got = parser.parse_line(line)
    assert got == expected
    assert got is not None and got.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "line",
    [
        b"[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.",
        b"node-a:123:456 [3] NCCL INFO Channel 00/0",
        b"Traceback (most recent call last):",
        b'  File "train.py", line 3, in <module>',
        b"2026-13-45T10:03:11Z impossible date",
        b"Foo  2 10:03:11 node-a not a month",
        b"",
    ],
)
def test_untimed_lines(parser: TimestampParser, line: bytes) -> None:
    assert parser.parse_line(line) is None


def test_offsetless_iso_uses_log_timezone() -> None:
    p = TimestampParser(REF, "America/New_York")  # EST (-05:00) on 2 Nov 2026
    assert p.parse_line(b"2026-11-02 05:03:11,000 INFO x") == utc(2026, 11, 2, 10, 3, 11)
    assert p.parse_line(b"Nov  2 05:03:11 host kernel: x") == utc(2026, 11, 2, 10, 3, 11)
    assert p.parse_line(b"[Mon Nov  2 05:03:11 2026] x") == utc(2026, 11, 2, 10, 3, 11)
    # an explicit offset wins over the zone
    assert p.parse_line(b"2026-11-02T10:03:11Z x") == utc(2026, 11, 2, 10, 3, 11)


def test_summer_time_in_log_timezone() -> None:
    p = TimestampParser(utc(2026, 7, 1), "Europe/Berlin")  # CEST, +02:00
    assert p.parse_line(b"2026-07-01 12:00:00 x") == utc(2026, 7, 1, 10, 0, 0)


def test_unknown_zone_falls_back_to_utc() -> None:
    p = TimestampParser(REF, "Not/AZone")
    assert p.parse_line(b"2026-11-02 10:03:11 x") == utc(2026, 11, 2, 10, 3, 11)


def test_syslog_year_from_reference() -> None:
    p = TimestampParser(utc(2025, 6, 1))
    assert p.parse_line(b"Jun  1 00:00:01 h kernel: x") == utc(2025, 6, 1, 0, 0, 1)


def test_syslog_new_year_december_line_for_january_job() -> None:
    p = TimestampParser(utc(2027, 1, 1, 0, 5))
    assert p.parse_line(b"Dec 31 23:59:50 h kernel: x") == utc(2026, 12, 31, 23, 59, 50)
    assert p.parse_line(b"Jan  1 00:00:10 h kernel: x") == utc(2027, 1, 1, 0, 0, 10)


def test_syslog_new_year_january_line_for_december_job() -> None:
    p = TimestampParser(utc(2026, 12, 31, 23, 50))
    assert p.parse_line(b"Jan  1 00:10:00 h kernel: x") == utc(2027, 1, 1, 0, 10)


def test_syslog_feb_29() -> None:
    p = TimestampParser(utc(2028, 3, 1))
    assert p.parse_line(b"Feb 29 10:00:00 h kernel: x") == utc(2028, 2, 29, 10)
    # no leap year within half a year of the job: not a plausible date -> untimed
    assert TimestampParser(utc(2027, 2, 1)).parse_line(b"Feb 29 10:00:00 h kernel: x") is None


def test_timed_line_start_finds_lines_after_newlines(parser: TimestampParser) -> None:
    buf = b"junk\nNov  2 10:00:01 a k: x\nuntimed\n2026-11-02T10:00:02Z y\nuntimed\n"
    times = [parser.from_match(m) for m in TIMED_LINE_START.finditer(buf)]
    assert times == [utc(2026, 11, 2, 10, 0, 1), utc(2026, 11, 2, 10, 0, 2)]


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            b"[rank3]:[E1102 10:10:30.123456789 ProcessGroupNCCL.cpp:697] [Rank 3] Watchdog",
            datetime(2026, 11, 2, 10, 10, 30, 123456, tzinfo=timezone.utc),
        ),
        (
            b"115: [rank115]:[E1031 19:04:38.123186550 ProcessGroupNCCL.cpp:697] x",
            datetime(2026, 10, 31, 19, 4, 38, 123186, tzinfo=timezone.utc),
        ),
        (
            b"E1101 08:21:22.980000 1245483 torch/distributed/elastic/multiprocessing/api.py:984]",
            datetime(2026, 11, 1, 8, 21, 22, 980000, tzinfo=timezone.utc),
        ),
        (
            b"[rank3]:[E207 19:04:38.1 x.cpp:1] y",
            datetime(2027, 2, 7, 19, 4, 38, 100000, tzinfo=timezone.utc),
        ),
        (b"Error: 1102 10:00:00 is not a glog prefix", None),
    ],
)
def test_glog_pytorch_prefix_takes_year_from_job_start(line: bytes, expected) -> None:
    parser = TimestampParser(datetime(2026, 11, 2, 10, tzinfo=timezone.utc), "UTC")
    assert parser.parse_line(line) == expected


# JSON log lines: the time is a field (shapes: Fluent Bit `json` output with its default
# `date` key and `double` date format, Vector's journald source `timestamp`, docker json-file
# `{"log","stream","time"}`, `journalctl -o json` `__REALTIME_TIMESTAMP` in microseconds,
# zap `ts` epoch seconds)
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"date": "2026-11-02T10:03:11.250000Z", "log": "x\\n", "stream": "stderr"}',
         utc(2026, 11, 2, 10, 3, 11, 250000)),
        (b'{"date":1793613791.5,"log":"x"}', utc(2026, 11, 2, 10, 3, 11, 500000)),
        (b'{"timestamp": "2026-11-02T10:03:11.000000Z", "host": "n1", "message": "NVRM: Xid"}',
         utc(2026, 11, 2, 10, 3, 11)),
        (b'{"log":"a \\"time\\": \\"2020-01-01T00:00:00Z\\", b\\n","stream":"stderr",'
         b'"time":"2026-11-02T10:03:11.123456789Z"}', utc(2026, 11, 2, 10, 3, 11, 123456)),
        (b'{"__CURSOR":"s=739ad;i=4ece7;t=4c508a72423d9","__REALTIME_TIMESTAMP":"1793613791000001",'
         b'"MESSAGE":"x"}', utc(2026, 11, 2, 10, 3, 11, 1)),
        (b'{ "__CURSOR" : "s=739ad", "__REALTIME_TIMESTAMP" : "1793613791000000",'
         b' "MESSAGE" : "x" }',
         utc(2026, 11, 2, 10, 3, 11)),
        (b'{"level":"error","ts":1793613791.25,"msg":"x"}', utc(2026, 11, 2, 10, 3, 11, 250000)),
        (b'{"@timestamp":"2026-11-02T11:03:11+01:00","message":"x"}', utc(2026, 11, 2, 10, 3, 11)),
    ],
)  # fmt: skip
def test_json_line_time_fields(parser: TimestampParser, line: bytes, expected: datetime) -> None:
    assert parser.parse_line(line) == expected
    # the backwards search for an earlier timed line finds JSON lines too
    m = TIMED_LINE_START.search(b"untimed\n" + line)
    assert m is not None and parser.from_match(m) == expected


@pytest.mark.parametrize(
    "line",
    [
        b'{"a": 1, "log": "no time field"}',
        b'{"time": "12:00", "log": "not a date"}',
        b'{"log": "the message says \\"time\\":\\"2026-11-02T10:03:11Z\\""}',
        b'1793613791 a bare epoch is not a JSON time field',
    ],
)
def test_json_lines_without_a_time_field(parser: TimestampParser, line: bytes) -> None:
    assert parser.parse_line(line) is None


def test_parsers_read_the_message_of_a_json_line() -> None:
    from attribution_dagster.rules.decoders import json_message, strip_prefix

    line = '{"date": "2026-11-02T10:03:11Z", "log": "[rank3]: ValueError: bad \\"x\\"\\n"}'
    assert json_message(line) == '[rank3]: ValueError: bad "x"'
    assert strip_prefix(line) == 'ValueError: bad "x"'
    assert json_message("ValueError: plain") is None


def test_fabric_manager_stamp_carries_its_year(parser: TimestampParser) -> None:
    """NVIDIA Fabric Manager's log prefix (`[Jul 23 2024 07:53:55] [ERROR] [tid 841] ...`, as
    quoted by leptonai/gpud) names the year, so it is not inferred from the job start."""
    line = b"[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034"
    assert parser.parse_line(line) == utc(2024, 7, 23, 7, 53, 55)
