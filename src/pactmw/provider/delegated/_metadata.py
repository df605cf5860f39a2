"""What the authorization server publishes: the card's security scheme, RFC 8414 metadata, JWKS."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from pactmw.core.http import Response
from pactmw.protocols.delegation import authorization_server_issuer
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._responses import PUBLIC_DOCUMENT, json_response

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@frozen
class Metadata:
    """The documents a personal agent reads before it asks for anything."""

    ctx: ServerContext

    def card_scheme(self, brand: Brand, config: DelegationConfig) -> dict[str, Any]:
        """The card's `userDelegation` security scheme (spec §5.1)."""
        return {
            "oauth2SecurityScheme": {
                "flows": {
                    "deviceCode": {
                        "deviceAuthorizationUrl": self.ctx.url(brand, "device_authorization"),
                        "tokenUrl": self.ctx.url(brand, "token"),
                        "scopes": dict(config.scopes),
                    }
                },
                "oauth2MetadataUrl": self.ctx.url(brand, ".well-known/oauth-authorization-server"),
            }
        }

    def metadata(self, brand: Brand, config: DelegationConfig) -> Response:
        """RFC 8414 metadata (pact-provider.md §5.4); RFC 9396 §10 types only when accepted
        (the Identity conformance suite then probes that an unknown type is refused)."""
        document: dict[str, Any] = {
            "issuer": authorization_server_issuer(self.ctx.interface(brand)),
            "device_authorization_endpoint": self.ctx.url(brand, "device_authorization"),
            "token_endpoint": self.ctx.url(brand, "token"),
            "jwks_uri": self.ctx.url(brand, "jwks.json"),
            "scopes_supported": list(config.scopes),
            "grant_types_supported": [DEVICE_CODE_GRANT, "refresh_token"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        }
        if config.authorization_details:
            document["authorization_details_types_supported"] = [
                kind.type for kind in config.authorization_details
            ]
        return json_response(document, extra=PUBLIC_DOCUMENT)

    def jwks(self) -> Response:
        """The keys that sign delegation tokens and receipts."""
        return json_response(self.ctx.keys.jwks(), extra=PUBLIC_DOCUMENT)


__all__ = [
    "DEVICE_CODE_GRANT",
    "Metadata",
]
