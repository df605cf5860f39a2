"""Every public blocking call and its asyncio twin take the same parameters.

The twins share one flow (`pactmw.client.flow`), so what a caller can pass must not drift
between them: same names, same kinds, same defaults. The only differences allowed are the
ones asyncio needs: `time.sleep` is `asyncio.sleep` in the twin (an annotation may say
`AsyncTransport` for `Transport`; annotations are not compared).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: The public modules whose `__all__` holds blocking/asyncio pairs (`X`/`aX`, `X`/`AsyncX`)
#: or classes with `m`/`am` methods.
MODULES = ("pactmw", "pactmw.client", "pactmw.protocols.parafe", "pactmw.provider")


def _twins() -> Iterator[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        exported = set(module.__all__)
        for name in sorted(exported):
            obj = getattr(module, name)
            for twin in (f"a{name}", f"Async{name}"):
                if twin in exported:
                    yield f"{module_name}.{name}", obj, getattr(module, twin)
                    if inspect.isclass(obj):
                        yield from _method_twins(
                            f"{module_name}.{name}", obj, getattr(module, twin)
                        )
            if inspect.isclass(obj):
                for method in _public_methods(obj):
                    if f"a{method}" in dir(obj):
                        yield (
                            f"{module_name}.{name}.{method}",
                            getattr(obj, method),
                            getattr(obj, f"a{method}"),
                        )


def _public_methods(cls: type) -> list[str]:
    return [name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))]


def _method_twins(
    where: str, blocking: type, asynchronous: type
) -> Iterator[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    assert _public_methods(blocking) == _public_methods(asynchronous), where
    for method in _public_methods(blocking):
        yield f"{where}.{method}", getattr(blocking, method), getattr(asynchronous, method)


def _shape(call: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [
        (parameter.name, parameter.kind, parameter.default)
        for parameter in inspect.signature(call).parameters.values()
    ]


TWINS = list(_twins())


def test_the_twins_are_found() -> None:
    found = {where for where, _, _ in TWINS}
    assert {
        "pactmw.client.A2AClient",
        "pactmw.client.A2AClient.send",
        "pactmw.client.A2AClient.connect",
        "pactmw.client.DeviceCodeClient",
        "pactmw.client.ParafeBrokerClient",
        "pactmw.client.fetch_card",
        "pactmw.client.verify_receipt",
        "pactmw.protocols.parafe.verify_presentation_proof",
        "pactmw.IdentityVerifier.verify",
        "pactmw.provider.Provider.handle",
    } <= found


@pytest.mark.parametrize(("where", "blocking", "asynchronous"), TWINS, ids=[t[0] for t in TWINS])
def test_a_twin_takes_what_its_blocking_call_takes(
    where: str, blocking: Callable[..., Any], asynchronous: Callable[..., Any]
) -> None:
    expected = [
        (name, kind, asyncio.sleep if default is time.sleep else default)
        for name, kind, default in _shape(blocking)
    ]
    assert _shape(asynchronous) == expected, where
