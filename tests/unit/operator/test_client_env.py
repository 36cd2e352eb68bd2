"""When the API client may skip its per-request proxy and netrc lookups (client.py), and
the request a helper process makes as the client would (connection.list_request)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio import client

from quotree_operator.connection import env_lookups_matter, list_request


def test_nothing_to_find_means_no_lookups(tmp_path: Path) -> None:
    assert not env_lookups_matter({"PATH": "/bin", "HOME": str(tmp_path)}, tmp_path)


def test_a_proxy_or_netrc_in_the_environment_keeps_them(tmp_path: Path) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY", "NETRC"):
        assert env_lookups_matter({name: "x"}, tmp_path), name
    assert not env_lookups_matter({"HTTPS_PROXY": ""}, tmp_path)  # empty: aiohttp ignores it
    (tmp_path / ".netrc").write_text("machine example.com login a password b\n")
    assert env_lookups_matter({}, tmp_path)


async def test_a_helper_asks_as_the_client_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up pod list's helper (pod_reader.py) gets the client's address, token and
    TLS settings; a proxy it would not know how to use leaves the call to the client."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    configuration = client.Configuration(host="https://10.0.0.1:6443/")
    configuration.api_key = {"BearerToken": "t0ken"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = client.ApiClient(configuration)
    try:
        # Set once the client is made (it reads the files when it is): the files are named,
        # not read, by list_request.
        configuration.ssl_ca_cert = "/ca.crt"
        configuration.cert_file, configuration.key_file = "/c.crt", "/c.key"
        configuration.tls_server_name = "kubernetes.default"
        request = await list_request(api, "/api/v1/pods?limit=1", 60)
        assert request is not None
        assert request.url == "https://10.0.0.1:6443/api/v1/pods?limit=1"
        assert request.headers["authorization"] == "Bearer t0ken"
        assert request.headers["Accept-Encoding"] == "gzip"
        assert request.headers["User-Agent"] == api.user_agent
        assert (request.ca_file, request.cert_file, request.key_file) == (
            "/ca.crt",
            "/c.crt",
            "/c.key",
        )
        assert request.server_name == "kubernetes.default"
        assert request.verify
        assert request.strict
        assert request.timeout == 60
        configuration.proxy = "http://proxy:3128"
        assert await list_request(api, "/api/v1/pods", 60) is None
        configuration.proxy = None
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
        assert await list_request(api, "/api/v1/pods", 60) is None
    finally:
        await api.close()
