"""Revoke a person's grants when their Django account is disabled, deleted or its password
changes (AuthKit's rule: every revoke-all path does the same), through
`Provider.revoke_account`, which audits each revocation.

Connected by the app's `ready()` when `django.contrib.auth` is installed. The account of a
same-app grant is `str(user.pk)` (see `a2a_view`). Revocation runs after the transaction
that changed the user commits, so a rolled-back change revokes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save

from pactmw.adapters.django._config import configured
from pactmw.core.errors import RequestRefused
from pactmw.provider.app import Provider

logger = logging.getLogger("pactmw.django")
_BEFORE = "_pactmw_account_before"


def connect() -> None:
    """Watch the user model (called once, from `AppConfig.ready`)."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    pre_save.connect(_remember, sender=user_model, dispatch_uid="pactmw-account-before")
    post_save.connect(_saved, sender=user_model, dispatch_uid="pactmw-account-saved")
    post_delete.connect(_deleted, sender=user_model, dispatch_uid="pactmw-account-deleted")


def _delegating_provider() -> Provider | None:
    try:
        provider = configured.guard().provider
    except RequestRefused:  # a bad PACTMW: logged where it is built
        return None
    return provider if provider is not None and provider.oauth is not None else None


# `using` is the database the user is saved to or deleted from (a site may keep its users in
# one of their own): the user as it was is read there, and the revocation waits for that
# database's transaction.


def _remember(sender: Any, instance: Any, using: str, **_: Any) -> None:
    if instance.pk is None or _delegating_provider() is None:
        return
    users = sender._default_manager.db_manager(using)
    before = users.filter(pk=instance.pk).values("is_active", "password")
    setattr(instance, _BEFORE, before.first())


def _saved(sender: Any, instance: Any, using: str, created: bool = False, **_: Any) -> None:
    before = getattr(instance, _BEFORE, None)
    if created or before is None:
        return
    delattr(instance, _BEFORE)
    if before["is_active"] and not instance.is_active:
        _revoke(instance, "account disabled", using)
    elif before["password"] != instance.password:
        _revoke(instance, "password changed", using)


def _deleted(sender: Any, instance: Any, using: str, **_: Any) -> None:
    _revoke(instance, "account deleted", using)


def _revoke(user: Any, why: str, using: str) -> None:
    provider = _delegating_provider()
    if provider is None:
        return
    account = str(user.pk)

    def revoke() -> None:
        revoked = provider.revoke_account(account)
        if revoked:
            logger.info("revoked %d grant(s) of account %s: %s", len(revoked), account, why)

    transaction.on_commit(revoke, using=using)


__all__ = ["connect"]
