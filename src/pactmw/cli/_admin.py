"""What the store-managing commands (`grants`, `agents`, `cleanup`) share: the settings of a
TOML file, its store opened from another process than `pactmw serve`, and a Provider over
that store for the operator functions (`pactmw.provider.grant_admin`, `.agent_admin`)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pactmw.cli._common import CommandError, import_from_cwd, not_utf8
from pactmw.config import ConfigError
from pactmw.store.base import StoreError

if TYPE_CHECKING:
    from pactmw.provider import Provider, ProviderSettings
    from pactmw.provider.agent_admin import Outcome
    from pactmw.store.base import Store

#: When these commands exit with status 2 (`agent_admin.CANNOT_RUN`, as `manage.py pactmw` and
#: `flask pactmw` do), as their help says; 1 is kept for "ran, and there was nothing to do".
CANNOT_RUN_HELP = (
    "2 for bad usage, a bad configuration, or a store that cannot be opened, reached or used"
)

#: How the help of these commands says where the store is.
STORE_HELP = """\
The store is the one of a TOML configuration (the file `pactmw serve` uses); run the command
from the directory pactmw serve runs in, since a relative sqlite store path (the default) is
relative to the current directory.
"""


def refilled(text: str) -> str:
    """`text` with each paragraph wrapped again (help texts that take in CANNOT_RUN_HELP)."""
    paragraphs = (" ".join(paragraph.split()) for paragraph in text.split("\n\n"))
    return "\n\n".join(textwrap.fill(paragraph, 94) for paragraph in paragraphs) + "\n"


def load_settings(path: str) -> ProviderSettings:
    """The Provider settings of a TOML file (`ConfigError` when they are bad), for every
    command that takes --config."""
    from pactmw.provider import ProviderSettings, load_toml

    if not path:  # an empty shell variable: "cannot read : No such file" would not say so
        raise CommandError("--config must not be empty")
    import_from_cwd()  # handlers and tools are imported by path, from the current directory
    try:
        data = load_toml(path)
    except UnicodeDecodeError as exc:  # TOML is UTF-8; tomllib decodes the whole file first
        raise CommandError(f"{path} is {not_utf8(exc)}") from None
    try:
        return ProviderSettings.from_mapping(data)
    except ConfigError as exc:
        if not _not_found_here(exc):
            raise
        # Run from cron or another folder, a handler or tools module of the site is not found,
        # and its name alone does not say where the command looked.
        raise ConfigError(
            f"{exc} (import paths are looked up from the current directory, {os.getcwd()}:"
            " run this command from the directory pactmw serve runs in)"
        ) from exc


def _not_found_here(exc: BaseException) -> bool:
    """Whether `exc` comes of a module that could not be found (a configuration's import
    path), whatever tables wrapped it on the way."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError):
            return True
        cause = cause.__cause__
    return False


#: What opening a store raises for a bad URL or database, each message free of the URL (it
#: may hold a password). Driver errors, and a sqlite folder that cannot be created, arrive as
#: StoreError; OSError: any other failure of the file system; ImportError: a PostgreSQL URL
#: without psycopg (the message says so).
STORE_OPEN_ERRORS = (ValueError, StoreError, OSError, ImportError)


@contextmanager
def shared_store(url: str, what: str) -> Iterator[Store]:
    """The configured store for the block, closed after it. What another process cannot
    share with `serve` is refused (`what` ends the sentence refusing memory://: "grants can
    only be managed in a sqlite or PostgreSQL store"). A store that fails inside the block
    (PostgreSQL connects on first use) is refused as one that does not open: exit status 2."""
    store = _open_shared_store(url, what)
    try:
        yield store
    except StoreError as exc:
        raise CommandError(f"store: {exc}") from None  # status 2, as CANNOT_RUN_HELP says
    finally:
        store.close()


def _open_shared_store(url: str, what: str) -> Store:
    from pactmw.store import open_store, parse_store_url

    try:
        where = parse_store_url(url)
    except ValueError as exc:  # its message never repeats the URL (a password)
        raise CommandError(f"store: {exc}") from None
    if where.backend == "memory":
        raise CommandError(f"store: memory:// lives inside the serving process; {what}")
    if where.path is not None and not os.path.isfile(where.path):
        # Opening it would create an empty database that no serving process reads.
        raise CommandError(
            f"store: no database at {os.path.abspath(where.path)} "
            "(run this from the directory pactmw serve runs in)"
        )
    try:
        return open_store(url)
    except STORE_OPEN_ERRORS as exc:
        raise CommandError(f"store: {exc}") from None


def admin_provider(settings: ProviderSettings, store: Store) -> Provider:
    """A Provider over `store` for the operator functions: its agents, its store, its
    retention, and its revocation API (which emits the audit events)."""
    from pactmw.core.jwk import generate_private_jwk
    from pactmw.protocols.delegation import SigningKeys
    from pactmw.provider import Provider

    # Nothing here signs. `Provider.from_settings` would load the Provider's private
    # signing keys (or, in development, create one under data_dir): a throwaway key spares
    # these commands both.
    return Provider(
        base_url=settings.base_url,
        verifier=settings.identity.build_verifier(overrides=store, runtime=store),
        store=store,
        brands=settings.brands,
        identity_scheme=settings.identity_scheme,
        organization=settings.organization,
        retention_days=settings.retention_days,
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        # A revocation made here is heard by the site's own audit hook too.
        audit=settings.audit,
    )


def report(outcome: Outcome) -> int:
    """Print an operator function's lines; its error becomes the command's (one line)."""
    if outcome.error is not None:
        raise CommandError(outcome.error, outcome.status)
    for line in outcome.lines:
        print(line)
    return outcome.status


__all__ = [
    "CANNOT_RUN_HELP",
    "STORE_HELP",
    "STORE_OPEN_ERRORS",
    "admin_provider",
    "load_settings",
    "refilled",
    "report",
    "shared_store",
]
