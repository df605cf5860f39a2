"""Who the tests' parties are, by the values many modules gave them alike: the test personal
agent (its issuer and display name) and a Provider at https://provider.example (its A2A
audience). A module that needs another value for the same role defines its own."""

from __future__ import annotations

__all__ = ["AGENT_NAME", "AUDIENCE", "ISSUER"]

#: The test personal agent's issuer (its `iss`, and its `client_id` at a Provider).
ISSUER = "https://pa.example"
#: The test personal agent's display name, as its registration gives it.
AGENT_NAME = "Demo PA"
#: The A2A audience of a Provider served at https://provider.example.
AUDIENCE = "https://provider.example/a2a"
