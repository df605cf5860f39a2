"""`PageVisit`: who a consent or connected agents page goes on with, and whom it refuses."""

from __future__ import annotations

import pytest

from pactmw.core.http import Request
from pactmw.provider.brand import LoginMode
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.delegated._sessions import PageVisit
from tests.delegated.support import delegated_brand

JANE = SignedInUser(account="jane", label="jane@example.com")
JOHN = SignedInUser(account="john", label="john@example.com")


def visit(mode: LoginMode, user: SignedInUser | None) -> PageVisit:
    login: dict[str, str] = {}
    if mode == "brand":
        login = {
            "brand_issuer": "https://login.acme.example",
            "brand_jwks_uri": "https://login.acme.example/jwks",
        }
    brand = delegated_brand("acme", "Acme", [], mode=mode, **login)
    assert brand.delegation is not None
    return PageVisit(brand, brand.delegation, Request("GET", "/a2a/acme/oauth/agents"), user)


def test_same_app_goes_on_with_the_signed_in_user() -> None:
    assert visit("same-app", JANE).host_user() == JANE
    assert visit("same-app", None).host_user() is None


def test_brand_mode_always_signs_in_at_the_brands_login() -> None:
    # Even a user the adapter reported is not who the Brand's login says it is.
    assert visit("brand", JANE).host_user() is None
    assert visit("brand", None).host_user() is None


@pytest.mark.parametrize(
    ("mode", "user", "other"),
    [
        ("same-app", JANE, False),
        ("same-app", JOHN, True),
        ("same-app", None, True),
        # Brand mode: the page's signed session is the only word on who decides.
        ("brand", None, False),
        ("brand", JOHN, False),
    ],
)
def test_a_page_acts_only_for_the_person_its_session_names(
    mode: LoginMode, user: SignedInUser | None, other: bool
) -> None:
    assert visit(mode, user).is_not(JANE) is other
