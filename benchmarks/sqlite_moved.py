"""What the sqlite store's moved-file check costs a `message:send` turn.

Run:  .venv/bin/python benchmarks/sqlite_moved.py [--seconds S] [--rounds R] [--json]

Before each write `SqliteStore` checks that its paths still name the files it has open (an
`os.stat` of the database and of its `-wal`, compared with the devices and inodes taken when
it opened). A turn is the two
writes of a new `message:send` (`start_conversation` + `store_reply`) on one thread, on a
fresh file each: contenders are the store as shipped, and the same store with the check
taken out. R rounds (default 10) of S seconds (default 1) each, interleaved, the order
rotating; the figures are medians. The check alone is timed too (µs per call): on a loaded
machine the turns' ratio moves by more than the check costs, so the target is judged on
two checks against the unchecked turn. Target: under 5% of a turn. Always exits 0.
"""

from __future__ import annotations

import os
import sys

# Run as a file, benchmarks/ is first on sys.path; keep it off (see benchmarks/http_load.py).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

from pactmw.store import SqliteStore, Store  # noqa: E402

TARGET = 0.05  # the check's share of a turn


class Unchecked(SqliteStore):
    """The store without the check: the baseline."""

    def _moved(self) -> str | None:
        return None


def store_turn(store: Store, now: float) -> None:
    """The store's part of one `message:send` turn: a new conversation and its reply."""
    message_id = uuid.uuid4().hex
    context_id = store.start_conversation(
        brand_id="acme",
        issuer="https://agent.example",
        sub="user-1",
        account=None,
        message_id=message_id,
        text="Where is my order A-1001?",
        now=now,
    )
    store.store_reply(
        context_id=context_id,
        message_id=message_id,
        reply_message_id=uuid.uuid4().hex,
        reply_text="You said: Where is my order A-1001?",
        reply=b'{"message": {}}',
        now=now,
    )


def turns_per_second(store: SqliteStore, seconds: float) -> float:
    count, now = 0, time.time()
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        store_turn(store, now)
        count += 1
    return count / (time.perf_counter() - start)


def check_us(store: SqliteStore, n: int = 100_000) -> float:
    """µs per check alone (the store's `_moved`, as a write calls it)."""
    check = store._moved
    start = time.perf_counter()
    for _ in range(n):
        check()
    return 1e6 * (time.perf_counter() - start) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per contender per round")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        stores = {
            "checked": SqliteStore(Path(tmp) / "checked.db"),
            "unchecked": Unchecked(Path(tmp) / "unchecked.db"),
        }
        rates: dict[str, list[float]] = {name: [] for name in stores}
        names = list(stores)
        try:
            for r in range(args.rounds):
                for name in names[r % 2 :] + names[: r % 2]:
                    rates[name].append(turns_per_second(stores[name], args.seconds))
            check = statistics.median(check_us(stores["checked"]) for _ in range(5))
        finally:
            for store in stores.values():
                store.close()
    checked, unchecked = (statistics.median(rates[n]) for n in names)
    # Two checks a turn (one per write), against the unchecked turn: measured apart, since on
    # a loaded machine the turns' ratio moves by more than the check costs.
    cost = 2 * check / (1e6 / unchecked)
    results = {
        "turns_per_s": {"checked": checked, "unchecked": unchecked},
        "us_per_turn": {"checked": 1e6 / checked, "unchecked": 1e6 / unchecked},
        "ratio_checked_to_unchecked": checked / unchecked,
        "check_us": check,
        "check_share_of_turn": cost,
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"checked   {checked:>8,.0f} turns/s ({1e6 / checked:.0f} µs/turn)\n"
        f"unchecked {unchecked:>8,.0f} turns/s ({1e6 / unchecked:.0f} µs/turn)\n"
        f"ratio checked/unchecked {checked / unchecked:.3f}; one check {check:.2f} µs, "
        f"{cost:.1%} of a turn (two writes)\n"
        f"check under {TARGET:.0%} of a turn: {'PASS' if cost < TARGET else 'MISS'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
