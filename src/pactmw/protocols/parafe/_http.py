"""The bounded HTTP exchange with the broker: `pactmw.core.fetch.http_request`.

The broker's DID documents say "revoked" with 410 and online verification is a POST, so this
package needs any status and POST; `core.fetch` provides both under the same guarantees as
every other outbound fetch (policy-checked addresses, no redirects, one deadline, a cap).
"""

from __future__ import annotations

from pactmw.core.fetch import FetchResponse as HttpAnswer
from pactmw.core.fetch import http_request

__all__ = ["HttpAnswer", "http_request"]
