"""Provider configuration: the identity keys of `Settings` plus Brands, store and limits.

The TOML of `pactmw serve`, Django's `PACTMW` and Flask's `app.config["PACTMW"]` all go
through `ProviderSettings.from_mapping`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from pactmw.config import ConfigError, Settings
from pactmw.provider.brand import Brand, Skill, TurnHandler
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, IDENTITY_SCHEMES
from pactmw.provider.ratelimit import RateLimit

DEFAULT_STORE = "sqlite:///.pactmw/pactmw.db"

PROVIDER_KEYS = frozenset(
    {
        "base_url",
        "identity_scheme",
        "store",
        "organization",
        "brands",
        "rate_limit",
        "max_body_bytes",
        "conversation_idle_timeout",
        "claim_lease_seconds",
    }
)
_BRAND_KEYS = frozenset({"name", "description", "handler", "skills", "version"})
_SKILL_KEYS = frozenset({"id", "name", "description", "tags", "examples"})
_RATE_KEYS = frozenset({"per_agent", "per_user", "window"})


def import_handler(path: str) -> TurnHandler:
    """Import `module:attribute` (for example `examples.bots:order_bot`)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"handler {path!r} must look like 'package.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"handler {path!r} cannot be imported: {exc}") from exc
    if not callable(target):
        raise ConfigError(f"handler {path!r} is not callable")
    handler: TurnHandler = target
    return handler


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _skill(data: Any, where: str) -> Skill:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(data) - _SKILL_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {where}.{unknown[0]}")
    for key in ("id", "name", "description"):
        if not isinstance(data.get(key), str):
            raise ConfigError(f"{where}.{key} must be a string")
    return Skill(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        tags=_strings(data.get("tags", []), f"{where}.tags"),
        examples=_strings(data.get("examples", []), f"{where}.examples"),
    )


def brand_from_mapping(
    brand_id: str, data: Any, *, handlers: Mapping[str, TurnHandler] | None = None
) -> Brand:
    """One `[brands.ID]` table. `handler` is an import path, or a key of `handlers`."""
    where = f"brands.{brand_id}"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(data) - _BRAND_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {where}.{unknown[0]}")
    handler_ref = data.get("handler")
    if callable(handler_ref):
        handler: TurnHandler = handler_ref
    elif isinstance(handler_ref, str) and handlers is not None and handler_ref in handlers:
        handler = handlers[handler_ref]
    elif isinstance(handler_ref, str):
        handler = import_handler(handler_ref)
    else:
        raise ConfigError(f"{where}.handler is required (an import path like 'pkg.mod:fn')")
    name = data.get("name", brand_id)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string")
    description = data.get("description", "")
    version = data.get("version", "0.1.0")
    if not isinstance(description, str) or not isinstance(version, str):
        raise ConfigError(f"{where}.description and .version must be strings")
    skills_data = data.get("skills", [])
    if not isinstance(skills_data, list):
        raise ConfigError(f"{where}.skills must be a list of tables")
    return Brand(
        id=brand_id,
        name=name,
        handler=handler,
        description=description,
        skills=tuple(_skill(s, f"{where}.skills[{i}]") for i, s in enumerate(skills_data)),
        version=version,
    )


def _positive(
    data: Mapping[str, Any],
    key: str,
    default: float | None,
    where: str = "",
    *,
    whole: bool = False,
) -> Any:
    """A positive number (a whole one when `whole`), or the default when the key is absent."""
    value = data.get(key, default)
    if value is None:
        return None
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        kind = "whole number" if whole else "number"
        raise ConfigError(f"{where}{key} must be a positive {kind}")
    return value


@frozen
class ProviderSettings:
    """Everything `Provider.from_settings` needs. See README "Configuration" for each key."""

    identity: Settings
    base_url: str
    brands: tuple[Brand, ...]
    identity_scheme: str = DEFAULT_IDENTITY_SCHEME
    store: str = DEFAULT_STORE
    organization: str = ""
    rate_limit: RateLimit = field(factory=RateLimit)
    max_body_bytes: int = 1024 * 1024
    conversation_idle_timeout: float | None = None
    claim_lease_seconds: float = 120.0

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        *,
        handlers: Mapping[str, TurnHandler] | None = None,
        extra_keys: frozenset[str] = frozenset(),
    ) -> ProviderSettings:
        """Build from a dict. `handlers` maps names usable as `brands.X.handler`."""
        identity = Settings.from_mapping(data, extra_keys=PROVIDER_KEYS | extra_keys)
        base_url = data.get("base_url")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url is required: the public http(s) URL of this Provider")
        scheme = data.get("identity_scheme", DEFAULT_IDENTITY_SCHEME)
        if scheme not in IDENTITY_SCHEMES:
            raise ConfigError(f"identity_scheme must be one of {sorted(IDENTITY_SCHEMES)}")
        store = data.get("store", DEFAULT_STORE)
        if not isinstance(store, str) or not store:
            raise ConfigError("store must be a URL: memory://, sqlite:///PATH or postgresql://...")
        organization = data.get("organization", "")
        if not isinstance(organization, str):
            raise ConfigError("organization must be a string")
        brands_data = data.get("brands", {})
        if not isinstance(brands_data, Mapping):
            raise ConfigError("brands must be a table of Brand tables")
        rate = data.get("rate_limit", {})
        if not isinstance(rate, Mapping):
            raise ConfigError("rate_limit must be a table with per_agent, per_user, window")
        unknown_rate = sorted(set(rate) - _RATE_KEYS)
        if unknown_rate:
            raise ConfigError(f"unknown configuration key rate_limit.{unknown_rate[0]}")
        max_body = _positive(data, "max_body_bytes", 1024 * 1024, whole=True)
        return cls(
            identity=identity,
            base_url=base_url.rstrip("/"),
            brands=tuple(
                brand_from_mapping(str(k), v, handlers=handlers) for k, v in brands_data.items()
            ),
            identity_scheme=scheme,
            store=store,
            organization=organization,
            rate_limit=RateLimit(
                per_agent=_positive(rate, "per_agent", None, "rate_limit.", whole=True),
                per_user=_positive(rate, "per_user", None, "rate_limit.", whole=True),
                window=float(_positive(rate, "window", 60.0, "rate_limit.")),
            ),
            max_body_bytes=int(max_body),
            conversation_idle_timeout=_positive(data, "conversation_idle_timeout", None),
            claim_lease_seconds=float(_positive(data, "claim_lease_seconds", 120.0)),
        )


def load_toml(path: str) -> dict[str, Any]:
    """Read a TOML configuration file (Python 3.11+ `tomllib`, or `tomli` on 3.10)."""
    if sys.version_info >= (3, 11):
        import tomllib as toml_reader
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as toml_reader
        except ModuleNotFoundError as exc:
            # Not a runtime dependency: only TOML files on 3.10 need it.
            raise ConfigError("reading TOML on Python 3.10 needs: pip install tomli") from exc
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = toml_reader.load(handle)
            return data
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except toml_reader.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
