"""The webhook configurations' names: an installed operator's and a local run's differ.

A local run (`make run`) writes configurations whose webhooks call a URL; an installed
operator's (manifests/, the Helm chart) call a Service. The API server refuses a webhook
with both, which is what a `kubectl apply` merging one into the other would make; so the
two never share a name, while the webhooks inside keep theirs (error messages and docs
name `pods-mutate.quotree.io` either way).
"""

from __future__ import annotations

from quotree.resolution import never_gated
from quotree_webhooks import configurations

SERVICE = {"namespace": "quotree-system", "name": "quotree-webhooks", "port": 443}


def _names(client_config: dict[str, object]) -> tuple[str, str]:
    mutating, validating = configurations.build_configurations(
        client_config, never_gated=never_gated("quotree-system")
    )
    return mutating["metadata"]["name"], validating["metadata"]["name"]


def test_a_service_configuration_is_named_quotree_io() -> None:
    assert _names({"service": SERVICE, "caBundle": "Q0E="}) == ("quotree.io", "quotree.io")


def test_a_url_configuration_has_a_name_of_its_own() -> None:
    names = _names({"url": "https://127.0.0.1:9443", "caBundle": "Q0E="})
    assert names == ("local.quotree.io", "local.quotree.io")
    assert configurations.LOCAL_CONFIGURATION_NAME != configurations.CONFIGURATION_NAME


def test_the_webhooks_inside_are_named_alike_either_way() -> None:
    def webhook_names(client_config: dict[str, object]) -> list[str]:
        mutating, validating = configurations.build_configurations(
            client_config, never_gated=never_gated("quotree-system")
        )
        return [w["name"] for w in (*mutating["webhooks"], *validating["webhooks"])]

    local = webhook_names({"url": "https://127.0.0.1:9443"})
    assert local == webhook_names({"service": SERVICE})
    assert "pods-mutate.quotree.io" in local
