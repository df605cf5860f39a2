"""Ledger requirements proven on pactmw's pure parts: one issuer per Brand when a Provider
hosts several Companies (PAP-3.2-07/08), and no dependence on the agent's ID format
(PAP-7.2-03)."""

from __future__ import annotations

import pytest

from pactmw.protocols.poppy import ApiDescriptor, authorization_server_metadata, parse_message
from pactmw.provider.poppy import PoppyConfig, poppy_companies

BASE_URL = "https://support.example"


def _config(domain: str) -> PoppyConfig:
    api = ApiDescriptor("openapi", f"https://{domain}/openapi.json", "Orders")
    return PoppyConfig(domain=domain, agents="any", apis=(api,))


def test_pap_3_2_08_each_brand_has_its_own_issuer() -> None:
    """PAP-3.2-07/08: one Provider hosting two Companies gives each its own issuer (a path
    under the one host), and each issuer's metadata names only its own Company's domain."""
    companies = poppy_companies(
        BASE_URL,
        {
            "shop": ("Shop", _config("shop.example")),
            "outlet": ("Outlet", _config("outlet.example")),
        },
    )
    issuers = {brand: company.issuer for brand, company in companies.items()}
    assert issuers == {
        "shop": f"{BASE_URL}/a2a/shop/poppy",
        "outlet": f"{BASE_URL}/a2a/outlet/poppy",
    }
    for brand, company in companies.items():
        metadata = authorization_server_metadata(company)
        assert metadata["issuer"] == issuers[brand]
        assert metadata["poppy_domains"] == [f"{brand}.example"]


@pytest.mark.parametrize(
    "message_id", ["1", "m", "UPPER-lower_09", "no-prefix-at-all", "msg_", "x" * 256]
)
def test_pap_7_2_03_any_agent_message_id_is_accepted(message_id: str) -> None:
    """PAP-7.2-03: the agent chooses its message ids' format; pactmw needs only §7.2's
    characters and length, never a prefix or a shape of its own."""
    message = parse_message({"id": message_id, "sender": "agent", "text": "Hi"})
    assert message.id == message_id
