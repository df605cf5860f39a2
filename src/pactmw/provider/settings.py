"""Provider configuration: the identity keys of `Settings` plus Brands, store and limits.

The TOML of `pactmw serve`, Django's `PACTMW` and Flask's `app.config["PACTMW"]` all go
through `ProviderSettings.from_mapping`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from pactmw.config import ConfigError, Settings, check_base_url, refuse_unknown
from pactmw.protocols.delegation import SigningKeys
from pactmw.provider._brand_settings import (
    brand_from_mapping,
    parafe_from_mapping,
    poppy_from_mapping,
)
from pactmw.provider._setting_values import (
    function_setting,
    import_handler,
    import_object,
    non_empty_string,
    positive,
    strings,
)
from pactmw.provider.brand import Brand, TurnHandler
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, IDENTITY_SCHEMES, interface_url
from pactmw.provider.delegated import AuditHook
from pactmw.provider.poppy import DeviceSignIn, poppy_companies
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
        "audit",  # the hook that receives the delegation audit events
    }
)
#: The keys of PROVIDER_KEYS a settings dict without `brands` (an app that only verifies
#: identities: Django's `PACTMW`, Flask's `app.config["PACTMW"]`) may still hold. Every other
#: one is read by the Provider alone, so without `brands` it would do nothing, and
#: `guard_settings` refuses it. The exceptions:
ACCEPTED_WITHOUT_BRANDS = frozenset(
    {
        "brands",  # its presence is what makes the dict a Provider's
        "templates",  # Flask's init_app and Django's with_template_dirs add it to every app's
        # The identity middleware and decorators read them; a value must be one of brands,
        # which guard_settings says in their own words ("... is not one of brands").
        "delegation_brand",
        "parafe_brand",
    }
)
PROVIDER_ONLY_KEYS = PROVIDER_KEYS - ACCEPTED_WITHOUT_BRANDS
_RATE_KEYS = frozenset({"per_agent", "per_user", "window"})


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
    #: The hook given each delegation audit event after it is logged (`audit`: a function, or
    #: its import path); None: the `pactmw.audit` log only.
    audit: AuditHook | None = None

    def signing_keys(self) -> SigningKeys | None:
        """The keys for delegation tokens and receipts, when any Brand offers delegation.

        From `signing_keys` (JWK or PEM files, oldest first; the last one signs) or, for
        development, one ES256 key generated once into `{data_dir}/keys/`.
        """
        if not any(brand.delegation is not None for brand in self.brands):
            return None
        if self.signing_key_files:
            try:
                return SigningKeys.from_files(self.signing_key_files)
            except OSError as exc:  # the file as configured, in the words of the CLI's errors
                raise ConfigError(
                    f"signing_keys: cannot read {exc.filename}: {exc.strerror}"
                ) from exc
            except ValueError as exc:
                raise ConfigError(f"signing_keys: {exc}") from exc
        folder = Path(self.data_dir) / "keys"
        try:
            return SigningKeys.development(folder)
        except (OSError, ValueError) as exc:  # no signing_keys: data_dir is the key to fix
            problem = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ConfigError(
                f"data_dir: cannot write the development signing key to {folder}: {problem}"
            ) from exc

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
        base_url = check_base_url(data.get("base_url"))
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
        max_body = positive(data, "max_body_bytes", 1024 * 1024, whole=True)
        brands = tuple(
            brand_from_mapping(str(k), v, handlers=handlers, templates=data.get("templates"))
            for k, v in brands_data.items()
        )
        try:  # a Poppy Brand's documents are checked now, naming the setting
            poppy_companies(
                base_url,
                {b.id: (b.name, b.poppy) for b in brands if b.poppy is not None},
                # Its device sign-in link too (PAP-4.6-02), as the Provider will build it:
                # a bad one is said where settings are checked (`manage.py check`), not
                # only when the Provider is built.
                {
                    b.id: DeviceSignIn(
                        b.delegation, f"{interface_url(base_url, b.id)}/oauth/consent"
                    )
                    for b in brands
                    if b.poppy is not None and b.delegation is not None
                },
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        return cls(
            identity=identity,
            base_url=base_url,
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
            conversation_idle_timeout=positive(data, "conversation_idle_timeout", None),
            signing_key_files=strings(data.get("signing_keys", []), "signing_keys"),
            data_dir=non_empty_string(data, "data_dir", ".pactmw"),
            claim_lease_seconds=float(positive(data, "claim_lease_seconds", 120.0)),
            turn_timeout=_turn_timeout(data),
            retention_days=_retention_days(data),
            audit=_audit_hook(data),
        )


def _rate_limit(data: Mapping[str, Any], key: str) -> RateLimit | None:
    """The `key` table as a `RateLimit` (an empty table: no limit); None when absent."""
    if key not in data:
        return None
    rate = data[key]
    if not isinstance(rate, Mapping):
        raise ConfigError(f"{key} must be a table with per_agent, per_user, window")
    refuse_unknown(rate, _RATE_KEYS, f"{key}.")
    where = f"{key}."
    return RateLimit(
        per_agent=positive(rate, "per_agent", None, where, whole=True),
        per_user=positive(rate, "per_user", None, where, whole=True),
        window=float(positive(rate, "window", 60.0, where)),
    )


def _turn_timeout(data: Mapping[str, Any]) -> float | None:
    seconds = positive(data, "turn_timeout", None)
    return None if seconds is None else float(seconds)


def _retention_days(data: Mapping[str, Any]) -> float | None:
    days = positive(data, "retention_days", None)
    return None if days is None else float(days)


def _audit_hook(data: Mapping[str, Any]) -> AuditHook | None:
    if data.get("audit") is None:
        return None
    hook: AuditHook = function_setting(data["audit"], "audit")
    if inspect.iscoroutinefunction(hook):
        # Audit.publish calls it from sync code: it would make a coroutine nobody awaits,
        # and every event would be lost with only a RuntimeWarning.
        raise ConfigError("audit must be a plain function, not async def")
    return hook


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
    "ACCEPTED_WITHOUT_BRANDS",
    "DEFAULT_STORE",
    "PROVIDER_KEYS",
    "PROVIDER_ONLY_KEYS",
    "ProviderSettings",
    "brand_from_mapping",
    "import_handler",
    "import_object",
    "load_toml",
    "parafe_from_mapping",
    "poppy_from_mapping",
]
