"""pactmw's modules, imported: what the export and public-name tests read."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pactmw

__all__ = ["importable_modules"]


def importable_modules(*, public_only: bool = False) -> list[types.ModuleType]:
    """Every module below `pactmw` (not `pactmw` itself), or with `public_only` those whose
    dotted name has no part starting with `_` (a private package's modules included).

    Walked by hand: pkgutil.walk_packages imports every package it recurses into. The
    Django adapter is left out: its modules need configured settings to be imported, and
    its tests check them."""
    found: list[types.ModuleType] = []

    def walk(path: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(path, prefix):
            if info.name == "pactmw.adapters.django":
                continue
            if public_only and any(part.startswith("_") for part in info.name.split(".")):
                continue
            module = importlib.import_module(info.name)
            found.append(module)
            if info.ispkg:
                walk(list(module.__path__), info.name + ".")

    walk(list(pactmw.__path__), "pactmw.")
    return found
