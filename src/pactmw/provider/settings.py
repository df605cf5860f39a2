"""Provider configuration: the identity keys of `Settings` plus Brands, store and limits.

The TOML of `pactmw serve`, Django's `PACTMW` and Flask's `app.config["PACTMW"]` all go
through `ProviderSettings.from_mapping`.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from pactmw.config import ConfigError, Settings, optional_jwks
from pactmw.core.errors import MalformedInput
from pactmw.core.jwk import PrivateJWK, import_private_jwk
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.parafe import BrokerRetry
from pactmw.protocols.poppy import ApiDescriptor
from pactmw.provider.authorization_details import AuthorizationDetailType
from pactmw.provider.brand import Brand, DelegationConfig, Skill, TurnHandler
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, IDENTITY_SCHEMES
from pactmw.provider.consent_pages import ConsentPages
from pactmw.provider.parafe import ParafeConfig
from pactmw.provider.poppy import PoppyConfig, poppy_companies
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.tools import ToolRegistry

DEFAULT_STORE = "sqlite:///.pactmw/pactmw.db"

PROVIDER_KEYS = frozenset(
    {
        "base_url",
        "identity_scheme",
        "store",
        "organization",
        "brands",
        "rate_limit",
        "consent_rate_limit",
        "device_rate_limit",
        "token_rate_limit",
        "shared_rate_limits",
        "max_body_bytes",
        "conversation_idle_timeout",
        "claim_lease_seconds",
        "turn_timeout",
        "retention_days",
        "signing_keys",
        "data_dir",
        "delegation_brand",  # read by the identity middleware of the Django/Flask adapters
        "parafe_brand",  # read by @parafe_action of the Django/Flask adapters
        "admin_show_message_text",  # read by the Django admin (conversations)
        "templates",  # folders (or a Jinja2 loader) searched first for the person's pages
    }
)
_BRAND_KEYS = frozenset(
    {
        "name",
        "description",
        "handler",
        "skills",
        "version",
        "delegation",
        "parafe",
        "tools",
        "poppy",
    }
)
_POPPY_KEYS = frozenset({"domain", "domains", "agents", "session_seconds", "apis", "custom_scopes"})
_POPPY_API_KEYS = frozenset({"type", "url", "description"})
_PARAFE_KEYS = frozenset(
    {
        "agent_id",
        "broker_url",
        "allow_http_broker_on_loopback",
        "signing_key",
        "agent_did",
        "required",
        "minimum_identity_assurance",
        "scope_requirements",
        "online",
        "require_proof",
        "refusal",
        "file_receipts",
        "credential_file",
        "handshake",
        "description",
        "broker_timeout",
        "broker_retries",
        "ap2",
    }
)
_DELEGATION_KEYS = frozenset(
    {
        "scopes",
        "login",
        "login_url",
        "brand_issuer",
        "brand_jwks_uri",
        "brand_jwks",
        "interval",
        "grant_days",
        "skip_consent_if_granted",
        "tools",
        "pages",
        "templates",
        "authorization_details",
        "refresh_reuse_interval",
    }
)
_SKILL_KEYS = frozenset({"id", "name", "description", "tags", "examples"})
_RATE_KEYS = frozenset({"per_agent", "per_user", "window"})


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


def import_handler(path: str) -> TurnHandler:
    """Import a turn handler from `module:function`."""
    target = import_object(path)
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
    brand_id: str,
    data: Any,
    *,
    handlers: Mapping[str, TurnHandler] | None = None,
    templates: Any = None,
) -> Brand:
    """One `[brands.ID]` table. `handler` is an import path, or a key of `handlers`;
    `templates` is the top-level `templates` setting (the delegation table's own wins)."""
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
    delegation = (
        _delegation(data["delegation"], f"{where}.delegation", templates)
        if "delegation" in data
        else None
    )
    parafe = parafe_from_mapping(data["parafe"], f"{where}.parafe") if "parafe" in data else None
    extra: dict[str, Any] = {}
    if "poppy" in data:
        extra["poppy"] = poppy_from_mapping(data["poppy"], f"{where}.poppy")
    if "tools" in data:
        extra["tools"] = _imported(data["tools"], ToolRegistry, f"{where}.tools")
    try:
        return Brand(
            id=brand_id,
            name=name,
            handler=handler,
            description=description,
            skills=tuple(_skill(s, f"{where}.skills[{i}]") for i, s in enumerate(skills_data)),
            version=version,
            delegation=delegation,
            parafe=parafe,
            **extra,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def poppy_from_mapping(data: Any, where: str = "poppy") -> PoppyConfig:
    """One `[brands.ID.poppy]` table (docs/configuration.md); errors name the key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(data) - _POPPY_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {where}.{unknown[0]}")
    domain = data.get("domain")
    if not isinstance(domain, str) or not domain:
        raise ConfigError(f"{where}.domain is required: the host that serves its poppy.json")
    if "agents" not in data:
        raise ConfigError(
            f'{where}.agents is required: "any", or the list of admitted client_id URLs'
        )
    agents = data["agents"]
    if agents != "any" and (
        not isinstance(agents, list) or not all(isinstance(a, str) for a in agents)
    ):
        raise ConfigError(f'{where}.agents must be "any" or a list of client_id URLs')
    apis_data = data.get("apis", [])
    if not isinstance(apis_data, list):
        raise ConfigError(f"{where}.apis must be a list of tables")
    apis = []
    for i, api in enumerate(apis_data):
        at = f"{where}.apis[{i}]"
        if not isinstance(api, Mapping):
            raise ConfigError(f"{at} must be a table")
        unknown_api = sorted(set(api) - _POPPY_API_KEYS)
        if unknown_api:
            raise ConfigError(f"unknown configuration key {at}.{unknown_api[0]}")
        if not all(isinstance(api.get(k), str) for k in _POPPY_API_KEYS):
            raise ConfigError(f"{at} needs type, url and description strings")
        try:
            apis.append(ApiDescriptor(api["type"], api["url"], api["description"]))
        except ValueError as exc:
            raise ConfigError(f"{at}: {exc}".replace("ApiDescriptor.", "")) from exc
    custom = data.get("custom_scopes", {})
    if not isinstance(custom, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in custom.items()
    ):
        raise ConfigError(f"{where}.custom_scopes must be a table of scope = description")
    try:
        return PoppyConfig(
            domain=domain,
            agents=agents,
            domains=_strings(data.get("domains", [domain]), f"{where}.domains"),
            session_seconds=_positive(data, "session_seconds", 3600.0, f"{where}."),
            apis=tuple(apis),
            custom_scopes=custom,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}.{exc}") from exc


def _read_private_key(path: Any, where: str) -> PrivateJWK:
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


def _read_secret(path: Any, where: str) -> str:
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


def parafe_from_mapping(data: Any, where: str = "parafe") -> ParafeConfig:
    """A `[brands.ID.parafe]` table (see docs/parafe.md)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(data) - _PARAFE_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {where}.{unknown[0]}")
    agent_id = data.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        raise ConfigError(f"{where}.agent_id is required (the agent's Parafé id)")
    for key in (
        "allow_http_broker_on_loopback",
        "required",
        "require_proof",
        "file_receipts",
        "ap2",
    ):
        if key in data and not isinstance(data[key], bool):
            raise ConfigError(f"{where}.{key} must be true or false")
    scopes = data.get("scope_requirements", {})
    if not isinstance(scopes, Mapping) or not all(isinstance(v, Mapping) for v in scopes.values()):
        raise ConfigError(f"{where}.scope_requirements must be a table of scope tables")
    online = data.get("online", False)
    if isinstance(online, bool):
        online_all, online_scopes = online, frozenset[str]()
    else:
        online_all, online_scopes = False, frozenset(_strings(online, f"{where}.online"))
    extra: dict[str, Any] = {}
    if "signing_key" in data:
        extra["signing_key"] = _read_private_key(data["signing_key"], f"{where}.signing_key")
    if "credential_file" in data:
        extra["credential"] = _read_secret(data["credential_file"], f"{where}.credential_file")
    if "handshake" in data:
        completer = data["handshake"]
        if isinstance(completer, str):
            completer = import_object(completer, f"{where}.handshake")
        if not callable(completer):
            raise ConfigError(f"{where}.handshake must be a callable (or an import path to one)")
        extra["handshake"] = completer
    if "broker_timeout" in data:
        extra["broker_timeout"] = float(_positive(data, "broker_timeout", None, f"{where}."))
    if "broker_retries" in data:
        retries = data["broker_retries"]
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise ConfigError(f"{where}.broker_retries must be a whole number from 0 to 10")
        extra["broker_retry"] = BrokerRetry(retries=retries)
    for key in ("broker_url", "agent_did", "minimum_identity_assurance", "refusal"):
        if key in data:
            extra[key] = _optional_string(data, key, where)
    if "description" in data:
        description = data["description"]
        if description is not None and not isinstance(description, str):
            raise ConfigError(f"{where}.description must be a string")
        extra["description"] = description
    try:
        return ParafeConfig(
            agent_id=agent_id,
            scope_requirements=dict(scopes),
            allow_http_broker_on_loopback=data.get("allow_http_broker_on_loopback", False),
            required=data.get("required", False),
            require_proof=data.get("require_proof", True),
            file_receipts=data.get("file_receipts", False),
            ap2=data.get("ap2", False),
            online=online_all,
            online_scopes=online_scopes,
            **extra,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _imported(reference: Any, kind: type, where: str) -> Any:
    """An object given directly (from Python) or as an import path (from TOML)."""
    if isinstance(reference, str):
        reference = import_object(reference, where)
    if isinstance(reference, type) and issubclass(reference, kind):
        reference = reference()
    if not isinstance(reference, kind):
        raise ConfigError(f"{where} must be a {kind.__name__} (or an import path to one)")
    return reference


def _detail_types(reference: Any, where: str) -> tuple[AuthorizationDetailType, ...]:
    """A list of `AuthorizationDetailType` (or an import path to one)."""
    if isinstance(reference, str):
        reference = import_object(reference, where)
    if not isinstance(reference, (list, tuple)) or not all(
        isinstance(kind, AuthorizationDetailType) for kind in reference
    ):
        raise ConfigError(f"{where} must be a list of AuthorizationDetailType (or its import path)")
    return tuple(reference)


def _page_templates(value: Any, where: str) -> ConsentPages:
    """The default pages searching `value` first: a folder, a list of folders, or a Jinja2
    loader (anything with `get_source`, as Flask's `app.jinja_loader`)."""
    if hasattr(value, "get_source"):
        return ConsentPages(loader=value)
    if isinstance(value, str) and value:
        return ConsentPages(templates=value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
        return ConsentPages(templates=tuple(value))
    raise ConfigError(f"{where} must be a folder, a list of folders or a Jinja2 loader")


def _delegation(data: Any, where: str, templates: Any = None) -> DelegationConfig:
    """A `[brands.ID.delegation]` table (see docs/delegated.md)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(data) - _DELEGATION_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {where}.{unknown[0]}")
    scopes = data.get("scopes")
    if (
        not isinstance(scopes, Mapping)
        or not scopes
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in scopes.items())
    ):
        raise ConfigError(f"{where}.scopes must be a table of scope id = description")
    login_url = data.get("login_url")
    if not isinstance(login_url, str) or not login_url.startswith(("http://", "https://", "/")):
        raise ConfigError(f"{where}.login_url must be an absolute URL or a path")
    mode = data.get("login", "same-app")
    if mode not in ("same-app", "brand"):
        raise ConfigError(f"{where}.login must be 'same-app' or 'brand'")
    brand_jwks = optional_jwks(data, "brand_jwks", f"{where}.brand_jwks")
    extra: dict[str, Any] = {}
    if "poppy" in data:
        extra["poppy"] = poppy_from_mapping(data["poppy"], f"{where}.poppy")
    if "tools" in data:
        extra["tools"] = _imported(data["tools"], ToolRegistry, f"{where}.tools")
    if "pages" in data and "templates" in data:
        raise ConfigError(f"{where}: give pages or templates, not both")
    if "pages" in data:
        extra["pages"] = _imported(data["pages"], ConsentPages, f"{where}.pages")
    elif "templates" in data:
        extra["pages"] = _page_templates(data["templates"], f"{where}.templates")
    elif templates is not None:
        extra["pages"] = _page_templates(templates, "templates")
    if "refresh_reuse_interval" in data:
        # Checked by DelegationConfig (a number from 0 to 60), named in the error below.
        extra["refresh_reuse_interval"] = data["refresh_reuse_interval"]
    if "authorization_details" in data:
        extra["authorization_details"] = _detail_types(
            data["authorization_details"], f"{where}.authorization_details"
        )
    try:
        return DelegationConfig(
            scopes=dict(scopes),
            login_url=login_url,
            mode=mode,
            brand_issuer=_optional_string(data, "brand_issuer", where),
            brand_jwks_uri=_optional_string(data, "brand_jwks_uri", where),
            brand_jwks=brand_jwks,
            interval=int(_positive(data, "interval", 5, f"{where}.", whole=True)),
            grant_lifetime=float(_positive(data, "grant_days", 30, f"{where}.")) * 24 * 3600,
            skip_consent_if_granted=bool(data.get("skip_consent_if_granted", False)),
            **extra,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _optional_string(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{where}.{key} must be a non-empty string")
    return value


def _positive(
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


@frozen
class ProviderSettings:
    """Everything `Provider.from_settings` needs. See docs/configuration.md for each key."""

    identity: Settings
    base_url: str
    brands: tuple[Brand, ...]
    identity_scheme: str = DEFAULT_IDENTITY_SCHEME
    store: str = DEFAULT_STORE
    organization: str = ""
    rate_limit: RateLimit = field(factory=RateLimit)
    #: The consent pages' limit per client address, and the device authorization and token
    #: endpoints' limits per (agent, sub); None: the defaults (on).
    consent_rate_limit: RateLimit | None = None
    device_rate_limit: RateLimit | None = None
    token_rate_limit: RateLimit | None = None
    #: Count rate limits in the store (shared by every process on it): None lets the store
    #: decide (PostgreSQL yes, sqlite and memory no).
    shared_rate_limits: bool | None = None
    max_body_bytes: int = 1024 * 1024
    conversation_idle_timeout: float | None = None
    claim_lease_seconds: float = 120.0
    #: Seconds a turn handler may take before the turn is abandoned; None waits forever.
    turn_timeout: float | None = None
    #: Days a conversation (and its messages: personal data) is kept after its last activity
    #: when `pactmw cleanup` runs; None keeps them forever.
    retention_days: float | None = None
    signing_key_files: tuple[str, ...] = ()
    data_dir: str = ".pactmw"

    def signing_keys(self) -> SigningKeys | None:
        """The keys for delegation tokens and receipts, when any Brand offers delegation.

        From `signing_keys` (JWK or PEM files, oldest first; the last one signs) or, for
        development, one ES256 key generated once into `{data_dir}/keys/`.
        """
        if not any(brand.delegation is not None for brand in self.brands):
            return None
        try:
            if self.signing_key_files:
                return SigningKeys.from_files(self.signing_key_files)
            return SigningKeys.development(Path(self.data_dir) / "keys")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"signing_keys: {exc}") from exc

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
            raise ConfigError(
                "store must be a URL: memory://, sqlite:///PATH, postgresql://... or django[:ALIAS]"
            )
        organization = data.get("organization", "")
        if not isinstance(organization, str):
            raise ConfigError("organization must be a string")
        brands_data = data.get("brands", {})
        if not isinstance(brands_data, Mapping):
            raise ConfigError("brands must be a table of Brand tables")
        shared = data.get("shared_rate_limits")
        if shared is not None and not isinstance(shared, bool):
            raise ConfigError(
                "shared_rate_limits must be true or false (leave it out: the store decides)"
            )
        max_body = _positive(data, "max_body_bytes", 1024 * 1024, whole=True)
        brands = tuple(
            brand_from_mapping(str(k), v, handlers=handlers, templates=data.get("templates"))
            for k, v in brands_data.items()
        )
        try:  # a Poppy Brand's documents are checked now, naming the setting
            poppy_companies(
                base_url,
                {b.id: (b.name, b.poppy) for b in brands if b.poppy is not None},
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        return cls(
            identity=identity,
            base_url=base_url.rstrip("/"),
            brands=brands,
            identity_scheme=scheme,
            store=store,
            organization=organization,
            rate_limit=_rate_limit(data, "rate_limit") or RateLimit(),
            consent_rate_limit=_rate_limit(data, "consent_rate_limit"),
            device_rate_limit=_rate_limit(data, "device_rate_limit"),
            token_rate_limit=_rate_limit(data, "token_rate_limit"),
            shared_rate_limits=shared,
            max_body_bytes=int(max_body),
            conversation_idle_timeout=_positive(data, "conversation_idle_timeout", None),
            signing_key_files=_strings(data.get("signing_keys", []), "signing_keys"),
            data_dir=_string(data, "data_dir", ".pactmw"),
            claim_lease_seconds=float(_positive(data, "claim_lease_seconds", 120.0)),
            turn_timeout=_turn_timeout(data),
            retention_days=_retention_days(data),
        )


def _rate_limit(data: Mapping[str, Any], key: str) -> RateLimit | None:
    """The `key` table as a `RateLimit` (an empty table: no limit); None when absent."""
    if key not in data:
        return None
    rate = data[key]
    if not isinstance(rate, Mapping):
        raise ConfigError(f"{key} must be a table with per_agent, per_user, window")
    unknown = sorted(set(rate) - _RATE_KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration key {key}.{unknown[0]}")
    where = f"{key}."
    return RateLimit(
        per_agent=_positive(rate, "per_agent", None, where, whole=True),
        per_user=_positive(rate, "per_user", None, where, whole=True),
        window=float(_positive(rate, "window", 60.0, where)),
    )


def _turn_timeout(data: Mapping[str, Any]) -> float | None:
    seconds = _positive(data, "turn_timeout", None)
    return None if seconds is None else float(seconds)


def _retention_days(data: Mapping[str, Any]) -> float | None:
    days = _positive(data, "retention_days", None)
    return None if days is None else float(days)


def _string(data: Mapping[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string")
    return value


def load_toml(path: str) -> dict[str, Any]:
    """Read a TOML configuration file (Python 3.11+ `tomllib`, or `tomli` on 3.10)."""
    if sys.version_info >= (3, 11):
        import tomllib as toml_reader
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as toml_reader
        except ModuleNotFoundError as exc:
            # A dependency on 3.10 (pyproject.toml), so only a broken install gets here.
            raise ConfigError("reading TOML on Python 3.10 needs: pip install tomli") from exc
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = toml_reader.load(handle)
            return data
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except toml_reader.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


__all__ = [
    "DEFAULT_STORE",
    "PROVIDER_KEYS",
    "ProviderSettings",
    "brand_from_mapping",
    "import_handler",
    "import_object",
    "load_toml",
    "parafe_from_mapping",
    "poppy_from_mapping",
]
