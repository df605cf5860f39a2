"""The PACT Provider: Agent Cards, `message:send`, conversations, the support-bot hook."""

from pactmw.provider.app import Provider
from pactmw.provider.brand import Brand, Reply, Skill, Turn, TurnHandler
from pactmw.provider.card import brand_domain_card, build_card, card_url, interface_url
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.settings import ProviderSettings, load_toml

__all__ = [
    "Brand",
    "Provider",
    "ProviderSettings",
    "RateLimit",
    "Reply",
    "Skill",
    "Turn",
    "TurnHandler",
    "brand_domain_card",
    "build_card",
    "card_url",
    "interface_url",
    "load_toml",
]
