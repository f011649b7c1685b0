"""The one Kubernetes API client builder of the Kueue scheduler and the pod-log source.

Where the API is reached, in this order: the pod's service account (`in_cluster`); a
kubeconfig (`kubeconfig` / `context`, default $KUBECONFIG or ~/.kube/config) when one is
named or no `api_url` is given, with `api_url` overriding its server; else `api_url` alone
(tests, `kubectl proxy`) with `verify_tls` and an optional bearer token read from the
environment variable `token_env`. The official client's own retries are off: a transient
failure is reported as retryable and retried by the caller (connectors/http.py's policy
for HTTP back-ends, Dagster's retries for runs). Errors name the file, context or
variable, never the token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from attribution_dagster.core.secrets import remember


class KubeConfigError(ValueError):
    """No usable API configuration; the message says which one and why, in one line."""


def build_api_client(
    *,
    api_url: str | None = None,
    in_cluster: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
    token_env: str | None = None,
    verify_tls: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Any:
    """A `kubernetes.client.ApiClient`; KubeConfigError when it cannot be configured."""
    from kubernetes import config as kconfig
    from kubernetes.client import ApiClient, Configuration

    cfg = Configuration()
    try:
        if in_cluster:
            kconfig.load_incluster_config(client_configuration=cfg)
        elif kubeconfig or not api_url:
            kconfig.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=cfg,
                persist_config=False,
            )
    except (kconfig.ConfigException, OSError, TypeError, ValueError) as exc:
        where = (
            "the in-cluster service account"
            if in_cluster
            else f"kubeconfig {kubeconfig or '$KUBECONFIG / ~/.kube/config'}"
            + (f" context {context!r}" if context else "")
        )
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise KubeConfigError(f"cannot load {where}: {first}") from None
    if api_url:
        cfg.host = api_url.rstrip("/")
        if not (in_cluster or kubeconfig):
            cfg.verify_ssl = verify_tls
            if token_env:
                env = os.environ if environ is None else environ
                token = env.get(token_env, "").strip()
                if not token:
                    raise KubeConfigError(
                        f"environment variable {token_env} (token_env) is not set"
                    )
                # kubernetes >= 36 reads the key 'BearerToken' (and 'authorization' only
                # as a fallback, without its prefix); older versions 'authorization'
                cfg.api_key = {"BearerToken": token, "authorization": token}
                cfg.api_key_prefix = {"BearerToken": "Bearer", "authorization": "Bearer"}
    remember_credentials(cfg)
    cfg.retries = 0  # one attempt per request: see the module docstring
    return ApiClient(configuration=cfg)


def remember_credentials(cfg: Any) -> None:
    """Every credential the configuration holds (token_env, a kubeconfig user's token or
    password, the service account's token) as a secret never to print (core/secrets.py)."""
    for value in (getattr(cfg, "api_key", None) or {}).values():
        token = str(value or "").strip()
        remember(token)
        remember(token.removeprefix("Bearer ").strip())
    remember(getattr(cfg, "password", None) or None, user=getattr(cfg, "username", None))

