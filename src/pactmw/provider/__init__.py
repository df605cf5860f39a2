"""The PACT Provider: Agent Cards, `message:send`, conversations, the support-bot hook."""

from pactmw.provider.app import Provider
from pactmw.provider.brand import Brand, DelegationConfig, Reply, Skill, Turn, TurnHandler
from pactmw.provider.card import brand_domain_card, build_card, card_url, interface_url
from pactmw.provider.consent_pages import ConsentPages, ConsentView
from pactmw.provider.delegated import AuditEvent, SignedInUser
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.settings import ProviderSettings, load_toml
from pactmw.provider.tools import StepUpRequired, ToolRegistry

__all__ = [
    "AuditEvent",
    "Brand",
    "ConsentPages",
    "ConsentView",
    "DelegationConfig",
    "Provider",
    "ProviderSettings",
    "RateLimit",
    "Reply",
    "SignedInUser",
    "Skill",
    "StepUpRequired",
    "ToolRegistry",
    "Turn",
    "TurnHandler",
    "brand_domain_card",
    "build_card",
    "card_url",
    "interface_url",
    "load_toml",
]
