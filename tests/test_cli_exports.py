"""`pactmw.demo` and `pactmw.cli` export exactly what their callers use."""

from __future__ import annotations

import argparse

import pactmw.cli
import pactmw.demo


def test_demo_exports() -> None:
    # run_demo for `pactmw demo`; demo_bot and demo_tools by import path from the demo's
    # configuration (pactmw.demo:demo_bot); DemoFailed for a caller that runs the steps.
    assert set(pactmw.demo.__all__) == {"DemoFailed", "demo_bot", "demo_tools", "run_demo"}
    for name in pactmw.demo.__all__:
        assert getattr(pactmw.demo, name) is not None


def test_cli_exports() -> None:
    # main for the console script (pactmw = "pactmw.cli:main") and `python -m pactmw`;
    # build_parser for callers that embed or document the command line.
    assert set(pactmw.cli.__all__) == {"build_parser", "main"}
    for name in pactmw.cli.__all__:
        assert callable(getattr(pactmw.cli, name))


def test_every_subcommand_is_declared() -> None:
    parser = pactmw.cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) == {
        "serve",
        "grants",
        "agents",
        "cleanup",
        "demo",
        "keygen",
        "token",
        "card",
        "send",
        "check",
    }
