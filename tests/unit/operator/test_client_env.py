"""When the API client may skip its per-request proxy and netrc lookups (client.py)."""

from __future__ import annotations

from pathlib import Path

from quotree_operator.connection import env_lookups_matter


def test_nothing_to_find_means_no_lookups(tmp_path: Path) -> None:
    assert not env_lookups_matter({"PATH": "/bin", "HOME": str(tmp_path)}, tmp_path)


def test_a_proxy_or_netrc_in_the_environment_keeps_them(tmp_path: Path) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY", "NETRC"):
        assert env_lookups_matter({name: "x"}, tmp_path), name
    assert not env_lookups_matter({"HTTPS_PROXY": ""}, tmp_path)  # empty: aiohttp ignores it
    (tmp_path / ".netrc").write_text("machine example.com login a password b\n")
    assert env_lookups_matter({}, tmp_path)
