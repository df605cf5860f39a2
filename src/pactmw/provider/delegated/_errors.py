"""The two refusals of the authorization server: OAuth errors (JSON) and consent pages (HTML).

Both are rendered by `pactmw.provider.errors.error_response`.
"""

from __future__ import annotations

from pactmw.core.errors import PactmwError


class OAuthError(PactmwError):
    """An RFC 6749 §5.2 / RFC 8628 error, rendered as its JSON body (no-store)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


class ConsentRefused(PactmwError):
    """A consent page error, rendered as an HTML page with `status`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    @classmethod
    def unusable_code(cls) -> ConsentRefused:
        """The user code matches no pending, unexpired authorization of this Brand."""
        return cls("This code is unknown, expired or already used.", 400)


__all__ = [
    "ConsentRefused",
    "OAuthError",
]
