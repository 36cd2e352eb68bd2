"""The connection to the Kubernetes API: credentials, and one pool of connections.

`open_api` finds the credentials (the in-cluster ServiceAccount, else the kubeconfig) and
makes the client that `client.Kube` calls through; a missing or broken kubeconfig is one
`CredentialsError` line. Besides client.py, the only module that imports kubernetes_asyncio.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubernetes_asyncio import client, config

from quotree_operator.kube_errors import CredentialsError
from quotree_operator.pod_reader import ListRequest

__all__ = ["env_lookups_matter", "list_request", "open_api"]


#: Environment variables aiohttp's trust_env reads on each request (any case).
_ENV_LOOKUPS = ("http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy", "netrc")


def env_lookups_matter(environ: Mapping[str, str], home: Path | None = None) -> bool:
    """Would the environment give an API call a proxy or netrc credentials?"""
    if any(name.lower() in _ENV_LOOKUPS and value for name, value in environ.items()):
        return True
    return ((home or Path.home()) / ".netrc").exists()


async def open_api(pool: int = 64) -> client.ApiClient:
    """Load the kubeconfig (or the in-cluster config) and open one connection pool."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        try:
            await config.load_kube_config(client_configuration=configuration)
        except Exception as exc:  # ConfigException, a missing file, bad YAML, ...
            where = os.environ.get("KUBECONFIG") or "~/.kube/config"
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise CredentialsError(f"kubeconfig {where}: {detail}") from None
    configuration.connection_pool_maxsize = pool
    api = client.ApiClient(configuration)
    if not env_lookups_matter(os.environ):
        # The client's session looks up proxies and ~/.netrc in the environment on every
        # request, each in a thread (two thread hops per API call, ~10% of the operator's
        # CPU in a burst: bench/RESULTS.md). With nothing there to find, skip them.
        api.rest_client.pool_manager._trust_env = False
    return api


async def list_request(api: client.ApiClient, target: str, timeout: float) -> ListRequest | None:
    """`target` (a path and query) as this client would ask for it, for a process that
    makes the call itself (pod_reader.py); None when the client goes through a proxy,
    which only the client knows how to use."""
    configuration = api.configuration
    if configuration.proxy or env_lookups_matter(os.environ):
        return None
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip", **api.default_headers}
    for setting in (await configuration.auth_settings()).values():
        if setting["in"] != "header":
            return None
        headers[setting["key"]] = setting["value"]
    return ListRequest(
        url=(configuration.host or "").rstrip("/") + target,
        headers=headers,
        ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        verify=bool(configuration.verify_ssl),
        server_name=configuration.tls_server_name,
        strict=not configuration.disable_strict_ssl_verification,
        timeout=timeout,
    )
