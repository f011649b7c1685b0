"""The one HTTP client of the HTTP back-ends (connectors/http.py): what is transient,
Retry-After, backoff and the deadline, the client builder, and that no token reaches a
message. The servers are `fake_http` answering the back-ends' recorded error shapes."""

from __future__ import annotations

import email.utils
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from attribution_dagster.connectors import http
from attribution_dagster.connectors.base import JobQuery, SchedulerError
from attribution_dagster.connectors.loki.client import LokiClient, LokiConfig
from attribution_dagster.connectors.prometheus.client import PrometheusClient, PrometheusConfig
from attribution_dagster.connectors.slurm.client import SlurmConfig
from attribution_dagster.connectors.slurm.rest import RestClient
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, MetricFamily
from attribution_dagster.core.settings import Window

SECRET = "s3cr3t-t0ken-never-shown"
START = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
WINDOW = Window(start=START, end=START + timedelta(minutes=30))
CTX = ExecutionContext(job_id="1", scheduler="slurm", cluster="c", state="FAILED", start=START,
                       end=START + timedelta(minutes=30), nodes=["node-a"])  # fmt: skip


@pytest.mark.parametrize(
    ("what", "transient"),
    [
        (429, True), (500, True), (502, True), (503, True), (599, True),
        (200, False), (400, False), (401, False), (403, False), (404, False), (413, False),
        (True, False),  # a bool is no status
        (httpx.ReadTimeout("t"), True), (httpx.ConnectError("refused"), True),
        (httpx.RemoteProtocolError("closed mid-body"), True),
        (httpx.UnsupportedProtocol("ftp://"), False), (httpx.DecodingError("gzip"), False),
        (TimeoutError(), True), (ValueError("x"), False),
    ],
)  # fmt: skip
def test_is_transient(what: object, transient: bool) -> None:
    assert http.is_transient(what) is transient  # type: ignore[arg-type]


def test_retry_after_seconds_and_http_dates() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert http.retry_after_seconds(date, now=now) == pytest.approx(12, abs=1)
    assert http.retry_after_seconds("2") == 2.0 and http.retry_after_seconds("-3") == 0.0
    assert http.retry_after_seconds(email.utils.formatdate(now - 60, usegmt=True)) == 0.0
    for odd in (None, "", "soon", "nan", "Wed, 99 Foo 2026 99:99:99 GMT"):
        assert http.retry_after_seconds(odd) is None


def _answers(*statuses: int, headers: dict[str, str] | None = None):
    """A request function answering `statuses` in turn (then 200), counting its calls."""
    calls: list[int] = []

    def request() -> httpx.Response:
        status = statuses[len(calls)] if len(calls) < len(statuses) else 200
        calls.append(status)
        return httpx.Response(status, headers=headers or {})

    return request, calls


def test_backoff_doubles_and_is_capped() -> None:
    request, calls = _answers(500, 502, 503, 504, 500)
    waits: list[float] = []
    policy = http.RetryPolicy(retries=5, backoff_seconds=1, max_backoff_seconds=5)
    resp, attempts = http.send(request, policy, sleep=waits.append)
    assert resp.status_code == 200 and attempts == 6
    assert waits == [1, 2, 4, 5, 5]


def test_retries_spent_returns_the_last_transient_answer() -> None:
    request, calls = _answers(429, 429, 429, headers={"Retry-After": "1"})
    waits: list[float] = []
    resp, attempts = http.send(request, http.RetryPolicy(retries=2), sleep=waits.append)
    assert resp.status_code == 429 and attempts == 3 and waits == [1.0, 1.0]


def test_a_non_transient_answer_is_not_retried() -> None:
    request, calls = _answers(401)
    resp, attempts = http.send(request, http.RetryPolicy(retries=3), sleep=lambda s: None)
    assert resp.status_code == 401 and attempts == 1 and calls == [401]


def test_transport_errors_retried_then_raised_with_the_attempts() -> None:
    tries: list[int] = []

    def refused() -> httpx.Response:
        tries.append(1)
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(httpx.ConnectError) as info:
        http.send(refused, http.RetryPolicy(retries=2, backoff_seconds=0), sleep=lambda s: None)
    assert len(tries) == 3 and http.attempts_of(info.value) == 3

    def bad_url() -> httpx.Response:
        tries.append(1)
        raise httpx.UnsupportedProtocol("no scheme")

    tries.clear()
    with pytest.raises(httpx.UnsupportedProtocol):
        http.send(bad_url, http.RetryPolicy(retries=2), sleep=lambda s: None)
    assert len(tries) == 1


def test_the_deadline_counts_real_time_too() -> None:
    """With a real clock at 9 s of a 10 s deadline, a 2 s wait is not started."""
    request, calls = _answers(503)
    ticks = iter([0.0, 9.0])
    resp, attempts = http.send(
        request, http.RetryPolicy(retries=3, backoff_seconds=2, deadline_seconds=10),
        sleep=lambda s: None, clock=lambda: next(ticks),
    )  # fmt: skip
    assert resp.status_code == 503 and attempts == 1


def test_build_client_names_the_variable_never_the_secret(tmp_path) -> None:
    with pytest.raises(http.HttpSetupError, match="environment variable TOKEN_VAR is empty"):
        http.build_client(timeout=1, bearer_token_env="TOKEN_VAR", environ={})
    with pytest.raises(http.HttpSetupError, match="PW_VAR"):
        http.build_client(timeout=1, basic_user="u", basic_password_env="PW_VAR", environ={})
    with pytest.raises(http.HttpSetupError, match="cannot load TLS files"):
        http.build_client(timeout=1, ca_file=str(tmp_path / "missing.pem"))
    client = http.build_client(timeout=1, bearer_token_env="T", environ={"T": SECRET},
                               headers={"X-Scope-OrgID": "team"})  # fmt: skip
    assert client.headers["Authorization"] == f"Bearer {SECRET}"
    assert client.headers["X-Scope-OrgID"] == "team"


def test_no_token_in_any_error_of_loki_prometheus_or_slurmrestd(fake_http) -> None:
    """Each back-end with a secret answers 401, then 500 until retries run out, then refuses
    the connection: the secret is in none of the messages (nor in their coverage)."""
    env = {"LOKI_T": SECRET, "PROM_T": SECRET, "SLURM_T": SECRET}
    texts: list[str] = []
    for status in (401, 500):
        fake_http.routes.clear()
        fake_http.prefixes.clear()
        for method in ("GET", "POST"):
            fake_http.route_prefix(method, "/", lambda req, s=status: (s, f"no ({s})"))
        for url in (fake_http.url, "http://127.0.0.1:9"):
            loki = LokiClient(LokiConfig(url=url, bearer_token_env="LOKI_T", retries=1),
                              sleep=lambda s: None, environ=env)  # fmt: skip
            batch = loki.fetch_logs(CTX, [Anchor(literal="NVRM: Xid")], WINDOW)
            texts += batch.coverage.errors
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("PROM_T", SECRET)
                prom = PrometheusClient(
                    PrometheusConfig(url=url, bearer_token_env="PROM_T", retries=1),
                    sleep=lambda s: None,
                )
                _, cov = prom.fetch_metrics(
                    CTX, [MetricFamily(id="x", names=("X",), mode="any")], WINDOW
                )
            texts += cov.errors
            cfg = SlurmConfig(transport="slurmrestd", restd_url=url, api_version="v0.0.41",
                              jwt_env="SLURM_T", retries=1, node_addresses=False)  # fmt: skip
            with pytest.raises(SchedulerError) as info:
                RestClient(cfg, "c", env=env, sleep=lambda s: None).finished_jobs(
                    JobQuery(since=START)
                )
            texts.append(str(info.value))
    assert len(texts) >= 12 and all(texts)
    assert not [t for t in texts if SECRET in t], texts
    assert any("answered 401" in t for t in texts) and any("answered 500" in t for t in texts)
