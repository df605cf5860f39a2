"""2-3. Replies and continuation, the percent-encoded colon, retries, and a user message
reusing an agent reply's messageId."""

from __future__ import annotations

import uuid

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._wire import describe, reply_id
from pactmw.check.names import AGENT_MESSAGE_ID, ENCODED_COLON, REPLY, RETRY


class MessageChecks(Checks):
    """The message checks. The reply check leaves its conversation for the context checks."""

    #: (contextId, an agent reply's messageId) from the retry check.
    retry_context: tuple[str, str] | None = None

    def run(self) -> None:
        ctx = self.ctx
        ctx.check(
            REPLY,
            "a reply {message: {messageId, contextId, role: ROLE_AGENT, parts: [{text}]}} and "
            "the same contextId when the conversation continues (PACT §4.2)",
            self._reply,
        )
        ctx.check(
            ENCODED_COLON,
            "POST message%3Asend is message:send (a percent-encoded colon)",
            self._encoded_colon,
        )
        ctx.check(
            RETRY,
            "a repeated messageId in the same contextId returns the stored reply byte for byte, "
            "without running the agent again (PACT §4.3)",
            self._retry,
        )
        ctx.check(
            AGENT_MESSAGE_ID,
            "INVALID_PARAMS for a user message reusing the messageId of an agent reply in the "
            "context (messageId unique within the context, PACT §4.1)",
            self._agent_message_id,
        )

    def _reply(self) -> str:
        http, expect = self.http, self.expect
        sent = str(uuid.uuid4())
        first = expect.reply(http.send(message_id=sent), "first message")
        if first["messageId"] == sent:
            raise Mismatch("a new messageId on the reply", f"the sent one, {sent}")
        context_id = first["contextId"]
        expect.reply(
            http.send("A second message in the same conversation.", context_id=context_id),
            "continuation",
            context_id=context_id,
        )
        self.ctx.context_id = context_id
        return f"contextId {context_id}"

    def _encoded_colon(self) -> None:
        response = self.http.send("Percent-encoded.", path="message%3Asend")
        self.expect.reply(response, "message%3Asend")

    def _retry(self) -> str:
        http, expect = self.http, self.expect
        first_id, second_id = str(uuid.uuid4()), str(uuid.uuid4())
        first = http.send("Retry check, first message.", message_id=first_id)
        context_id = expect.reply(first, "first message")["contextId"]
        second = http.send(
            "Retry check, second message.", message_id=second_id, context_id=context_id
        )
        second_reply = expect.reply(second, "second message", context_id=context_id)
        self.retry_context = (context_id, second_reply["messageId"])
        for label, message_id, original, text in (
            ("the second message again", second_id, second, "Retry check, second message."),
            ("the second message once more", second_id, second, "Retry check, second message."),
            (
                "the first message, with its contextId",
                first_id,
                first,
                "Retry check, first message.",
            ),
        ):
            again = http.send(text, message_id=message_id, context_id=context_id)
            if again.status != 200 or again.body != original.body:
                stored, other = reply_id(original), reply_id(again)
                if again.status == 200 and stored and other and stored != other:
                    raise Mismatch(
                        f"the stored reply, byte for byte ({label}): messageId {stored}",
                        f"another reply, messageId {other}: the agent ran again",
                    )
                raise Mismatch(
                    f"the stored reply, byte for byte ({label}): {describe(original)}",
                    describe(again),
                )
            expect.a2a_json(again, label)
        return "3 retries answered with the stored replies"

    def _agent_message_id(self) -> None:
        http, expect = self.http, self.expect
        context = self.retry_context
        if context is None:
            first = expect.reply(http.send("Open a conversation."), "first message")
            context = (first["contextId"], first["messageId"])
        context_id, agent_id = context
        response = http.send("Colliding id.", message_id=agent_id, context_id=context_id)
        expect.error(response, "INVALID_PARAMS", "messageId of the agent's reply")


__all__ = [
    "MessageChecks",
]
