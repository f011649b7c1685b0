"""The one HTTP client of every HTTP back-end (Loki, Prometheus, slurmrestd, ...).

- `build_client`: an httpx.Client with the back-end's base URL, timeout, TLS (verify, a CA
  bundle, an mTLS client certificate) and auth (a bearer token or basic auth read from the
  environment variable the configuration names). Its errors (`HttpSetupError`) name the
  variable or the file, never the secret.
- `is_transient`: the one answer to "may trying again help?": 429, 5xx, a timeout, a
  refused or dropped connection. 401/403 and other 4xx are not.
- `send`: one request with retries on transient answers, exponential backoff
  (`backoff_seconds * 2**attempt`), honouring `Retry-After` (delta-seconds or an HTTP date),
  every wait capped by `max_backoff_seconds`, and no retry that would end after
  `retry_deadline_seconds` from the first attempt. It returns the last response (the caller
  reads its status) or raises the last transport error.
- `HttpBackendConfig`: the keys every HTTP back-end block shares (retries, backoff, cap,
  deadline) on top of `BackendConfig`.

Tokens are sent as headers and never formatted into a message: errors built here say
which environment variable to check. Every secret read is remembered (core/secrets.py),
so an answer that echoes it is masked wherever it is quoted.
"""

from __future__ import annotations

import email.utils
import os
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timezone

import httpx
from pydantic import Field

from attribution_dagster.connectors.base import BackendConfig
from attribution_dagster.core.secrets import remember


class HttpSetupError(ValueError):
    """The client cannot be built (an empty secret variable, unreadable TLS files)."""


def checked_url(value: str, auth_keys: str) -> str:
    """A back-end's base URL as configured: http(s)://host[:port][/prefix], trailing slash
    dropped, and never with credentials in it (they would show in every error and log line;
    `auth_keys` names the block's keys that take them from the environment instead)."""
    v = value.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", v):
        raise ValueError(f"url must be http(s)://host[:port][/prefix], got {v!r}")
    if "@" in v.split("://", 1)[1].split("/", 1)[0]:
        raise ValueError(f"url must not hold credentials: use {auth_keys}")
    return v


class HttpBackendConfig(BackendConfig):
    """Retry keys every HTTP back-end block shares (see `send`)."""

    retries: int = Field(default=3, ge=0, le=10, description="retries after 429 / 5xx / timeout")
    backoff_seconds: float = Field(default=0.5, ge=0, description="first retry delay, doubled")
    max_backoff_seconds: float = Field(default=30.0, ge=0, description="cap, also on Retry-After")
    retry_deadline_seconds: float = Field(
        default=120.0,
        gt=0,
        description="no retry that would end later than this after the first try",
    )

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            retries=self.retries,
            backoff_seconds=self.backoff_seconds,
            max_backoff_seconds=self.max_backoff_seconds,
            deadline_seconds=self.retry_deadline_seconds,
        )


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0
    deadline_seconds: float | None = 120.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before retry number `attempt + 1`: Retry-After when the server gave
        one, else exponential backoff; capped either way."""
        wanted = retry_after if retry_after is not None else self.backoff_seconds * 2**attempt
        return min(self.max_backoff_seconds, wanted)


NO_RETRY = RetryPolicy(retries=0)


def is_transient(what: int | BaseException) -> bool:
    """Whether trying again may help: a 429 or 5xx status, a timeout, a refused or dropped
    connection (any httpx transport error). Anything else (401/403, 4xx, a bad URL, an
    undecodable body) would fail the same way again."""
    if isinstance(what, bool):  # bool is an int: never a status
        return False
    if isinstance(what, int):
        return what == 429 or 500 <= what <= 599
    if isinstance(what, httpx.TimeoutException | httpx.TransportError):
        return not isinstance(what, httpx.UnsupportedProtocol)
    return isinstance(what, TimeoutError | ConnectionError)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or odd."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN is odd
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def send(
    request: Callable[[], httpx.Response],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[httpx.Response, int]:
    """(response, attempts): `request()` until its answer is not transient, the retries
    are spent, or the next wait would pass the deadline. A transient transport error on
    the last attempt is raised; a non-transient one at once."""
    started = clock()
    waited = 0.0  # the waits asked for: they count against the deadline even when `sleep`
    attempt = 0  # returns at once (tests)
    while True:
        retry_after: float | None = None
        try:
            resp = request()
        except httpx.HTTPError as exc:
            spent = max(clock() - started, waited)
            if not is_transient(exc) or not may_retry(policy, attempt, None, spent):
                exc.attempts = attempt + 1  # type: ignore[attr-defined]
                raise
        else:
            if not is_transient(resp.status_code):
                return resp, attempt + 1
            retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
            if not may_retry(policy, attempt, retry_after, max(clock() - started, waited)):
                return resp, attempt + 1
        delay = policy.delay(attempt, retry_after)
        sleep(delay)
        waited += delay
        attempt += 1


def may_retry(policy: RetryPolicy, attempt: int, retry_after: float | None, spent: float) -> bool:
    """Another attempt is allowed: retries left, and its wait ends within the deadline."""
    if attempt >= policy.retries:
        return False
    if policy.deadline_seconds is None:
        return True
    return spent + policy.delay(attempt, retry_after) <= policy.deadline_seconds


def attempts_of(exc: BaseException) -> int:
    """How many attempts `send` made before raising `exc` (1 when it did not say)."""
    return int(getattr(exc, "attempts", 1))


def build_client(
    *,
    base_url: str = "",
    timeout: float,
    verify: bool = True,
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    bearer_token_env: str | None = None,
    basic_user: str | None = None,
    basic_password_env: str | None = None,
    environ: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    follow_redirects: bool = False,
) -> httpx.Client:
    """An httpx.Client for one back-end. Raises HttpSetupError naming the variable or file
    at fault (never its content)."""
    env = os.environ if environ is None else environ
    all_headers = {"Accept": "application/json", **(headers or {})}
    auth: httpx.Auth | None = None
    if bearer_token_env:
        token = remember(env.get(bearer_token_env, "").strip())
        if not token:
            raise HttpSetupError(f"environment variable {bearer_token_env} is empty")
        all_headers["Authorization"] = f"Bearer {token}"
    elif basic_user is not None:
        password = remember(env.get(basic_password_env or "", ""), user=basic_user) or ""
        if basic_password_env and not password:
            raise HttpSetupError(f"environment variable {basic_password_env} is empty")
        auth = httpx.BasicAuth(basic_user, password)
    return httpx.Client(
        base_url=base_url,
        headers=all_headers,
        auth=auth,
        timeout=timeout,
        verify=tls_context(verify, ca_file, client_cert, client_key),
        transport=transport,
        follow_redirects=follow_redirects,
    )


def tls_context(
    verify: bool,
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
) -> bool | ssl.SSLContext:
    """httpx's `verify`: an SSLContext for a CA bundle or a client certificate (a path
    string is deprecated), else the bool."""
    if not verify or not (ca_file or client_cert):
        return verify
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if client_cert:
            context.load_cert_chain(client_cert, client_key)
    except (OSError, ssl.SSLError) as exc:
        raise HttpSetupError(f"cannot load TLS files: {exc}") from None
    return context


def one_line(exc: BaseException, limit: int = 200) -> str:
    """`ConnectError: [Errno 111] Connection refused`, whitespace folded, cut at `limit`."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"
