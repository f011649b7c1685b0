"""The credentials this process has read, so that no message can repeat one (issue 21).

Connectors never format a token or password into a message themselves, but they do quote
what a back-end answered (a Kubernetes Status `message`, an Elasticsearch `reason`,
slurmrestd's `errors`, a proxy's plain-text body), and a misconfigured proxy or debug
endpoint may echo the request's `Authorization` header there. So every place that reads
a secret `remember`s it (the value, its base64, and for basic auth the base64 of
`user:password`, i.e. the header), and the few places where back-end text leaves for a
user (`SourceError`, coverage errors, the CLI's error line) `redact` it; once a secret is
known, every log record is masked as it is made.

Values shorter than MIN_LENGTH are not remembered: replacing them would mangle ordinary
text (tokens, API keys and JWTs are far longer). The results-database password is not
remembered either: SQLAlchemy and the drivers never print it, and the URLs shown are
rendered with it hidden (tests/test_secrets.py checks both).
"""

from __future__ import annotations

import base64
import threading
from urllib.parse import quote

MIN_LENGTH = 8
MASK = "<redacted>"

_known: set[str] = set()
_ordered: tuple[str, ...] = ()  # longest first: a value containing another is masked whole
_lock = threading.Lock()


def remember(value: str | None, *, user: str | None = None) -> str | None:
    """Record `value` (and its encoded forms) as a secret; returns it unchanged."""
    global _ordered
    if not value or len(value) < MIN_LENGTH:
        return value
    forms = {value, quote(value, safe=""), base64.b64encode(value.encode()).decode()}
    if user is not None:
        forms.add(base64.b64encode(f"{user}:{value}".encode()).decode())
    with _lock:
        if forms <= _known:
            return value
        _known.update(forms)
        _ordered = tuple(sorted(_known, key=len, reverse=True))
        _install_log_masking()
    return value


def redact(text: str) -> str:
    """`text` with every remembered secret replaced by MASK."""
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _install_log_masking() -> None:
    """Mask remembered secrets in every log record as it is made, whoever logs it and
    whichever handler shows it (a client library logging a response body at DEBUG). logging
    is imported here: most runs remember no secret and log nothing."""
    import logging

    previous = logging.getLogRecordFactory()
    if getattr(previous, "masks_secrets", False):
        return

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _ordered:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format string is logging's to report
                return record
            clean = redact(message)
            if clean != message:
                record.msg, record.args = clean, None
        return record

    factory.masks_secrets = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
