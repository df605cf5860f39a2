"""`message:send` bookkeeping throughput of the stores: what one new turn costs in the store.

Run:  .venv/bin/python benchmarks/store.py [--seconds S] [--rounds R] [--threads N] [--json]

One turn is what the Provider does around the bot for a `message:send` without contextId:
`start_conversation` (create and claim in one transaction) + `store_reply`: two write
transactions (before issue 16 it was create + claim + history + reply, three and a read),
with the same sizes as the echo bot's turn. Contenders, each on 1 thread and
on N threads (default 4) sharing one store object (as the worker threads of one server do):

  memory            MemoryStore: the floor (no I/O), for reference
  sqlite            SqliteStore on a fresh file on the local disk, its defaults (WAL,
                    synchronous=NORMAL: flushed at checkpoints, not at every commit)
  postgres          PostgresStore on tests/support/pg.py's throwaway server (fsync,
                    synchronous_commit and full_page_writes off: commits are not flushed)
  postgres-durable  the same on a second server with fsync, synchronous_commit and
                    full_page_writes on (PostgreSQL's defaults)

The contenders run interleaved: R rounds (default 10), in each every contender runs S seconds
(default 1), the order rotating from round to round; the figure is the median over rounds.
turns/s counts whole turns per wall-clock second; µs/turn = 1e6 ÷ turns/s; "latency" is the
mean time one thread spends on one turn (threads × wall time ÷ turns). On one thread the
columns start/reply give each operation's mean µs. PostgreSQL contenders are
skipped, with a note, when its server binaries are not installed. Always exits 0.
"""

from __future__ import annotations

import os
import sys

# Run as a file, benchmarks/ is first on sys.path; keep it off (see benchmarks/http_load.py) and
# put the repository root on, for tests.support.pg.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
REPO = os.path.dirname(_HERE)
sys.path.insert(0, REPO)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from pactmw.core.encoding import json_dumps  # noqa: E402
from pactmw.store import MemoryStore, SqliteStore, Store  # noqa: E402

ISSUER = "https://agent.example"
BRAND = "acme"
TEXT = "Where is my order A-1001?"
REPLY_TEXT = f"You said: {TEXT}"
OPS = ("start", "reply")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Contender:
    name: str
    backend: str
    store: Store
    threads: int
    rates: list[float] = field(default_factory=list)  # turns/s, one per round
    latencies: list[float] = field(default_factory=list)  # µs a thread spends per turn
    op_us: list[dict[str, float]] = field(default_factory=list)  # 1 thread: µs per operation


def one_turn(store: Store, sub: str, timings: list[float] | None) -> None:
    """One new turn's bookkeeping, as `Provider._send` does it (no contextId, no delegation)."""
    perf = time.perf_counter
    now = time.time()
    t0 = perf()
    message_id = uuid.uuid4().hex
    context_id = store.start_conversation(
        brand_id=BRAND,
        issuer=ISSUER,
        sub=sub,
        account=None,
        message_id=message_id,
        text=TEXT,
        now=now,
    )
    t1 = perf()
    reply_id = str(uuid.uuid4())
    body = json_dumps(
        {
            "message": {
                "messageId": reply_id,
                "contextId": context_id,
                "role": "ROLE_AGENT",
                "parts": [{"text": REPLY_TEXT}],
            }
        }
    )
    store.store_reply(
        context_id=context_id,
        message_id=message_id,
        reply_message_id=reply_id,
        reply_text=REPLY_TEXT,
        reply=body,
        now=now,
    )
    t2 = perf()
    if timings is not None:
        timings[0] += t1 - t0
        timings[1] += t2 - t1


def run(contender: Contender, seconds: float) -> None:
    """Run turns on `contender.threads` threads for about `seconds`; record the round."""
    n = contender.threads
    counts = [0] * n
    timings = [0.0] * len(OPS)
    barrier = threading.Barrier(n + 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        sub = f"user-{index:04d}"
        own = timings if n == 1 else None
        barrier.wait()
        try:
            while not stop.is_set():
                one_turn(contender.store, sub, own)
                counts[index] += 1
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    total = sum(counts)
    contender.rates.append(total / elapsed)
    contender.latencies.append(1e6 * n * elapsed / total)
    if n == 1:
        contender.op_us.append({op: 1e6 * t / total for op, t in zip(OPS, timings, strict=True)})


def make_durable(server: Any) -> list[str]:
    """Restart a tests/support/pg.py server with PostgreSQL's durable defaults; return the settings.

    tests/support/pg.py passes fsync, synchronous_commit and full_page_writes = off on the command
    line, which outranks ALTER SYSTEM, so the server is restarted without them (same data
    directory, port and socket directory; tests/support/pg.py still stops and removes it).
    """
    import psycopg
    from tests.support.pg import find_postgres_bindir

    base = server.data_dir.parent
    options = f"-h 127.0.0.1 -p {server.port} -k {base} -c max_connections=300"
    command = [
        str(find_postgres_bindir() / "pg_ctl"),
        "-D",
        str(server.data_dir),
        "-l",
        str(base / "server.log"),
        "-o",
        options,
        "-m",
        "fast",
        "-w",
        "restart",
    ]
    if os.geteuid() == 0:  # PostgreSQL refuses root; tests/support/pg.py runs it as `postgres`
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, capture_output=True, cwd=base, timeout=60)
    with psycopg.connect(server.dsn) as conn:
        return [
            str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        ]


@contextlib.contextmanager
def postgres_servers(wanted: bool) -> Iterator[tuple[dict[str, str], list[str]]]:
    """DSNs of the fast (test settings) and the durable server; notes for what is missing."""
    if not wanted:
        yield {}, []
        return
    from tests.support.pg import PostgresNotFound, postgres_server

    try:
        with (
            postgres_server(dbname="pactmw_bench") as fast,
            postgres_server(dbname="pactmw_bench") as durable,
        ):
            shown = make_durable(durable)
            notes = [] if shown == ["on"] * 3 else [f"postgres-durable settings: {shown}"]
            yield {"postgres": fast.dsn, "postgres-durable": durable.dsn}, notes
    except PostgresNotFound as exc:
        yield {}, [f"PostgreSQL: SKIPPED ({exc})"]


def build(
    tmp: Path, dsns: dict[str, str], threads: int, backends: list[str]
) -> tuple[list[Contender], list[Callable[[], None]]]:
    contenders: list[Contender] = []
    closers: list[Callable[[], None]] = []
    for backend in backends:
        if backend.startswith("postgres") and backend not in dsns:
            continue
        for n in sorted({1, threads}):
            store: Store
            if backend == "memory":
                store = MemoryStore()
            elif backend == "sqlite":
                store = SqliteStore(tmp / f"bench-{n}.db")
            else:
                from pactmw.store.postgres import PostgresStore

                store = PostgresStore(dsns[backend], max_connections=max(10, threads))
            closers.append(store.close)
            label = f"{backend} ×{n}" if n > 1 else backend
            contenders.append(Contender(label, backend, store, n))
    return contenders, closers


def summarize(contenders: list[Contender]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in contenders:
        med = statistics.median(c.rates)
        row: dict[str, Any] = {
            "backend": c.backend,
            "threads": c.threads,
            "turns_per_s": med,
            "us_per_turn": 1e6 / med,
            "latency_us": statistics.median(c.latencies),
            "spread_pct": 100 * (max(c.rates) - min(c.rates)) / med,
            "rounds_turns_per_s": c.rates,
        }
        if c.op_us:
            row["op_us"] = {op: statistics.median(r[op] for r in c.op_us) for op in OPS}
        out[c.name] = row
    return out


def print_table(results: dict[str, Any]) -> None:
    print(
        f"\n  {'contender':<20} {'turns/s':>8} {'µs/turn':>8} {'latency':>8}"
        f" {'start':>7} {'reply':>7} {'spread':>6}"
    )
    for name, row in results.items():
        ops = row.get("op_us")
        cols = (
            " ".join(f"{ops[op]:>7.0f}" for op in OPS) if ops else " ".join(f"{'':>7}" for _ in OPS)
        )
        print(
            f"  {name:<20} {row['turns_per_s']:>8,.0f} {row['us_per_turn']:>8.0f}"
            f" {row['latency_us']:>8.0f} {cols} {row['spread_pct']:>5.0f}%"
        )


def summary_lines(results: dict[str, Any], threads: int) -> list[str]:
    lines = []
    for backend in ("sqlite", "postgres", "postgres-durable"):
        one = results.get(backend)
        many = results.get(f"{backend} ×{threads}")
        if one is None:
            continue
        text = (
            f"{backend}: {one['turns_per_s']:,.0f} turns/s on 1 thread"
            f" ({one['us_per_turn']:.0f} µs/turn)"
        )
        if many is not None:
            text += (
                f", {many['turns_per_s']:,.0f} turns/s on {threads} threads"
                f" ({many['turns_per_s'] / one['turns_per_s']:.2f}× one thread)"
            )
        lines.append(text + " (documented)")
    return lines


def environment(tmp: Path) -> dict[str, Any]:
    probe = sqlite3.connect(tmp / "probe.db")
    try:
        synchronous = probe.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        probe.close()
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
            synchronous, str(synchronous)
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="seconds per contender per round (default 1)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument(
        "--threads", type=int, default=4, help="threads of the multi-thread runs (default 4)"
    )
    parser.add_argument(
        "--backends",
        default="memory,sqlite,postgres,postgres-durable",
        help="comma-separated subset of memory,sqlite,postgres,postgres-durable",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)
    known = ("memory", "sqlite", "postgres", "postgres-durable")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - set(known):
        parser.error(f"--backends takes a subset of {','.join(known)}")
    if args.seconds <= 0 or args.rounds < 1 or args.threads < 1:
        parser.error("need --seconds > 0, --rounds >= 1, --threads >= 1")

    started = time.perf_counter()
    wants_pg = any(b.startswith("postgres") for b in backends)
    with (
        tempfile.TemporaryDirectory(prefix="pactmw-bench-store-") as tmp_name,
        postgres_servers(wants_pg) as (dsns, notes),
    ):
        tmp = Path(tmp_name)
        env = environment(tmp)
        if not args.json:
            print(
                f"Python {env['python']} ({env['machine']}, {env['cpus']} CPUs);"
                f" sqlite {env['sqlite']} (WAL, synchronous={env['sqlite_synchronous']})"
            )
            print(
                f"{args.rounds} interleaved rounds × {args.seconds:g} s per contender;"
                " median per contender; one turn = start_conversation + store_reply"
            )
            sys.stdout.flush()
        contenders, closers = build(tmp, dsns, args.threads, backends)
        try:
            for c in contenders:  # warm-up: schema, connections, caches
                run(c, min(0.3, args.seconds))
                c.rates.clear()
                c.latencies.clear()
                c.op_us.clear()
            _log(f"{len(contenders)} contenders × {args.rounds} rounds × {args.seconds:g} s")
            for r in range(args.rounds):
                shift = r % len(contenders)
                for c in contenders[shift:] + contenders[:shift]:
                    run(c, args.seconds)
                _log(f"round {r + 1}/{args.rounds} done")
        finally:
            for close in closers:
                close()
        results = summarize(contenders)
    lines = summary_lines(results, args.threads) + notes
    elapsed = time.perf_counter() - started
    if args.json:
        out = {
            "environment": env,
            "config": {
                "seconds_per_contender_per_round": args.seconds,
                "rounds": args.rounds,
                "threads": args.threads,
                "backends": backends,
            },
            "results": results,
            "notes": notes,
            "elapsed_s": elapsed,
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print_table(results)
        print()
        for line in lines:
            print(line)
        print(f"\n(total {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
