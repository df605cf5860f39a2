"""What the PostgreSQL store's operation deadline (its watchdog) costs a `message:send` turn.

Run:  .venv/bin/python benchmarks/pg_watchdog.py [--seconds S] [--rounds R] [--threads N] [--json]

Each `PostgresStore` operation arms a deadline (`operation_timeout`) on its connection and
disarms it when done: one lock and one dict entry each way, and one thread per store that
cuts a connection past its deadline (store/_watchdog.py). A turn is the two writes of a new
`message:send` (`start_conversation` + `store_reply`), on 1 thread and on N threads (default
4) sharing the store, as a server's worker threads do. Contenders are the store as shipped
and the same store with arming and disarming taken out, on tests/support/pg.py's throwaway
server, a database each. R rounds (default 10) of S seconds (default 1) each, interleaved,
the order rotating; the figures are medians. Arming and disarming alone are timed too (µs
per operation): on a loaded machine the turns' ratio moves by more than they cost, so the
target is judged on two of them against the unwatched turn. Target: under 2% of a turn.
PostgreSQL's server binaries must be installed. Always exits 0.
"""

from __future__ import annotations

import os
import sys

# Run as a file, benchmarks/ is first on sys.path; keep it off (see benchmarks/http_load.py) and
# put the repository root on, for tests.support.pg.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks.sqlite_moved import store_turn  # noqa: E402
from tests.support.pg import postgres_server  # noqa: E402

from pactmw.store._watchdog import Watch, Watchdog  # noqa: E402
from pactmw.store.postgres import PostgresStore  # noqa: E402

TARGET = 0.02  # the deadline's share of a turn


class _NoWatchdog(Watchdog):
    """Arms nothing: the baseline."""

    def _arm(self, watch: Watch) -> None:
        pass

    def _disarm(self, watch: Watch) -> None:
        pass


class Unwatched(PostgresStore):
    """The store without its operation deadline."""

    def __init__(self, dsn: str, **options: Any) -> None:
        super().__init__(dsn, **options)
        self._watchdog = _NoWatchdog(self._watchdog.timeout)


def _turns(store: PostgresStore, until: float) -> int:
    count, now = 0, time.time()
    while time.perf_counter() < until:
        store_turn(store, now)
        count += 1
    return count


def turns_per_second(store: PostgresStore, seconds: float, threads: int) -> float:
    counts = [0] * threads
    start = time.perf_counter()
    until = start + seconds

    def run(i: int) -> None:
        counts[i] = _turns(store, until)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - start)


class _Idle:
    """A connection stand-in for timing arm and disarm alone (never cut: far from due)."""

    def fileno(self) -> int:
        return -1


def arm_disarm_us(n: int = 100_000) -> float:
    """µs per arm + disarm alone (one operation's share), the watchdog's thread running."""
    dog = Watchdog(60.0)
    watch = dog.watch(_Idle())
    start = time.perf_counter()
    for _ in range(n):
        with watch:
            pass
    return 1e6 * (time.perf_counter() - start) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per contender per round")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=4, help="threads of the shared store")
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)
    shapes = [1, args.threads]
    with postgres_server() as server:
        stores: dict[str, PostgresStore] = {
            "watched": PostgresStore(server.create_database()),
            "unwatched": Unwatched(server.create_database()),
        }
        names = list(stores)
        rates: dict[tuple[str, int], list[float]] = {(n, t): [] for n in names for t in shapes}
        try:
            for store in stores.values():
                turns_per_second(store, 0.2, 1)  # migrate, open the connections
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
                for threads in shapes:
                    for name in names[r % 2 :] + names[: r % 2]:
                        rates[name, threads].append(
                            turns_per_second(stores[name], args.seconds, threads)
                        )
            pair = statistics.median(arm_disarm_us() for _ in range(5))
        finally:
            for store in stores.values():
                store.close()
    results: dict[str, Any] = {"arm_disarm_us": pair, "threads": {}}
    lines = []
    for threads in shapes:
        watched, unwatched = (statistics.median(rates[n, threads]) for n in names)
        # Two operations a turn, against the unwatched turn: measured apart, since on a
        # loaded machine the turns' ratio moves by more than arming costs.
        share = 2 * pair / (1e6 * threads / unwatched)
        results["threads"][str(threads)] = {
            "turns_per_s": {"watched": watched, "unwatched": unwatched},
            "ratio_watched_to_unwatched": watched / unwatched,
            "deadline_share_of_turn": share,
        }
        lines.append(
            f"{threads} thread(s): watched {watched:>7,.0f} turns/s, unwatched "
            f"{unwatched:>7,.0f} turns/s, ratio {watched / unwatched:.3f}; "
            f"deadline {share:.2%} of a turn"
        )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    worst = max(r["deadline_share_of_turn"] for r in results["threads"].values())
    print(
        "\n".join(lines) + f"\narm + disarm {pair:.2f} µs per operation\n"
        f"deadline under {TARGET:.0%} of a turn: {'PASS' if worst < TARGET else 'MISS'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
