"""The helpers every test folder shares: clocks, ports, real servers, keys, PostgreSQL.

- `clock`: `FakeClock` (moves only when a test says so) and `OffsetClock` (wall time plus an
  offset, or frozen).
- `net`: `free_port`, `closed_port_url`, `wait_for_port`, `loopback_client`, and
  `unread_body_post` (`aunread_body_post` for asyncio) for a body a server may answer before
  reading.
- `servers`: uvicorn and Werkzeug in threads, any command in a process, `pactmw serve`, the
  Django test site, and waiting until a URL answers 200.
- `agent`: PACT identity JWTs and A2A user messages, as a personal agent sends them.
- `parties`: the test personal agent's `ISSUER` and `AGENT_NAME`, a Provider's `AUDIENCE`.
- `a2a`: the A2A error envelope, and the `PENDING` message.
- `waits`: `outcome_within`.
- `toml`: `toml_value`, for the configuration files tests write.
- `keys`: throwaway `cryptography` keys, their PEMs, self-signed certificates.
- `jwks_server`: `JwksServer`, a key server with switchable failure modes.
- `pg`: a throwaway PostgreSQL server (and stopping and restarting it).

Fixtures stay in each folder's conftest.py; their helper code comes from here.
"""
