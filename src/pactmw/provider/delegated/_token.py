"""RFC 8628 §3.4-3.5 and RFC 6749 §6: the token endpoint (device code and refresh grants)."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from pactmw.core.http import Response
from pactmw.protocols.delegation import mint_access_token
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._codes import new_secret, secret_hash
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._details import grant_owner, held
from pactmw.provider.delegated._errors import OAuthError
from pactmw.provider.delegated._forms import agent_form, one
from pactmw.provider.delegated._metadata import DEVICE_CODE_GRANT
from pactmw.provider.delegated._responses import NO_STORE, json_bytes_response, json_response
from pactmw.provider.delegated._reuse import open_answer, seal_answer
from pactmw.provider.flow import Flow, NeedPause, store
from pactmw.provider.ratelimit import RateLimiter
from pactmw.store.base import DeviceAuthorization, Grant


@frozen
class TokenEndpoint:
    """Issues delegation tokens with a refresh token, and rotates refresh tokens."""

    ctx: ServerContext
    #: Token requests per (agent, sub), whatever the grant: device-code polls of every code
    #: the agent user holds, and refreshes.
    limiter: RateLimiter

    def token(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        form = agent_form(body, caller)
        grant_type = one(form, "grant_type")
        wait = yield from self.limiter.admit(caller.issuer, caller.sub, self.ctx.clock())
        if wait is not None:
            if grant_type == DEVICE_CODE_GRANT:
                # Polling too fast is what RFC 8628 §3.5's slow_down is for: the client adds
                # 5 s to its interval. Retry-After says when this window ends.
                raise OAuthError(
                    "slow_down",
                    f"this agent user polls too often; retry after {wait} s",
                    headers=(("Retry-After", str(wait)),),
                )
            raise OAuthError.rate_limited(wait, "token")
        if grant_type == DEVICE_CODE_GRANT:
            return (
                yield from self.device_code_grant(brand, config, caller, one(form, "device_code"))
            )
        if grant_type == "refresh_token":
            return (
                yield from self._refresh_grant(brand, config, caller, one(form, "refresh_token"))
            )
        raise OAuthError("unsupported_grant_type", "use the device_code or refresh_token grant")

    def device_code_grant(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, device_code: str
    ) -> Flow:
        """RFC 8628 §3.4 for `caller`, past the rate limit: the token response of an
        approved code, else its OAuth error."""
        poll = yield store(
            self.ctx.store.poll_device_code,
            device_code_hash=secret_hash(device_code),
            client_id=caller.issuer,
            brand_id=brand.id,
            pa_sub=caller.sub,  # only the agent user who asked may collect the tokens
            now=self.ctx.clock(),
        )
        errors = {
            "unknown": ("invalid_grant", "Unknown device_code"),
            "expired": ("expired_token", "the device code has expired"),
            "denied": ("access_denied", "the user denied the request"),
            "consumed": ("invalid_grant", "the device code was already used"),
            "slow_down": ("slow_down", f"poll at most every {config.interval} s"),
            "pending": ("authorization_pending", "the user has not decided yet"),
        }
        if poll.kind in errors:
            raise OAuthError(*errors[poll.kind])
        authorization: DeviceAuthorization = poll.authorization
        assert authorization.grant_id is not None
        grant: Grant | None = yield store(self.ctx.store.get_grant, grant_id=authorization.grant_id)
        if grant is None or not grant.is_live(self.ctx.clock()):
            # Revoked (or expired) between the approval and this poll: issue nothing for it.
            raise OAuthError("invalid_grant", "the grant was revoked")
        return (yield from self._tokens(brand, config, grant))

    def _refresh_grant(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, refresh_token: str
    ) -> Flow:
        new_refresh = new_secret("rt_")
        now = self.ctx.clock()
        token_hash = secret_hash(refresh_token)
        rotate = store(
            self.ctx.store.rotate_refresh_token,
            token_hash=token_hash,
            new_token_hash=secret_hash(new_refresh),
            client_id=caller.issuer,
            brand_id=brand.id,
            pa_sub=caller.sub,  # another user of the same agent gets `unknown`, burns nothing
            now=now,
            expires_at=now + config.grant_lifetime,
            reuse_interval=config.refresh_reuse_interval,
        )
        rotation = yield rotate
        pause = _FIRST_PAUSE
        waited = 0.0
        while rotation.kind == "repeated" and rotation.successor is None and waited < _SEAL_WAIT:
            # The winning rotation has not sealed its answer yet: it is minting it. Asked
            # again at the same `now`, so waiting never turns this repeat into a reuse.
            yield NeedPause(pause)
            waited += pause
            pause = min(pause * 2, _MAX_PAUSE)
            rotation = yield rotate
        if rotation.kind == "repeated":
            answer = (
                None
                if rotation.successor is None
                else open_answer(refresh_token, token_hash, rotation.successor)
            )
            if answer is None:  # the winner never sealed it (it failed): nothing to repeat
                raise OAuthError("invalid_grant", "the refresh token was just used")
            # The winning rotation's token response, byte for byte.
            return json_bytes_response(answer, extra=NO_STORE)
        if rotation.kind == "reused" and rotation.grant is not None:
            # RFC 9700 §4.14: a spent refresh token came back, so it may be stolen; the whole
            # grant is revoked (the store did it atomically) and the user must consent again.
            self.ctx.audit.grant(
                "agent.grant_revoked", rotation.grant, reason="refresh_token_reuse"
            )
        if rotation.kind != "rotated":
            raise OAuthError("invalid_grant", "the refresh token is not valid")
        response: Response = yield from self._token_response(
            brand, config, rotation.grant, new_refresh
        )
        if config.refresh_reuse_interval > 0:
            # Kept sealed for repeats within the interval (see `_reuse`), before answering.
            sealed = seal_answer(refresh_token, token_hash, response.body)
            yield store(self.ctx.store.seal_rotation, token_hash=token_hash, successor=sealed)
        return response

    def _tokens(self, brand: Brand, config: DelegationConfig, grant: Grant) -> Flow:
        refresh = new_secret("rt_")
        yield store(
            self.ctx.store.issue_refresh_token,
            token_hash=secret_hash(refresh),
            grant_id=grant.grant_id,
            client_id=grant.client_id,
            brand_id=brand.id,
            now=self.ctx.clock(),
            expires_at=grant.expires_at,
        )
        return (yield from self._token_response(brand, config, grant, refresh))

    def _token_response(
        self, brand: Brand, config: DelegationConfig, grant: Grant, refresh: str
    ) -> Flow:
        # The grant's authorization details, in every token of it (so across refresh too).
        details = yield from held(self.ctx.store, config, grant_owner(grant.grant_id))
        now = self.ctx.clock()
        lifetime = max(1, min(3600, int(grant.expires_at - now)))
        access = mint_access_token(
            key=self.ctx.keys.signer,
            interface_url=self.ctx.interface(brand),
            account=grant.account,
            client_id=grant.client_id,
            scopes=grant.scopes,
            grant_id=grant.grant_id,
            now=now,
            lifetime=lifetime,
            authorization_details=details,
        )
        document: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": access,
            "refresh_token": refresh,
            "expires_in": lifetime,
            "scope": " ".join(grant.scopes),
        }
        if details:
            document["authorization_details"] = list(details)  # RFC 9396 §7
        response: Response = json_response(document, extra=NO_STORE)
        return response


#: How long a repeated refresh waits, at most, for the winning rotation's sealed answer, and
#: its first and longest pause between looks (doubling in between).
_SEAL_WAIT = 5.0
_FIRST_PAUSE = 0.01
_MAX_PAUSE = 0.2


__all__ = [
    "TokenEndpoint",
]
