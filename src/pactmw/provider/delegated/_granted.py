"""What `Provider.grant_delegation` gives an app's tests: a grant and its tokens."""

from __future__ import annotations

from attrs import field, frozen


@frozen
class DelegationGrant:
    """A grant recorded as a person's approval records it, with the token response of the
    token endpoint for it (`access_token` lasts at most an hour, as every delegation token)."""

    grant_id: str
    #: The grant's scopes after the approval (a grant already live for the same agent's
    #: user is widened, as on the consent page), sorted.
    scopes: tuple[str, ...]
    access_token: str = field(repr=False)
    refresh_token: str = field(repr=False)
    expires_in: int

    @property
    def header(self) -> str:
        """The `X-A2A-User-Delegation` value: `Bearer <access_token>`."""
        return f"Bearer {self.access_token}"


__all__ = [
    "DelegationGrant",
]
