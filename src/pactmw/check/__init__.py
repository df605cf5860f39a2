"""`pactmw check`: the PACT 1.0 conformance checks, run against any Provider over HTTP.

The checker plays a personal agent registered with the Provider (its issuer, its private key,
the audience the Provider assigned) and covers the ground of the public Identity suite
(`e2e/pact.test.ts`, run with `E2E_PROVIDER=any`): the Agent Card, replies and `contextId`,
idempotent retries, foreign contexts, ListTasks, the task and unsupported routes, header
tolerance, unmatched routes before authentication, every authentication refusal and the
malformed bodies. With `delegated=True` it then runs the Delegated profile (PACT §5) with a
person in the loop: it prints the Brand's login link, waits while the person approves, and
checks the token, a delegated reply's signed receipt and the refresh.

Everything goes through `pactmw.client`: its card, device-code and receipt functions for what
a well-behaved personal agent does, and its low-level transport (`SyncTransport`,
`HttpRequest`) for the deliberately malformed requests (bad JSON, wrong methods, raw parts,
HS256 and expired tokens...) that no well-behaved client would send.

Each check has a stable name, passes or fails on its own and says on failure what was
expected and what came back, so `Checker.run` always runs every check it can.

The checks run in groups (`_card`, `_messages`, `_contexts`, `_tasks`, `_headers`, `_routes`,
`_auth`, `_malformed`, then `_delegated` and `_grant`), each over the `_context.Context` the
run shares; `_http` sends, `_expect` judges what came back.
"""

from pactmw.check import names
from pactmw.check._checker import DEFAULT_ASK, Checker
from pactmw.check._progress import Progress
from pactmw.check._result import CheckResult, results_json, summary_line
from pactmw.check._target import card_url_from, identity_scheme_name
from pactmw.check._wire import CARD_PATH

__all__ = [
    "CARD_PATH",
    "DEFAULT_ASK",
    "CheckResult",
    "Checker",
    "Progress",
    "card_url_from",
    "identity_scheme_name",
    "names",
    "results_json",
    "summary_line",
]
