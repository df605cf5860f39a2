"""4. Contexts: another user's, an unknown one, another Brand's, and one token used twice."""

from __future__ import annotations

import uuid

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._wire import UNKNOWN_CONTEXT
from pactmw.check.names import (
    FOREIGN_BRAND,
    FOREIGN_SUB,
    TOKEN_REUSE,
    TOKEN_REUSE_ONE_BRAND,
    UNKNOWN_CONTEXT_ID,
)
from pactmw.client import card_interface_url, fetch_card


class ContextChecks(Checks):
    """The context checks; the cross-Brand ones need `other_card_url`."""

    other_interface = ""

    def run(self) -> None:
        ctx = self.ctx
        ctx.check(
            FOREIGN_SUB,
            f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" when another sub of the same personal agent '
            "sends in a user's contextId, and the owner can still continue it (PACT §4.2)",
            self._foreign_sub,
        )
        ctx.check(
            UNKNOWN_CONTEXT_ID,
            f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" for a contextId the Provider never minted',
            self._unknown_context,
        )
        if self.settings.other_card_url is not None:
            ctx.check(
                FOREIGN_BRAND,
                f'INVALID_PARAMS "{UNKNOWN_CONTEXT}" for a contextId of one Brand sent to the '
                "other, both ways (PACT §4.2)",
                self._foreign_brand,
            )
            ctx.check(
                TOKEN_REUSE,
                "one personal-agent JWT accepted at both Brands (the audience is Provider-wide, "
                "no replay tracking), then 404 with no A2A body at an unknown Brand",
                self._token_reuse,
            )
        else:
            ctx.check(
                TOKEN_REUSE_ONE_BRAND,
                "one personal-agent JWT accepted twice (no replay tracking), then 404 with no "
                "A2A body at an unknown Brand",
                self._token_reuse,
            )

    def _own_context(self) -> str:
        """The user's conversation: the one the reply check opened, or a new one."""
        ctx = self.ctx
        if ctx.context_id is None:
            ctx.context_id = self.expect.reply(self.http.send(), "first message")["contextId"]
        return ctx.context_id

    def _foreign_sub(self) -> None:
        http, expect = self.http, self.expect
        context_id = self._own_context()
        response = http.send("Whose conversation?", sub=self.ctx.other_sub, context_id=context_id)
        expect.error(response, "INVALID_PARAMS", "another user's contextId", UNKNOWN_CONTEXT)
        expect.reply(
            http.send("Still mine.", context_id=context_id),
            "the owner continuing",
            context_id=context_id,
        )

    def _unknown_context(self) -> None:
        response = self.http.send("Anyone there?", context_id=str(uuid.uuid4()))
        self.expect.error(response, "INVALID_PARAMS", "a random UUID contextId", UNKNOWN_CONTEXT)

    def _other_interface(self) -> str:
        if not self.other_interface:
            http = self.http
            url = self.settings.other_card_url
            assert url is not None
            card = fetch_card(url, transport=http.transport, retry=http.retry)
            self.other_interface = card_interface_url(card)
            if self.other_interface == self.ctx.interface:
                raise Mismatch("--other-brand to name another Brand", f"the same {card.url}")
        return self.other_interface

    def _foreign_brand(self) -> None:
        http, expect = self.http, self.expect
        other = self._other_interface()
        context_id = self._own_context()
        response = http.send("Wrong Brand.", interface=other, context_id=context_id)
        expect.error(
            response, "INVALID_PARAMS", "this Brand's contextId at the other", UNKNOWN_CONTEXT
        )
        theirs = expect.reply(http.send("At the other Brand.", interface=other), "other Brand")
        response = http.send("Back again.", context_id=theirs["contextId"])
        expect.error(
            response, "INVALID_PARAMS", "the other Brand's contextId here", UNKNOWN_CONTEXT
        )

    def _token_reuse(self) -> None:
        http, expect = self.http, self.expect
        token = http.token()
        expect.reply(http.send("One token.", token=token), "first use")
        other = (
            self._other_interface() if self.settings.other_card_url is not None else http.interface
        )
        expect.reply(http.send("Same token.", token=token, interface=other), "second use")
        response = http.send("Nobody here.", token=token, interface=self.ctx.unknown_interface())
        expect.bare(response, (404,), "a valid token at an unknown Brand")


__all__ = [
    "ContextChecks",
]
