"""No public name means two things: a name exported by two public modules (or by `pactmw`)
is the same object, or an equal constant, in both.

The adapters are exempt among themselves: each offers its framework's spelling of the same
idioms (`personal_agent_required`, `current_parafe`, ...), and a program imports one of
them. Every other exception is listed, with its reason.
"""

from __future__ import annotations

import types
from collections import defaultdict
from typing import Any

import pactmw
from tests.support.modules import importable_modules

#: name -> the public modules that may each mean their own thing by it.
KNOWN: dict[str, frozenset[str]] = {
    # Each SQL backend's own schema migrations.
    "MIGRATIONS": frozenset({"pactmw.store.postgres", "pactmw.store.sqlite"}),
    # A flow of each layer, a generator over that layer's own effects: the client's HTTP
    # requests and sleeps, the Provider's needs (identity, body, store, bot, ...).
    "Flow": frozenset({"pactmw.client.flow", "pactmw.provider.flow"}),
    # Poppy's form reader (single values, Poppy's errors) and the delegated authorization
    # server's (RFC 6749 errors); left for the Provider's rooms to rename.
    "parse_form": frozenset({"pactmw.protocols.poppy", "pactmw.provider.delegated"}),
}


def _public_modules() -> list[types.ModuleType]:
    # The Django adapter is left out: its names are Django's (models, views), checked by its
    # own tests.
    return [pactmw, *importable_modules(public_only=True)]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # a value that cannot compare is not the same
        return False


def test_no_public_name_means_two_things() -> None:
    meanings: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for module in _public_modules():
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue
            meanings[name].append((module.__name__, value))
    colliding = {}
    for name, uses in meanings.items():
        distinct: list[tuple[str, Any]] = []
        for where, value in uses:
            if not any(_same(value, seen) for _, seen in distinct):
                distinct.append((where, value))
        if len(distinct) < 2:
            continue
        modules = {where for where, _ in uses}
        if all(where.startswith("pactmw.adapters.") for where in modules):
            continue
        if modules <= KNOWN.get(name, frozenset()):
            continue
        colliding[name] = sorted(modules)
    assert colliding == {}
