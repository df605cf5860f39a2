"""Readers of single setting values, shared by the Provider's and the Brands' settings: each
checks one value and raises `ConfigError` naming the key it came from."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pactmw.config import ConfigError, refuse_unknown
from pactmw.core.errors import MalformedInput
from pactmw.core.jwk import PrivateJWK, import_private_jwk
from pactmw.provider.brand import TurnHandler


def table(data: Any, allowed: frozenset[str], where: str) -> Mapping[str, Any]:
    """`data` as the settings table `where`: `ConfigError` unless it is a table whose keys
    are all in `allowed`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    refuse_unknown(data, allowed, f"{where}.")
    return data


@contextmanager
def errors_named(prefix: str) -> Iterator[None]:
    """A config object's `ValueError` (raised by its own checks) as a `ConfigError` whose
    message starts with `prefix`, the table it was read from."""
    try:
        yield
    except ValueError as exc:
        raise ConfigError(f"{prefix}{exc}") from exc


def import_object(path: str, what: str = "handler") -> Any:
    """Import `module:attribute` (for example `examples.bots:order_bot`)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} {path!r} must look like 'package.module:name'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{what} {path!r} cannot be imported: {exc}") from exc
    return target


def function_setting(
    reference: Any, where: str, named: Mapping[str, Callable[..., Any]] | None = None
) -> Any:
    """The function a setting names: the function itself (a Python settings dict: Django's
    `PACTMW`, Flask's `app.config["PACTMW"]`), a key of `named`, or an import path
    `package.module:function` (any settings, TOML's only way). The one reader of
    `brands.X.handler` and `audit`; `ConfigError` naming `where`, the key."""
    if callable(reference):
        return reference
    if not isinstance(reference, str):
        raise ConfigError(f"{where} must be a function or an import path like 'pkg.mod:fn'")
    if named is not None and reference in named:
        return named[reference]
    target = import_object(reference, where)
    if not callable(target):
        raise ConfigError(f"{where} {reference!r} is not callable")
    return target


def import_handler(path: str) -> TurnHandler:
    """Import a turn handler from `module:function`."""
    handler: TurnHandler = function_setting(path, "handler")
    return handler


def strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def positive(
    data: Mapping[str, Any],
    key: str,
    default: float | None,
    where: str = "",
    *,
    whole: bool = False,
) -> Any:
    """A positive finite number (a whole one when `whole`), or the default when the key is
    absent. TOML and Python floats have `inf` and `nan`; `nan <= 0` is false, so finiteness
    is checked apart."""
    value = data.get(key, default)
    if value is None:
        return None
    kinds = (int,) if whole else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not math.isfinite(value)
        or value <= 0
    ):
        kind = "whole number" if whole else "number"
        raise ConfigError(f"{where}{key} must be a positive {kind}")
    return value


def non_empty_string(data: Mapping[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string")
    return value


def read_private_key(path: Any, where: str) -> PrivateJWK:
    if isinstance(path, PrivateJWK):
        return path
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where} must be the path of a private JWK file")
    try:
        with open(path, "rb") as handle:
            return import_private_jwk(handle.read())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror}") from exc
    except MalformedInput as exc:
        raise ConfigError(f"{where}: {path} is not a private JWK: {exc}") from exc


def read_secret(path: Any, where: str) -> str:
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where} must be the path of a file")
    try:
        with open(path, encoding="utf-8") as handle:
            secret = handle.read().strip()
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path}") from exc
    if not secret:
        raise ConfigError(f"{where}: {path} is empty")
    return secret


def imported(reference: Any, kind: type, where: str) -> Any:
    """An object given directly (from Python) or as an import path (from TOML)."""
    if isinstance(reference, str):
        reference = import_object(reference, where)
    if isinstance(reference, type) and issubclass(reference, kind):
        reference = reference()
    if not isinstance(reference, kind):
        raise ConfigError(f"{where} must be a {kind.__name__} (or an import path to one)")
    return reference


__all__ = [
    "errors_named",
    "function_setting",
    "import_handler",
    "import_object",
    "imported",
    "non_empty_string",
    "positive",
    "read_private_key",
    "read_secret",
    "strings",
    "table",
]
