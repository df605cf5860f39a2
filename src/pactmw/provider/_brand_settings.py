"""The Brand tables of the settings: `[brands.ID]` and its `delegation`, `parafe` and `poppy`
tables, each read into its frozen config with errors naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pactmw.config import ConfigError, optional_jwks, optional_string
from pactmw.protocols.parafe import BrokerRetry
from pactmw.protocols.poppy import ApiDescriptor
from pactmw.provider._setting_values import (
    errors_named,
    function_setting,
    import_object,
    imported,
    positive,
    read_private_key,
    read_secret,
    strings,
    table,
)
from pactmw.provider.authorization_details import AuthorizationDetailType
from pactmw.provider.brand import Brand, DelegationConfig, Skill, TurnHandler
from pactmw.provider.consent_pages import ConsentPages
from pactmw.provider.parafe import ParafeConfig
from pactmw.provider.poppy import OperationsConfig, PoppyConfig
from pactmw.provider.poppy._operation_values import (
    DEFAULT_IDEMPOTENCY_SECONDS,
    DEFAULT_PROPOSAL_SECONDS,
)
from pactmw.provider.tools import ToolRegistry

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
_POPPY_KEYS = frozenset(
    {"domain", "domains", "agents", "session_seconds", "apis", "custom_scopes", "operations"}
)
_POPPY_OPERATIONS_KEYS = frozenset({"executors", "proposal_seconds", "idempotency_seconds"})
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
        "device_code_seconds",
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


def _skill(data: Any, where: str) -> Skill:
    data = table(data, _SKILL_KEYS, where)
    for key in ("id", "name", "description"):
        if not isinstance(data.get(key), str):
            raise ConfigError(f"{where}.{key} must be a string")
    return Skill(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        tags=strings(data.get("tags", []), f"{where}.tags"),
        examples=strings(data.get("examples", []), f"{where}.examples"),
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
    data = table(data, _BRAND_KEYS, where)
    if data.get("handler") is None:
        raise ConfigError(f"{where}.handler is required (an import path like 'pkg.mod:fn')")
    handler: TurnHandler = function_setting(data["handler"], f"{where}.handler", handlers)
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
        extra["tools"] = imported(data["tools"], ToolRegistry, f"{where}.tools")
    with errors_named(f"{where}: "):
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


def poppy_from_mapping(data: Any, where: str = "poppy") -> PoppyConfig:
    """One `[brands.ID.poppy]` table (docs/configuration.md); errors name the key."""
    data = table(data, _POPPY_KEYS, where)
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
        api = table(api, _POPPY_API_KEYS, at)
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
    operations = (
        poppy_operations_from_mapping(data["operations"], f"{where}.operations")
        if "operations" in data
        else None
    )
    # Read before errors_named: their ConfigError (a ValueError) already names the key, and
    # errors_named would name its table a second time.
    domains = strings(data.get("domains", [domain]), f"{where}.domains")
    session_seconds = positive(data, "session_seconds", 3600.0, f"{where}.")
    with errors_named(f"{where}."):
        return PoppyConfig(
            domain=domain,
            agents=agents,
            domains=domains,
            session_seconds=session_seconds,
            apis=tuple(apis),
            custom_scopes=custom,
            operations=operations,
        )


def poppy_operations_from_mapping(data: Any, where: str) -> OperationsConfig:
    """A `[brands.ID.poppy.operations]` table: `executors` (action = "pkg.mod:fn", or a
    callable from Python), `proposal_seconds` and `idempotency_seconds`."""
    data = table(data, _POPPY_OPERATIONS_KEYS, where)
    executors = data.get("executors")
    if not isinstance(executors, Mapping) or not executors:
        raise ConfigError(f"{where}.executors is required: a table of action = 'pkg.mod:fn'")
    loaded: dict[str, Any] = {}
    for action, reference in executors.items():
        at = f"{where}.executors.{action}"
        target = import_object(reference, at) if isinstance(reference, str) else reference
        if not callable(target):
            raise ConfigError(f"{at} must be a callable or an import path 'pkg.mod:fn'")
        loaded[action] = target
    seconds = positive(data, "proposal_seconds", DEFAULT_PROPOSAL_SECONDS, f"{where}.")
    kept = positive(data, "idempotency_seconds", DEFAULT_IDEMPOTENCY_SECONDS, f"{where}.")
    with errors_named(f"{where}."):
        return OperationsConfig(
            executors=loaded, proposal_seconds=seconds, idempotency_seconds=kept
        )


def parafe_from_mapping(data: Any, where: str = "parafe") -> ParafeConfig:
    """A `[brands.ID.parafe]` table (see docs/parafe.md)."""
    data = table(data, _PARAFE_KEYS, where)
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
    elif isinstance(online, list) and all(isinstance(scope, str) for scope in online):
        online_all, online_scopes = False, frozenset(online)
    else:
        # Said here rather than by `strings`, whose text names only the list form.
        raise ConfigError(f"{where}.online must be true, false or a list of scope names")
    extra: dict[str, Any] = {}
    if "signing_key" in data:
        extra["signing_key"] = read_private_key(data["signing_key"], f"{where}.signing_key")
    if "credential_file" in data:
        extra["credential"] = read_secret(data["credential_file"], f"{where}.credential_file")
    if "handshake" in data:
        completer = data["handshake"]
        if isinstance(completer, str):
            completer = import_object(completer, f"{where}.handshake")
        if not callable(completer):
            raise ConfigError(f"{where}.handshake must be a callable (or an import path to one)")
        extra["handshake"] = completer
    if "broker_timeout" in data:
        extra["broker_timeout"] = float(positive(data, "broker_timeout", None, f"{where}."))
    if "broker_retries" in data:
        retries = data["broker_retries"]
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise ConfigError(f"{where}.broker_retries must be a whole number from 0 to 10")
        extra["broker_retry"] = BrokerRetry(retries=retries)
    for key in ("broker_url", "agent_did", "minimum_identity_assurance", "refusal"):
        if key in data:
            extra[key] = optional_string(data, key, f"{where}.")
    if "description" in data:
        description = data["description"]
        if description is not None and not isinstance(description, str):
            raise ConfigError(f"{where}.description must be a string")
        extra["description"] = description
    with errors_named(f"{where}: "):
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
    data = table(data, _DELEGATION_KEYS, where)
    scopes = data.get("scopes")
    if (
        not isinstance(scopes, Mapping)
        or not scopes
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in scopes.items())
    ):
        raise ConfigError(f"{where}.scopes must be a table of scope id = description")
    login_url = data.get("login_url")
    if login_url is None:
        raise ConfigError(
            f"{where}.login_url is required: where a person signs in before consenting "
            "(a path of the site, or an absolute URL)"
        )
    if not isinstance(login_url, str) or not login_url.startswith(("http://", "https://", "/")):
        raise ConfigError(f"{where}.login_url must be an absolute URL or a path")
    mode = data.get("login", "same-app")
    if mode not in ("same-app", "brand"):
        raise ConfigError(f"{where}.login must be 'same-app' or 'brand'")
    brand_jwks = optional_jwks(data, "brand_jwks", f"{where}.brand_jwks")
    extra: dict[str, Any] = {}
    if "tools" in data:
        extra["tools"] = imported(data["tools"], ToolRegistry, f"{where}.tools")
    if "pages" in data and "templates" in data:
        raise ConfigError(f"{where}: give pages or templates, not both")
    if "pages" in data:
        extra["pages"] = imported(data["pages"], ConsentPages, f"{where}.pages")
    elif "templates" in data:
        extra["pages"] = _page_templates(data["templates"], f"{where}.templates")
    elif templates is not None:
        extra["pages"] = _page_templates(templates, "templates")
    # Checked by DelegationConfig (their ranges live there), named in the error below.
    for key in ("refresh_reuse_interval", "device_code_seconds"):
        if key in data:
            extra[key] = data[key]
    if "authorization_details" in data:
        extra["authorization_details"] = _detail_types(
            data["authorization_details"], f"{where}.authorization_details"
        )
    # Read before `errors_named`, whose prefix would name the table a second time in front
    # of these messages, which already name the key with its table.
    interval = int(positive(data, "interval", 5, f"{where}.", whole=True))
    grant_days = float(positive(data, "grant_days", 30, f"{where}."))
    with errors_named(f"{where}: "):
        return DelegationConfig(
            scopes=dict(scopes),
            login_url=login_url,
            mode=mode,
            brand_issuer=optional_string(data, "brand_issuer", f"{where}."),
            brand_jwks_uri=optional_string(data, "brand_jwks_uri", f"{where}."),
            brand_jwks=brand_jwks,
            interval=interval,
            grant_lifetime=grant_days * 24 * 3600,
            skip_consent_if_granted=bool(data.get("skip_consent_if_granted", False)),
            **extra,
        )


__all__ = [
    "brand_from_mapping",
    "parafe_from_mapping",
    "poppy_from_mapping",
    "poppy_operations_from_mapping",
]
