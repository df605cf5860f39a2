"""`pactmw.demo` and `pactmw.cli` export exactly what their callers use."""

from __future__ import annotations

import pactmw.demo


def test_demo_exports() -> None:
    # run_demo for `pactmw demo`; demo_bot and demo_tools by import path from the demo's
    # configuration (pactmw.demo:demo_bot); DemoFailed for a caller that runs the steps.
    assert set(pactmw.demo.__all__) == {"DemoFailed", "demo_bot", "demo_tools", "run_demo"}
    for name in pactmw.demo.__all__:
        assert getattr(pactmw.demo, name) is not None
