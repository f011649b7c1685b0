"""Streaming prefilter scanner: anchor hits in a log file at close to grep speed.

Why it looks like this (design/PERF-NOTES.md): a Python loop over every line is ~14x slower
than grep, so the scanner never visits lines that do not matter. It reads big blocks cut at
the last newline, finds anchor hits with one compiled multi-pattern matcher (hyperscan when
importable, else one `re` alternation), and only touches the lines that hold a hit:

- line numbers come from counting newlines between consecutive hits (C speed; numpy for
  long spans of a big scan: core/formats/newlines.py);
- an untimed hit line inherits the time of the nearest earlier timed line of the same file,
  found by a backwards regex search over the bytes since the previous hit (each byte is
  searched at most about once); the last timed line of a block is carried into the next;
- its latest possible time is that of the nearest *later* timed line (`FileScan.latest`, by
  line number), found by a forward search from the hit that later untimed hits before the
  same timed line reuse; a hit still open at a block end is closed by the next block's first
  timed line, and one open at the file end has no upper bound (the job end bounds it);
- `context_after` lines that run past the end of a block are taken from the next block.

Storms cost per block, not per line (`fold_repeats`): once a fold key is hot (kept
FOLD_AFTER times, then folded), each later block first finds that key's lines with C-level
passes (core/formats/storms.py: lines of the kept line's stamp and uptime shape with the
key's constant bytes), records them in `FileScan.repeats` as the per-line fold would (count,
last line, time, text) and hands the hit finder a same-length copy of the block in which
they are NUL-filled; everything else reads the real block, so line numbers, inherited times,
`latest` and `tail` are unchanged. It is conservative: a block whose first or last line of
the storm is outside the window (or out of order) goes per line, so `out_of_window` stays
exact; stamps between those two are taken to run forward. A line of another shape (another
host, stamp format, no uptime) is never counted: it goes per line. A block in which a storm
begins ends after its first folded line (when no storm was counted in it yet and nothing
waits for continuation lines), so the storm's rest is counted per block from there.

Damaged lines (overlong, NUL-binary, invalid UTF-8, control garbage) are counted per block
with C-level calls (core/formats/damage.py). A line longer than both a block and
`max_line_bytes` is cut at the block end (an anchor spanning that cut is missed; such a line
is overlong anyway).
"""

from __future__ import annotations

import gzip
import io
import re
import stat
import zlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from attribution_dagster.core.formats.damage import NOT_CONTROL, clean_line, count_damage
from attribution_dagster.core.formats.matchers import (
    HYPERSCAN_IMPORTABLE,
    HyperscanMatcher,
    Matcher,
    NoMatcher,
    RegexMatcher,
    cover,
)
from attribution_dagster.core.formats.newlines import NUMPY_MIN_SPAN, Counter, counter
from attribution_dagster.core.formats.scan_types import (  # noqa: F401 - re-exported
    DEFAULT_BLOCK,
    FileScan,
    ScanSpec,
)
from attribution_dagster.core.formats.storms import UPTIME, Storm, fill_spans, storm_of
from attribution_dagster.core.formats.timed_lines import TimedLineSearch
from attribution_dagster.core.formats.timestamps import (
    JSON_TIME_SCAN,
    LINE_TIME,
    TIMED_LINE_START,
    TimestampParser,
)

HAVE_HYPERSCAN = HYPERSCAN_IMPORTABLE  # build_matcher reads it here (tests patch it)
# backwards steps when looking for an earlier timed line: most are found in the first
_BACK_STEPS = (512, 8192, 1 << 62)
_STAMP_MAX = JSON_TIME_SCAN + 256  # the longest TIMED_LINE_START match (a JSON line's)
PROGRESS_WINDOW = 64 * 1024  # a block's last progress line is looked for this far back
_PROGRESS_STEPS = (4096, PROGRESS_WINDOW)  # near the end first: dense progress stops early
# system logs hold no training progress: not searched for it (spec: file name conventions)
_SYSTEM_LOG = re.compile(r"^(?:kern|syslog|dmesg|messages|journal)", re.IGNORECASE)
_UPTIME_B = UPTIME  # what changes between repeats of a message: a dmesg uptime (as storms.py)
FOLD_KEYS_MAX = 65536  # distinct repeated lines remembered per file (beyond: kept as lines)
# a line is kept as itself its first FOLD_AFTER times in a file, then its repeats fold into the
# last one kept: exports reproduce ordinary repetition; an 800,000-line storm is one record
FOLD_AFTER = 64
STORM_KEYS = 8  # storms counted per block at once in a file (more: their repeats go per line)
_RECUT_PART = 8  # a block where a storm begins ends there if over 1/8 of it is left


def build_matcher(literals: Sequence[bytes], use_hyperscan: bool = True) -> Matcher:
    literals = [lit for lit in literals if lit]
    if not literals:
        return NoMatcher()
    if use_hyperscan and HAVE_HYPERSCAN:
        try:
            return HyperscanMatcher(literals)
        except Exception:  # hyperscan refused a literal: the `re` path gives the same hits
            pass
    return RegexMatcher(literals)


class FileScanner:
    """Scans files for one ScanSpec; one instance per process (holds the compiled matcher)."""

    skip_known_gaps = True  # no backward search where a forward one found no timed line

    def __init__(self, spec: ScanSpec) -> None:
        self.spec = spec
        lits = [lit.encode() for lit in spec.literals if lit and "\n" not in lit]
        self.matcher = build_matcher(lits, spec.use_hyperscan)
        # literals asking for continuation lines, checked per hit line (same on both paths)
        pairs = zip(spec.literals, spec.context_after, strict=True)
        self._ctx = [(lit.encode(), n) for lit, n in pairs if n > 0]
        # one C-level search says whether a hit line holds any of them (most hold none)
        self._ctx_any = re.compile(b"|".join(re.escape(lit) for lit, _ in self._ctx) or b"(?!)")
        self._last_lits = [lit.encode() for lit in spec.last_literals if lit]
        self._last_cores = cover(self._last_lits)
        self._progress_here = bool(self._last_lits)
        self.parser = TimestampParser(spec.reference, spec.log_timezone)
        self._timed = TimedLineSearch(spec.use_hyperscan)
        self._buffer: bytearray | None = None  # reused by every file this scanner reads
        self._nl: Counter = lambda lo, hi: 0  # newlines of the buffer (set with the buffer)
        self._found_at = -1  # line start of the timed line _last_time found last
        self._block_lines = -1  # newlines of the current block, once _hide_storms counted them

    # -- public -------------------------------------------------------------------------
    def scan_path(self, path: Path, display: str) -> FileScan:
        """Scan one file; read errors are reported in `error`, records found so far kept."""
        result = FileScan()
        self._progress_here = bool(self._last_lits) and not _SYSTEM_LOG.match(path.name)
        try:
            if not stat.S_ISREG(path.stat().st_mode):  # FIFO, socket, device: never open
                result.error = f"{display}: not a regular file, skipped"
                return result
            if path.name.endswith(".gz"):
                with gzip.open(path, "rb") as fh:
                    self._scan_stream(fh, result)
            else:
                with open(path, "rb", buffering=0) as fh:
                    self._scan_stream(fh, result)
        except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
            result.error = f"{display}: corrupt gzip ({exc or type(exc).__name__})"
        except OSError as exc:
            result.error = f"{display}: unreadable ({exc.strerror or exc})"
        except Exception as exc:  # never let one odd file stop the analysis; report it
            result.error = f"{display}: scan failed ({type(exc).__name__}: {exc})"
        return result

    def scan_bytes(self, data: bytes) -> FileScan:
        """Scan an in-memory file (tests, fuzzing)."""
        result = FileScan()
        self._progress_here = bool(self._last_lits)
        self._scan_stream(io.BytesIO(data), result)
        return result

    # -- internals ----------------------------------------------------------------------
    def _scan_stream(self, fh, result: FileScan) -> None:  # type: ignore[no-untyped-def]
        """Read into one reused buffer (no per-block allocation), cut blocks at the last
        newline and move the unfinished line to the front for the next read."""
        size = self.spec.block_size
        # a line is only cut when it outgrows both a block and the longest line kept whole
        cap = max(size, self.spec.max_line_bytes + 1)
        if self._buffer is None or len(self._buffer) != size + cap:
            self._buffer = bytearray(size + cap)
            self._nl = counter(self._buffer, self.spec.fast_count)
        buf = self._buffer
        view = memoryview(buf)
        state = _State()
        self._folds: dict[bytes, list[int]] = {}  # stamp-less line -> [last kept line, times kept]
        self._storms: dict[bytes, Storm] = {}  # hot fold keys counted per block
        self._no_storm: set[bytes] = set()  # hot keys the block path cannot count exactly
        n = 0  # valid bytes in buf
        last_byte = 10
        try:
            while True:
                got = fh.readinto(view[n : n + min(size, len(buf) - n)]) or 0
                if got:
                    result.bytes += got
                    n += got
                    last_byte = buf[n - 1]
                    cut = buf.rfind(b"\n", 0, n)
                    if cut < 0 and n < cap:
                        continue  # a line longer than this read: keep reading
                    limit = cut + 1 if cut >= 0 else n
                elif n:
                    limit = n
                else:
                    break
                limit = self._scan_block(buf, view, limit, state, result)  # may end it early
                count_damage(buf, view, limit, self.spec.max_line_bytes, result)
                buf[0 : n - limit] = buf[limit:n]
                n -= limit
                if not got and not n:
                    break
        finally:
            view.release()
        state.flush(result)
        result.lines = state.lines + (1 if last_byte != 10 else 0)

    def _scan_block(
        self, buf: bytearray, view: memoryview, limit: int, st: _State, res: FileScan
    ) -> int:
        # Long on purpose: the scanner's per-line hot loop; a call per line costs more than the
        # line, so the loop is one frame
        spec = self.spec
        count = self._nl  # newlines in buf[lo:hi] (numpy for long spans of a big scan)
        bcount = buf.count  # short spans: one C call, no Python frame
        ctx_any = self._ctx_any.search
        if st.pending:
            self._feed_pending(buf, 0, limit, st, res)
        nxt_pos, nxt_t = -1, None  # the next timed line after the last untimed hit
        nxt_from = -1  # where that forward search started
        if st.open:
            # from the block's start: its untimed hits up to that line reuse it (in a block
            # of NCCL chatter with no timed line, one search of the block instead of two)
            (nxt_pos, nxt_t), nxt_from = self._next_time(buf, -1, limit), 0
            if nxt_t is not None:
                for lineno in st.open:
                    res.latest[lineno] = nxt_t
                st.open = []
        cnt, cnt_pos = 0, 0
        carry0 = st.carry
        last_t, scan_pos = st.carry, 0
        tail_pos, tail_t = -1, None  # start and time of the block's last timed line seen
        self._block_lines = -1  # newlines of the block, when _hide_storms counted them
        hid, gaps = self._hide_storms(buf, view, limit, st, res) if self._storms else (None, None)
        if gaps is not None:  # storm lines counted as runs: only the lines between are read
            hits = [h for g0, g1 in gaps for h in self.matcher.hit_lines(buf, view, g1, g0)]
        elif hid is not None:
            hits = self.matcher.hit_lines(hid, memoryview(hid), limit)  # type: ignore[arg-type]
        else:
            hits = self.matcher.hit_lines(buf, view, limit)
        for s, e in hits:
            if hid is not None and hid.find(b"\x00", s, e) >= 0:
                continue  # a storm line counted by _hide_storms (an anchor in its stamp)
            cnt += bcount(b"\n", cnt_pos, s) if s - cnt_pos < NUMPY_MIN_SPAN else count(cnt_pos, s)
            cnt_pos = s
            lineno = st.lines + cnt + 1
            m = LINE_TIME.match(buf, s, e)
            t = self.parser.from_match(m) if m else None
            if t is not None:
                quality = "exact"
            else:
                skip = self.skip_known_gaps and 0 <= nxt_from <= scan_pos and nxt_pos >= s
                found = None if skip else self._last_time(buf, scan_pos, s)
                if found is not None:
                    last_t = found
                    if self._found_at > tail_pos:
                        tail_pos, tail_t = self._found_at, found
                t = last_t
                quality = "inherited" if t is not None else "unknown"
            if quality == "exact":
                last_t = t
                tail_pos, tail_t = s, t
            elif nxt_pos < e:  # untimed: bounded by the next timed line (shared by later hits)
                nxt_from, (nxt_pos, nxt_t) = e, self._next_time(buf, e, limit)
            scan_pos = e
            if t is not None and not (spec.window_start <= t <= spec.window_end):
                # an untimed line is an interval: out only when all of it is outside
                later = quality != "exact" and t < spec.window_start
                if not later or (nxt_t is not None and nxt_t < spec.window_start):
                    res.out_of_window += 1
                    continue
            key = seen = None
            if spec.fold_repeats:
                # the fold key is the raw line but for its stamp and dmesg uptime, taken
                # before any decoding: a storm's repeats cost a lookup, not a parse
                b0 = m.end() if (m is not None and quality == "exact") else s
                key = _UPTIME_B.sub(b"", buf[b0 : min(e, b0 + 160)], count=1) + buf[b0 + 160 : e]
                seen = self._folds.get(key)
                if seen is not None and seen[1] >= FOLD_AFTER:
                    rep = res.repeats.get(seen[0])
                    text = buf[s:e].decode("utf-8", "replace")
                    if rep is None:
                        res.repeats[seen[0]] = [2, lineno, t, text]
                    else:
                        rep[0] += 1
                        if lineno > rep[1]:  # _hide_storms may have counted later ones
                            rep[1], rep[2], rep[3] = lineno, t, text
                    if (
                        quality == "exact"
                        and spec.storm_blocks
                        and key not in self._storms
                        and key not in self._no_storm
                        and len(self._storms) < STORM_KEYS
                    ):
                        self._promote(key, buf, s, e, m)  # type: ignore[arg-type]
                        if (
                            key in self._storms
                            and hid is None
                            and gaps is None
                            and not st.pending
                            and limit - e > limit // _RECUT_PART
                        ):  # the block ends here: the next one counts the new storm's lines
                            limit, self._block_lines = e + 1, -1
                            break
                    continue
            raw = buf[s:e]
            text = self._clean(raw, res)
            if text is None:
                continue
            need = 0
            if ctx_any(raw) is not None:
                for lit, n in self._ctx:
                    if n > need and lit in raw:
                        need = n
            if key is not None and not need:
                if seen is not None:
                    seen[0], seen[1] = lineno, seen[1] + 1
                elif len(self._folds) < FOLD_KEYS_MAX:
                    self._folds[key] = [lineno, 1]
            record = [lineno, t, quality, text]
            res.records.append(record)  # type: ignore[arg-type]
            if quality != "exact":  # kept for records only: a folded storm adds nothing
                if nxt_t is not None:
                    res.latest[lineno] = nxt_t
                else:
                    st.open.append(lineno)
            if need:
                st.pending.append([record, need])
                self._feed_pending(buf, e + 1, limit, st, res, only_last=True)
        found = self._last_time(buf, scan_pos, limit)
        if found is not None and self._found_at > tail_pos:
            tail_pos, tail_t = self._found_at, found
        st.carry = found if found is not None else last_t
        st.lines += self._block_lines if self._block_lines >= 0 else cnt + count(cnt_pos, limit)
        if tail_t is not None:  # number it back from the block end (it is near the end)
            end = buf.find(b"\n", tail_pos, limit)
            end = limit if end < 0 else end
            lineno = st.lines - count(tail_pos, limit) + 1
            text = self._clean(buf[tail_pos:end], res)
            if text is not None:
                st.tail = (lineno, tail_t, text)
        if self._progress_here:
            self._last_progress(buf, limit, st, res, carry0)
        return limit  # where the block ended (before `limit` when a storm began in it)

    def _promote(self, key: bytes, buf: bytearray, s: int, e: int, m: re.Match[bytes]) -> None:
        """Make a hot key a storm counted per block when its lines can be told exactly
        (storms.storm_of); else remember it is not one."""
        tag = min(set(range(1, STORM_KEYS + 2)) - {x.tag for x in self._storms.values()})
        storm = storm_of(buf, s, e, m, self.matcher, tag)
        if storm is None:
            self._no_storm.add(key)
        else:
            self._storms[key] = storm

    def _hide_storms(
        self, buf: bytearray, view: memoryview, limit: int, st: _State, res: FileScan
    ) -> tuple[bytes | None, list[tuple[int, int]] | None]:
        """Count each storm's lines of this block in its repeats (count, last line, time and
        text: what the per-line fold gives) and say what the hit finder is to read instead
        of the block: the gaps between storm runs (start, end), or, when a storm was found
        by its regex, a copy of the block with the storm lines filled (NULs, a tag, the
        newline: offsets stay); (None, None) when no storm was counted. A storm is counted
        only in a block whose first and last lines of it are inside the window: times are
        taken to run forward between them (a storm crossing a window edge goes per line, so
        out_of_window stays exact). In a block holding a NUL, a storm needing the copy goes
        per line (NULs mark the filled lines for the hit loop)."""
        nul = -2  # where the block's first NUL is (-1: none), looked up when needed
        hid: bytes | None = None
        spans: list[tuple[int, int, bytes]] = []  # (start, end, one line of filler) of runs
        lo, hi = self.spec.window_start, self.spec.window_end
        for key, storm in list(self._storms.items()):
            runs = storm.runs(buf, limit)
            if runs is None:
                if nul == -2:
                    nul = buf.find(b"\x00", 0, limit)
                if nul >= 0:
                    continue  # NULs would not mark the filled lines alone: per line
                out, n, first, start = storm.subn(view[:limit] if hid is None else hid)
            else:
                n = sum(r for _, r in runs)
                first, start = (
                    (runs[0][0], runs[-1][0] + (runs[-1][1] - 1) * storm.width) if n else (-1, -1)
                )
            if not n:
                del self._storms[key]  # paused: its next per-line repeat promotes it again
                continue
            t_first = self._storm_time(buf, first, first + storm.stamp_len)
            t_last = self._storm_time(buf, start, start + storm.stamp_len)
            if t_first is None or t_last is None or not (lo <= t_first <= t_last <= hi):
                continue  # this block's repeats of it go the per-line way
            if runs is None:
                hid = out
            else:
                spans += [(a, a + r * storm.width, storm.line_fill) for a, r in runs]
            end = start + storm.width - 1
            if self._block_lines < 0:  # once a block; the storm's last line is counted back
                self._block_lines = self._nl(0, limit)
            lineno = st.lines + self._block_lines - self._nl(start, limit) + 1
            text = buf[start:end].decode("utf-8", "replace")
            kept = self._folds[key][0]
            rep = res.repeats.get(kept)
            if rep is None:
                res.repeats[kept] = [1 + n, lineno, t_last, text]
            else:
                rep[0] += n
                rep[1], rep[2], rep[3] = lineno, t_last, text
        spans.sort()
        if hid is not None:
            return fill_spans(hid, spans, limit), None
        if not spans:
            return None, None
        edges = [0, *(x for a, b, _ in spans for x in (a, b)), limit]
        return None, [(g0, g1) for g0, g1 in zip(edges[::2], edges[1::2], strict=True) if g1 > g0]

    def _storm_time(self, buf: bytearray, start: int, at: int) -> datetime | None:
        """The time of a storm line whose stamp ends at `at` (None: not read as such)."""
        m = LINE_TIME.match(buf, start, buf.find(b"\n", at))
        return self.parser.from_match(m) if m is not None and m.end() == at else None

    def _last_progress(
        self, buf: bytearray, limit: int, st: _State, res: FileScan, carry: datetime | None
    ) -> None:
        """The block's last line holding a progress literal, looked for only in the block's
        last PROGRESS_WINDOW bytes (C-level rfind), with its own or inherited time."""
        at, hi = -1, limit
        for step in _PROGRESS_STEPS:
            lo = max(0, limit - step)
            end = min(limit, hi + 64)  # overlap: a literal across the step boundary
            at = -1
            for core in self._last_cores:  # no core in the window: no literal either
                if buf.rfind(core, lo, end) >= 0:
                    at = max(buf.rfind(lit, lo, end) for lit in self._last_lits)
                    break
            if at >= 0 or lo == 0:
                break
            hi = lo  # the next, wider step only searches what this one did not
        if at < 0:
            return
        start = buf.rfind(b"\n", 0, at) + 1
        end = buf.find(b"\n", at, limit)
        end = limit if end < 0 else end
        m = LINE_TIME.match(buf, start, end)
        t = self.parser.from_match(m) if m else None
        quality = "exact"
        if t is None:
            t = self._last_time(buf, 0, start) or carry
            quality = "inherited" if t is not None else "unknown"
        text = self._clean(buf[start:end], res)
        if text is not None:
            lineno = st.lines - self._nl(start, limit) + 1
            st.progress = (lineno, t, quality, text)

    def _feed_pending(
        self,
        buf: bytearray,
        pos: int,
        limit: int,
        st: _State,
        res: FileScan,
        only_last: bool = False,
    ) -> None:
        """Append continuation lines starting at `pos` to records still waiting for them."""
        targets = st.pending[-1:] if only_last else st.pending
        want = max(n for _, n in targets)
        lines = self._lines_from(buf, pos, limit, want, res)
        for item in targets:
            rec, n = item
            take = lines[:n]
            if take:
                rec[3] = rec[3] + "\n" + "\n".join(take)
            item[1] = n - len(take)
        st.pending = [p for p in st.pending if p[1] > 0]

    def _lines_from(
        self, buf: bytearray, pos: int, limit: int, want: int, res: FileScan
    ) -> list[str]:
        """Up to `want` lines from `pos` (a line cut at `limit` counts), each as _clean
        gives it ("" for garbage). One slice, split and decode in the common case (text
        with no control character but newlines, valid UTF-8, short lines: _clean would
        change nothing); line by line otherwise."""
        span = min(limit, pos + 256 * want)
        while True:
            parts = buf[pos:span].split(b"\n", want)
            if len(parts) > want:
                del parts[want:]  # the rest of the slice: not wanted
                break
            if span >= limit:
                if parts[-1] == b"":  # the slice ends at a newline (or is empty)
                    parts.pop()
                break
            span = min(limit, pos + 4 * (span - pos))
        if not parts:
            return []
        chunk = b"\n".join(parts)
        if len(chunk) <= self.spec.max_line_bytes:
            ctrl = chunk.translate(None, NOT_CONTROL)
            if len(ctrl) == len(parts) - 1:  # its newlines only
                try:
                    return chunk.decode("utf-8").split("\n")
                except UnicodeDecodeError:
                    pass
        out = []
        for raw in parts:
            text = self._clean(raw, res)
            out.append(text if text is not None else "")
        return out

    def _next_time(self, buf: bytearray, pos: int, limit: int) -> tuple[int, datetime | None]:
        """(start, time) of the first timed line after the newline at `pos` (pos -1: the
        block's first line counts too); (limit, None) when the block holds none."""
        if pos < 0:
            m0 = LINE_TIME.match(buf, 0, limit)
            t0 = self.parser.from_match(m0) if m0 else None
            if t0 is not None:
                return 0, t0
            pos = 0
        search = self._timed.search  # TIMED_LINE_START.search, hyperscan finding candidates
        m = search(buf, pos, limit)
        while m is not None:
            t = self.parser.from_match(m)
            if t is not None:
                return m.start(), t
            m = search(buf, m.end(), limit)
        return limit, None

    def _last_time(self, buf: bytearray, lo: int, hi: int) -> datetime | None:
        """Time of the last timed line starting after the newline at `lo` and before `hi`
        (or at 0 when lo is 0): a short backwards step first, then the rest of the range."""
        t, before = None, hi
        for step in _BACK_STEPS:
            split = max(lo, hi - step)
            # a stamp starting before `split` may end after it: searched up to its longest
            t = self._last_in(buf, split, min(hi, before + _STAMP_MAX), before)
            if t is not None or split == lo:
                break
            before = split
        if t is None and lo == 0:
            m0 = LINE_TIME.match(buf, 0, hi)
            if m0 is not None:
                t = self.parser.from_match(m0)
                self._found_at = 0
        return t

    def _last_in(self, buf: bytearray, frm: int, stop: int, before: int) -> datetime | None:
        for m in reversed(list(TIMED_LINE_START.finditer(buf, frm, stop))):
            if m.start() < before:
                t = self.parser.from_match(m)
                if t is not None:
                    self._found_at = m.start() + 1  # the line starts after the newline
                    return t
        return None

    def _clean(self, raw: bytes | bytearray, res: FileScan) -> str | None:
        return clean_line(raw, self.spec.max_line_bytes, res)


class _State:
    """What a file scan carries from one block to the next."""

    __slots__ = ("lines", "carry", "pending", "open", "tail", "progress")

    def __init__(self) -> None:
        self.lines = 0  # newlines before the current block
        self.carry: datetime | None = None  # time of the last timed line so far
        self.pending: list[list] = []  # [record, lines still wanted]
        self.open: list[int] = []  # untimed hit lines still waiting for a later timed line
        self.tail: tuple[int, datetime, str] | None = None  # the last timed line so far
        self.progress: tuple[int, datetime | None, str, str] | None = None  # last progress line

    def flush(self, res: FileScan) -> None:
        self.pending = []
        res.tail = self.tail
        res.progress = self.progress
        res.records = [tuple(r) for r in res.records]  # type: ignore[misc]
