"""Operators' view of personal agents and of retention: list the agents (configured and added
at runtime, and the Poppy agents holding grants or Sessions), add, block, allow and remove
them, and clean the store up, for `pactmw agents` / `pactmw cleanup`, `manage.py pactmw ...`,
`flask pactmw ...` and the Django admin alike (one wording, one rule).

Every function works on a Provider's store, so what it changes is seen by every process on
that store at its next request. Adding checks the issuer and the `jwks_uri` first, with the
rules configured agents follow (`pactmw.config.check_agent_issuer`, `.check_jwks_uri`); an
`Outcome` with an error writes nothing.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

from attrs import frozen

from pactmw.config import ConfigError, check_agent_issuer, check_jwks_uri
from pactmw.core.encoding import bidi_control_in, is_storable_text
from pactmw.provider.app import Provider
from pactmw.provider.grant_admin import JSON_TIME, TABLE_TIME, aligned_table, format_time
from pactmw.provider.poppy._brands import agent_refusal
from pactmw.provider.poppy._conversations import poppy_owner
from pactmw.store.base import AgentExists, Cleanup, Grant

logger = logging.getLogger("pactmw.agents")

#: The exit status of the operators' commands (`pactmw`, `manage.py pactmw`, `flask pactmw`)
#: when they cannot do their work: bad usage, a bad configuration, or a store that cannot be
#: opened, reached or used (argparse's status for usage errors). 1 is "ran, and there was
#: nothing to do"; 0 done.
CANNOT_RUN = 2
#: Seconds in one of `retention_days`.
DAY = 86_400.0
#: The longest issuer, JWKS URL and name `add_agent` accepts.
MAX_URL_LENGTH = 2048
MAX_NAME_LENGTH = 200

_HEADER = ("ISSUER", "NAME", "SOURCE", "STATUS", "JWKS", "ADDED")
# Whitespace and control characters: never part of an issuer or URL an operator meant.
_INVISIBLE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")

Source = Literal["config", "runtime", "poppy"]


@frozen
class Outcome:
    """What an operator action did: the lines to print, or why nothing was done.

    `status` is the exit status of the commands: 0 done (or already so), 1 nothing to do
    (an unknown agent, an issuer already known), `CANNOT_RUN` refused input (nothing
    written). `field` names the one input a refusal concerns (`issuer`, `jwks_uri`, `name`),
    so a form can show it beside that field; None when it concerns no one input.
    """

    lines: tuple[str, ...] = ()
    error: str | None = None
    status: int = 0
    field: str | None = None


def _refused(error: str, status: int, field: str | None = None) -> Outcome:
    return Outcome(error=error, status=status, field=field)


@frozen
class AgentEntry:
    """One personal agent as operators see it.

    `source` is `config` (the settings' `agents`), `runtime` (added with `add_agent`) or
    `poppy`: a Poppy agent holding a live grant or a live Session at the Brand `brand_id`,
    its `issuer` being its `client_id` and `added_at` its oldest live grant's creation (None
    when it holds only Sessions). `enabled` is what the
    next request gets, overrides included (for a Poppy agent: whether the Brand's
    `poppy.agents` admits it and it is not blocked). `jwks_uri` is None for a configured
    inline JWKS and a Poppy agent (its keys are in its client metadata). `shadowed`: a
    runtime record of an issuer that is also configured, so the configured agent is the one
    used.
    """

    issuer: str
    name: str
    source: Source
    enabled: bool
    jwks_uri: str | None
    added_at: float | None = None
    shadowed: bool = False
    brand_id: str | None = None

    @property
    def status(self) -> str:
        """`allowed`, `blocked`, or `ignored` (shadowed by a configured agent)."""
        if self.shadowed:
            return "ignored"
        return "allowed" if self.enabled else "blocked"


def list_agents(provider: Provider, *, now: float | None = None) -> tuple[AgentEntry, ...]:
    """Every configured and runtime agent, ordered by issuer (a configured one first), then
    the Poppy agents holding a grant or a Session live at `now` (default: the current time),
    by `client_id` and Brand."""
    registry = provider.verifier.registry
    configured = {agent.issuer: agent for agent in registry}
    entries = [
        AgentEntry(
            issuer=agent.issuer,
            name=agent.name,
            source="config",
            enabled=_enabled(provider, agent.issuer),
            jwks_uri=agent.jwks_uri,
        )
        for agent in configured.values()
    ]
    for added in provider.store.list_agents():
        shadowed = added.issuer in configured
        entries.append(
            AgentEntry(
                issuer=added.issuer,
                name=added.name,
                source="runtime",
                enabled=not shadowed and _enabled(provider, added.issuer),
                jwks_uri=added.jwks_uri,
                added_at=added.added_at,
                shadowed=shadowed,
            )
        )
    entries.sort(key=lambda entry: (entry.issuer, entry.source))
    return (*entries, *_poppy_agents(provider, time.time() if now is None else now))


def _poppy_agents(provider: Provider, now: float) -> tuple[AgentEntry, ...]:
    """The Poppy agents the store knows: one per `client_id` and Brand holding a live grant
    or a live Session (signed in or out: an admitted agent may talk to the company with no
    one signed in, holding no grant) at a Brand that serves Poppy. A grant does not record
    which protocol asked for it (one grant whichever did), so a grant of a PACT agent the
    Provider knows is PACT's; in open mode an unregistered PACT issuer's grant there would
    be listed as Poppy's. Only Poppy starts Sessions, so each is Poppy's."""
    serving = {
        brand.id: brand.poppy for brand in provider.brands.values() if brand.poppy is not None
    }
    if not serving:
        return ()  # no store read on a Provider without Poppy (the Django admin's lists)
    oldest: dict[tuple[str, str], float] = {}
    pact: dict[str, bool] = {}  # one registry and store read per client, not per grant
    for brand_id in serving:
        grants: list[Grant] = provider.store.list_grants(brand_id=brand_id, now=now)
        for grant in grants:
            if grant.client_id not in pact:
                pact[grant.client_id] = _is_registered(provider, grant.client_id)
            if not pact[grant.client_id]:
                key = (grant.client_id, brand_id)
                oldest[key] = min(oldest.get(key, grant.created_at), grant.created_at)
    listed: dict[tuple[str, str], float | None] = {**oldest}  # None: Sessions only
    for brand_id, client_id in provider.store.session_clients(now=now):
        if brand_id in serving:  # not a Brand no longer configured, or without Poppy now
            listed.setdefault((client_id, brand_id), None)
    entries = []
    switches = provider.verifier.registry.overrides  # what Poppy reads too
    for (client_id, brand_id), since in sorted(listed.items()):
        poppy = serving[brand_id]
        refusal = agent_refusal(poppy, client_id, switches.agent_enabled(client_id))
        entries.append(
            AgentEntry(
                issuer=client_id,
                name="",
                source="poppy",
                enabled=refusal is None,
                jwks_uri=None,
                added_at=since,
                brand_id=brand_id,
            )
        )
    return tuple(entries)


def poppy_agent_ids(provider: Provider, *, now: float | None = None) -> tuple[str, ...]:
    """The `client_id` of every Poppy agent `list_agents` lists at `now` (default: the current
    time), once each and sorted: what the grants of those agents hold as their agent."""
    entries = _poppy_agents(provider, time.time() if now is None else now)
    return tuple(sorted({entry.issuer for entry in entries}))


def _poppy_brands(provider: Provider, client_id: str) -> tuple[str, ...]:
    """The Brands where `client_id` is a Poppy agent: named in their `poppy.agents`, or
    holding a live grant or Session there (`_poppy_agents`; not in open mode, where such a
    grant may be an unregistered PACT issuer's)."""
    named = {
        brand.id
        for brand in provider.brands.values()
        if brand.poppy is not None
        and brand.poppy.agents != "any"
        and client_id in brand.poppy.agents
    }
    if not provider.verifier.open_mode and not _is_registered(provider, client_id):
        named.update(
            entry.brand_id or ""
            for entry in _poppy_agents(provider, time.time())
            if entry.issuer == client_id
        )
    return tuple(sorted(named))


def _enabled(provider: Provider, issuer: str) -> bool:
    # What verification will find: the registry's own lookup, overrides applied.
    agent = provider.verifier.registry.lookup(issuer)
    return agent is not None and agent.enabled


def agent_json(entry: AgentEntry) -> dict[str, Any]:
    """One agent as JSON (times in ISO 8601 UTC)."""
    return {
        "issuer": entry.issuer,
        "name": entry.name,
        "source": entry.source,
        "brand_id": entry.brand_id,
        "status": entry.status,
        "enabled": entry.enabled,
        "jwks_uri": entry.jwks_uri,
        "added_at": format_time(entry.added_at, JSON_TIME),
    }


def agents_table(entries: Sequence[AgentEntry], *, poppy: bool = False) -> str:
    """The listing as an aligned table, or a sentence when there is nothing to list (which,
    on a Provider with Poppy Brands, `poppy`, says how Poppy agents get there)."""
    if not entries and poppy:
        return (
            "no agents (no PACT agent is configured or added: agents add ISSUER JWKS_URI; "
            "no Poppy agent holds a live grant or Session: a Poppy agent is listed once it "
            "starts a Session)"
        )
    if not entries:
        return "no agents (configure some under agents, or add one: agents add ISSUER JWKS_URI)"
    rows = [_HEADER] + [
        (
            entry.issuer,
            entry.name or "-",
            f"poppy at {entry.brand_id}" if entry.source == "poppy" else entry.source,
            entry.status,
            entry.jwks_uri or ("(client metadata)" if entry.source == "poppy" else "(inline)"),
            format_time(entry.added_at, TABLE_TIME) or "-",
        )
        for entry in entries
    ]
    return aligned_table(rows)


def agents_listing(entries: Sequence[AgentEntry], *, as_json: bool, poppy: bool = False) -> str:
    """What `agents list` prints: the agents as JSON (`--json`) or as the table (`poppy`:
    see `agents_table`)."""
    if as_json:
        return json.dumps([agent_json(entry) for entry in entries], indent=2)
    return agents_table(entries, poppy=poppy)


def agents_report(provider: Provider, *, as_json: bool, now: float | None = None) -> str:
    """What `agents list` prints for `provider` (`list_agents` at `now`, `agents_listing`)."""
    poppy = any(brand.poppy is not None for brand in provider.brands.values())
    return agents_listing(list_agents(provider, now=now), as_json=as_json, poppy=poppy)


# -- changes -------------------------------------------------------------------------------


def _url_problem(value: str, what: str) -> str | None:
    if not value:
        return f"{what} is empty"
    if len(value) > MAX_URL_LENGTH:
        return f"{what} is longer than {MAX_URL_LENGTH} characters"
    if _INVISIBLE.search(value):
        return f"{what} holds spaces or control characters: {value!r}"
    if not is_storable_text(value):
        return f"{what} holds characters a store cannot keep: {value!r}"
    return None


def check_issuer(issuer: str) -> str | None:
    """Why `issuer` cannot be added (None when it can): what a store can keep, then the rule
    configured agents follow (`pactmw.config.check_agent_issuer`: an absolute http(s) URL,
    exactly as the agent's tokens have it in `iss`)."""
    problem = _url_problem(issuer, "issuer")
    if problem is not None:
        return problem
    try:
        check_agent_issuer(issuer, "issuer")
    except ConfigError as exc:
        return str(exc)
    return None


def _check_jwks_uri(provider: Provider, jwks_uri: str) -> str | None:
    problem = _url_problem(jwks_uri, "jwks_uri")
    if problem is not None:
        return problem
    policy = provider.verifier.keys.fetch_policy
    try:
        check_jwks_uri(jwks_uri, policy.allow_http_on_loopback, "jwks_uri")
    except ConfigError as exc:
        return f"{exc}: {jwks_uri!r}"
    return None


def _check_name(name: str) -> str | None:
    if len(name) > MAX_NAME_LENGTH:
        return f"name is longer than {MAX_NAME_LENGTH} characters"
    if name != name.strip() or re.search(r"[\x00-\x1f\x7f-\x9f]", name):
        return "name must not start or end with spaces nor hold control characters"
    control = bidi_control_in(name)
    if control is not None:
        return f"name must not hold bidirectional controls ({control})"
    if not is_storable_text(name):
        return "name holds characters a store cannot keep"
    return None


def add_refusal(
    provider: Provider, *, issuer: str, jwks_uri: str, name: str = ""
) -> Outcome | None:
    """Why `add_agent` would refuse these values (an `Outcome` with the error and the exit
    status), or None; writes nothing, so a form can validate with it and save later."""
    for field, problem in (
        ("issuer", check_issuer(issuer)),
        ("jwks_uri", _check_jwks_uri(provider, jwks_uri)),
        ("name", _check_name(name)),
    ):
        if problem is not None:
            return _refused(f"nothing added: {problem}", CANNOT_RUN, field)
    if any(agent.issuer == issuer for agent in provider.verifier.registry):
        return _refused(
            f"nothing added: {issuer} is configured (agents in the settings)", 1, "issuer"
        )
    if provider.store.get_agent(issuer) is not None:
        return _already_added(provider, issuer)
    return None


def _already_added(provider: Provider, issuer: str) -> Outcome:
    stored = provider.store.get_agent(issuer)
    when = "" if stored is None else f" on {format_time(stored.added_at, TABLE_TIME)}"
    return _refused(f"nothing added: {issuer} was already added{when}", 1, "issuer")


def add_agent(
    provider: Provider, *, issuer: str, jwks_uri: str, name: str = "", now: float
) -> Outcome:
    """Add a personal agent at runtime: verified like a configured one from the next request
    of every process on the store (keys from `jwks_uri`, the Provider-wide audience)."""
    refused = add_refusal(provider, issuer=issuer, jwks_uri=jwks_uri, name=name)
    if refused is not None:
        return refused
    try:
        provider.store.add_agent(issuer=issuer, name=name, jwks_uri=jwks_uri, now=now)
    except AgentExists:  # added by another process since the check
        return _already_added(provider, issuer)
    logger.info("agent added: issuer=%s jwks_uri=%s", issuer, jwks_uri)
    lines = [f"added {issuer} (keys from {jwks_uri})"]
    if provider.store.agent_enabled(issuer) is False:
        lines.append(f"{issuer} is blocked (from before): allow it to let it call")
    return Outcome(tuple(lines))


def _is_registered(provider: Provider, issuer: str) -> bool:
    configured = any(agent.issuer == issuer for agent in provider.verifier.registry)
    return configured or provider.store.get_agent(issuer) is not None


def switch_refusal(provider: Provider, issuer: str, enabled: bool) -> Outcome | None:
    """Why `set_enabled` would refuse to switch `issuer` (an `Outcome` with the error and the
    exit status), or None; writes nothing. Refused: an issuer that is no agent the Provider
    could hear from (neither configured nor added, nor a Poppy agent, `_may_be_poppy`), on a
    Provider not in open mode; but a block still recorded for it can always be allowed."""
    if _is_registered(provider, issuer) or provider.verifier.open_mode:
        return None
    if _may_be_poppy(provider, issuer):
        return None
    if enabled and provider.verifier.registry.overrides.agent_enabled(issuer) is False:
        return None  # a block recorded for an agent removed since: `remove` says allow lifts it
    verb = "allowed" if enabled else "blocked"
    return _refused(
        f"nothing {verb}: no agent {issuer} is configured or added (agents list shows them)",
        1,
        "issuer",
    )


def _may_be_poppy(provider: Provider, issuer: str) -> bool:
    """Whether `issuer` may be a Poppy agent's `client_id`: one a Brand's `poppy.agents`
    names or that holds a grant or Session there (`_poppy_brands`), or any https URL when a
    Brand's `poppy.agents` is "any" (its agents need no grant to start Sessions, signed out,
    so an operator may block one before it starts any, which `agents list` does not show)."""
    admits_any = any(
        brand.poppy is not None and brand.poppy.agents == "any"
        for brand in provider.brands.values()
    )
    if admits_any and issuer.startswith("https://"):
        return True
    return bool(_poppy_brands(provider, issuer))


def set_enabled(provider: Provider, issuer: str, enabled: bool) -> Outcome:
    """Block (`enabled=False`) or allow a configured, runtime or Poppy agent, from the next
    request of every process on the store on, whichever protocol it speaks (PACT's verifier
    and every Poppy Brand read the same switch). Blocking again (or allowing again)
    changes nothing.

    An open-mode Provider (which accepts unregistered issuers through discovery) can block
    and allow any issuer; otherwise the agent must be configured, added or a Poppy agent
    (`switch_refusal`)."""
    verb = "allowed" if enabled else "blocked"
    refused = switch_refusal(provider, issuer, enabled)
    if refused is not None:
        return refused
    registry = provider.verifier.registry
    current = registry.lookup(issuer)
    # An issuer registered nowhere (an open-mode Provider's, a Poppy agent) is allowed
    # unless its switch blocks it (which a registry without runtime agents does not look up).
    was_enabled = (
        current.enabled if current is not None else registry.overrides.agent_enabled(issuer)
    ) is not False
    if was_enabled == enabled:
        return Outcome((f"{issuer} was already {verb}", *_unlisted(provider, issuer)))
    if enabled:
        registry.enable(issuer)
    else:
        registry.disable(issuer)
    logger.info("agent %s: issuer=%s", verb, issuer)
    return Outcome((f"{verb} {issuer}", *_unlisted(provider, issuer)))


def _unlisted(provider: Provider, issuer: str) -> tuple[str, ...]:
    """A line saying `issuer` is no agent `agents list` shows, when only a Poppy Brand that
    admits any agent let it be switched (`_may_be_poppy`): the switch is written, but a
    misspelt id would stop nobody, so the operator is told."""
    if provider.verifier.open_mode or _is_registered(provider, issuer):
        return ()
    if _poppy_brands(provider, issuer) or not _may_be_poppy(provider, issuer):
        return ()  # a Poppy agent it lists, or the block lifted of an agent removed since
    return (
        f"{issuer} is no agent agents list shows: a Poppy agent without a live grant or "
        "Session, or a misspelt id",
    )


def remove_agent(provider: Provider, issuer: str) -> Outcome:
    """Forget an agent added at runtime: refused from its next request on. A block stays
    recorded for the issuer (so it is still blocked if added again); configured agents are
    removed from the settings instead."""
    if any(agent.issuer == issuer for agent in provider.verifier.registry):
        return _refused(
            f"nothing removed: {issuer} is configured, not added at runtime "
            "(remove it from the settings, or block it)",
            1,
        )
    if not provider.store.remove_agent(issuer):
        return _refused(f"nothing removed: no agent {issuer} was added at runtime", 1)
    logger.info("agent removed: issuer=%s", issuer)
    lines = [f"removed {issuer}"]
    if provider.store.agent_enabled(issuer) is False:
        lines.append(f"{issuer} stays blocked if it is added again (allow lifts that)")
    return Outcome(tuple(lines))


# -- retention -----------------------------------------------------------------------------


@frozen
class CleanupDone:
    """What `run_cleanup` deleted; `idle_before` is the conversation cutoff (None: kept)."""

    counts: Cleanup
    idle_before: float | None
    retention_days: float | None

    @property
    def lines(self) -> tuple[str, ...]:
        """The report, one line per kind."""
        counts = self.counts
        lines = [
            f"device authorizations deleted: {counts.device_authorizations} (expired)",
            f"refresh tokens deleted: {counts.refresh_tokens} "
            "(expired unused, or of a revoked or expired grant)",
            f"single-use values deleted: {counts.used_values} (expired)",
            f"authorization details deleted: {counts.authorization_details} (expired)",
            f"rate-limit counters deleted: {counts.rate_counters} (window ended)",
            f"Poppy Sessions deleted: {counts.poppy_sessions} (token expired over a day ago)",
            f"Poppy Account Tokens deleted: {counts.account_tokens} "
            "(expired unused, or of a revoked or expired grant)",
            f"Poppy Idempotency-Key answers deleted: {counts.idempotency_answers} (expired)",
        ]
        if self.idle_before is None or self.retention_days is None:
            lines.append("Poppy operations kept: retention_days is not set (keep forever)")
            lines.append("conversations kept: retention_days is not set (keep forever)")
        else:
            since = format_time(self.idle_before, TABLE_TIME)
            lines.append(
                f"Poppy operations deleted: {counts.operations} (final or expired, unchanged "
                f"since {since})"
            )
            lines.append(
                f"conversations deleted: {counts.conversations}, with {counts.messages} "
                f"messages (no activity since {since}; retention_days = "
                f"{self.retention_days:g})"
            )
        return tuple(lines)


def run_cleanup(provider: Provider, now: float) -> CleanupDone:
    """Delete from the Provider's store what can no longer be used at `now` (expired device
    codes, refresh tokens that can no longer be rotated, expired single-use values and
    authorization details, rate-limit counters of ended windows, expired Idempotency-Key
    answers), and the conversations idle for longer than `retention_days` with their
    messages and the Poppy operations final or expired as long (none when the setting is
    absent). See `pactmw.store.base.RetentionStore.cleanup`."""
    days = provider.retention_days
    idle_before = None if days is None else now - days * DAY
    counts = provider.store.cleanup(now=now, conversations_idle_before=idle_before)
    logger.info(
        "cleanup: %d device authorizations, %d refresh tokens, %d single-use values, "
        "%d authorization details, %d rate-limit counters, %d conversations (%d messages) "
        "deleted",
        counts.device_authorizations,
        counts.refresh_tokens,
        counts.used_values,
        counts.authorization_details,
        counts.rate_counters,
        counts.conversations,
        counts.messages,
    )
    return CleanupDone(counts, idle_before, days)


__all__ = [
    "CANNOT_RUN",
    "DAY",
    "MAX_NAME_LENGTH",
    "MAX_URL_LENGTH",
    "AgentEntry",
    "CleanupDone",
    "Outcome",
    "Source",
    "add_agent",
    "add_refusal",
    "agent_json",
    "agents_listing",
    "agents_report",
    "agents_table",
    "check_issuer",
    "list_agents",
    "poppy_agent_ids",
    "poppy_owner",
    "remove_agent",
    "run_cleanup",
    "set_enabled",
    "switch_refusal",
]
