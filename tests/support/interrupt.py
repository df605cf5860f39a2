"""Ctrl-C, as a terminal sends it, to a command the test started."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from attrs import frozen

__all__ = ["Stopped", "interrupt", "start_interruptible"]


@frozen
class Stopped:
    """How an interrupted command ended."""

    returncode: int
    stdout: str
    stderr: str


def start_interruptible(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> subprocess.Popen[str]:
    """Start `command` with its output piped, and SIGINT as a terminal delivers it: even where
    the tests run with SIGINT ignored (a background job of a shell), an ignored disposition
    being inherited across exec."""
    return subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def interrupt(process: subprocess.Popen[str], ready: Callable[[], bool]) -> Stopped:
    """Send `process` SIGINT once `ready()` holds (asked until then, every 50 ms, while the
    process runs; `ready` may block), and wait for it to end; killed if anything fails."""
    try:
        while not ready():
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return Stopped(process.returncode, stdout, stderr)
