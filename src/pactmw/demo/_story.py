"""The story `pactmw demo` tells, step by step, and `run_demo`, which tells it."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from pactmw.brand_login import DevelopmentBrandLogin, consent_url_for
from pactmw.client import ClientError
from pactmw.demo._agent import PersonalAgent
from pactmw.demo._broker import DemoBroker
from pactmw.demo._common import BRAND_ID, DEMO_USER, ISSUER, DemoFailed, expect
from pactmw.demo._delegated import DelegatedPart, read_authority
from pactmw.demo._identity import IdentityPart
from pactmw.demo._parafe import parafe_turn
from pactmw.demo._person import Person
from pactmw.demo._server import Server, config_toml, free_port, run_pactmw, start_server, stop, tail
from pactmw.demo._transcript import Transcript


class Demo:
    """The story, a transcript step per line of `run`; `close` stops whatever was started."""

    def __init__(self, t: Transcript, workdir: Path) -> None:
        self.t = t
        self.workdir = workdir
        self.bot_log = workdir / "bot-runs.log"
        self.agent = PersonalAgent()
        self.server: Server | None = None
        self.login: DevelopmentBrandLogin | None = None
        self.broker: DemoBroker | None = None

    def run(self) -> None:
        t, agent = self.t, self.agent
        t.step("The personal agent's signing key")
        t.note(f"{agent.signer.key.alg} (P-256) key generated, kid {agent.signer.kid}")

        t.step("The personal agent publishes its public key")
        jwks_uri = agent.publish()
        t.note(f"JWKS at {jwks_uri} (1 key, no private members)")

        t.step("Acme's Provider: pactmw serve")
        server = self.start_server(jwks_uri)
        audience = f"{server.base_url}/a2a"
        identity = IdentityPart(t, agent, audience, self.bot_log)

        t.step("The Agent Card (no authentication)")
        interface = identity.read_card(server.base_url)

        t.step("A conversation; every request carries a JWT the personal agent signs")
        identity.describe_token()
        turns = ("Hi! Where is my order?", "It's A-1001.", "When will it arrive?")
        context_id, message_id, first_body = identity.converse(interface, turns)

        t.step("Retry: the last message again, same messageId (as after a lost response)")
        identity.retry(interface, turns[-1], context_id, message_id, first_body)

        t.step("Refusals")
        identity.refusals(interface, context_id)

        t.part("PACT Delegated: Acme's bot acts on Jane's Acme account (spec §5)")
        self.delegated(server.base_url, interface, identity.sub, audience)

        t.step("Stop the Provider")
        status = stop(server.process)
        expect(status == 0, f"pactmw serve exited with {status}:\n{tail(server.log)}")
        t.note("SIGTERM sent; pactmw serve shut down cleanly (exit status 0)")
        if self.login is not None:
            self.login.close()
            self.login = None
            t.note("Acme's login stopped")

    def start_server(self, jwks_uri: str) -> Server:
        t = self.t
        port = free_port()
        # Acme's own login page (brand-mode delegation) must exist before the config names it.
        login = self.login = DevelopmentBrandLogin(
            consent_url=consent_url_for(f"http://127.0.0.1:{port}", BRAND_ID),
            users=[DEMO_USER],
            brand_name="Acme",
        ).start()
        config = self.workdir / "pactmw.toml"
        broker = self.broker = DemoBroker()
        config.write_text(
            config_toml(port, jwks_uri, login) + broker.config(self.workdir), encoding="utf-8"
        )
        t.note(f"config {config}")
        t.note(f"brand {BRAND_ID!r} (pactmw.demo:demo_bot), agent {ISSUER}")
        t.note("store: the embedded default, sqlite:///.pactmw/pactmw.db in that directory")
        t.note(f"Acme's own login (pactmw.brand_login, a thread here): {login.login_url}")
        t.note(f"$ python -m pactmw serve --config {config.name} --port {port}")
        server = self.server = start_server(self.workdir, config, port, self.bot_log)
        t.note(f"listening on {server.base_url} (pid {server.process.pid})")
        return server

    def delegated(self, base_url: str, interface: str, sub: str, audience: str) -> None:
        """The Delegated profile, one transcript step per line."""
        t, login, broker = self.t, self.login, self.broker
        assert login is not None  # both started with the server
        assert broker is not None
        t.step("Delegated authority on the card (§5.1) and the RFC 8414 metadata")
        authority = read_authority(t, self.agent.wire, base_url)
        part = DelegatedPart(t, self.agent, authority, login, interface, sub, audience)

        t.step("An account question with the PACT JWT alone → step-up (§5.5)")
        context_id = part.step_up_without_token()

        t.step("Device authorization (§5.3): the personal agent asks for Acme's scopes")
        authorization = part.device_authorization()

        jane = Person(t, login)
        t.step("Jane signs in at Acme's own login (the personal agent only shows the link)")
        consent_url, assertion = jane.sign_in(authorization.verification_uri_complete)

        t.step("The Provider's consent page: Jane unticks a scope and allows")
        jane.consent(consent_url, assertion)

        t.step("The personal agent polls again and gets a delegation token")
        tokens, grant_id = part.poll_token(authorization)

        t.step("A delegated turn: the reply carries a signed receipt (§5.6)")
        text = "Show me my orders, please."
        part.delegated_turn(text, context_id, tokens.access_token, grant_id, show_receipt=True)

        t.step("A turn that needs the unticked scope → step-up, the conversation stays open")
        part.step_up_with_token(context_id, tokens.access_token)

        t.step("Parafé consent (A2A extension v2): a reorder only with broker-issued consent")
        parafe_turn(t, self.agent, broker, base_url, interface, sub, audience)

        t.step("Refresh: a new access token, the refresh token rotated")
        tokens = part.refresh(tokens, grant_id)
        text = "Show me my orders again."
        part.delegated_turn(text, context_id, tokens.access_token, grant_id, show_receipt=False)

        t.step("The operator revokes the grant: pactmw grants")
        self.revoke(grant_id)

        t.step("After revocation: the delegation token and the refresh token are refused")
        part.after_revocation(context_id, tokens)

    def revoke(self, grant_id: str) -> None:
        t, workdir = self.t, self.workdir
        listing = run_pactmw(t, workdir, "grants", "list", "--config", "pactmw.toml")
        expect(listing.returncode == 0, f"grants list exited with {listing.returncode}")
        expect(grant_id in listing.stdout, "grants list: the grant is not listed")
        revoked = run_pactmw(t, workdir, "grants", "revoke", "--config", "pactmw.toml", grant_id)
        expect(revoked.returncode == 0, f"grants revoke exited with {revoked.returncode}")
        expect(
            "agent.grant_revoked" in revoked.stderr, "grants revoke: no agent.grant_revoked event"
        )
        t.note("(the grant is revoked in the store the running server shares)")

    def close(self) -> None:
        if self.server is not None:
            stop(self.server.process)
        self.agent.close()
        if self.login is not None:
            self.login.close()
        if self.broker is not None:
            self.broker.close()


def run_demo(*, keep: bool = False, out: TextIO | None = None) -> int:
    """Run the demo, printing its transcript to `out` (stdout); 0 when every step passed."""
    t = Transcript(out or sys.stdout)
    workdir = Path(tempfile.mkdtemp(prefix="pactmw-demo-"))
    started = time.monotonic()
    t.line("pactmw demo: a personal agent (PA) talks to Acme's support bot through pactmw")
    t.line("(PACT 1.0 Identity, then Delegated, over A2A HTTP+JSON; everything on 127.0.0.1)")
    t.note(f"working directory {workdir}")
    demo = Demo(t, workdir)
    failure: str | None = None
    try:
        demo.run()
    except DemoFailed as exc:
        failure = str(exc)
    except ClientError as exc:  # the personal agent's client refused an answer
        failure = f"the personal agent's client: {type(exc).__name__}: {exc}"
    except Exception as exc:  # a broken answer the checks did not foresee: still one message
        failure = f"unexpected {type(exc).__name__}: {exc}"
    finally:
        demo.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    t.line()
    if failure is not None:
        t.line(f"demo FAILED at step {t.steps}: {failure}")
    else:
        t.line(f"demo complete in {time.monotonic() - started:.1f} s")
    if keep:
        t.line(f"kept {workdir} (config, sqlite store, server log)")
    return 0 if failure is None else 1


__all__ = [
    "Demo",
    "run_demo",
]
