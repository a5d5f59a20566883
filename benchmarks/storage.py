"""Storage benchmark: bytes on disk per finished run, table by table, on SQLite and PostgreSQL.

The 4-step offline team of ``benchmarks/server.py`` (``a`` → ``b``, ``c`` → ``d``) runs
``--runs`` times through the real server (``POST …/runs``, its event stream followed to its
end; one session per run, as a chat client makes them), on a fresh SQLite file and a fresh
PostgreSQL database. Once the server has stopped, every table's bytes are divided by the
number of runs:

* SQLite: ``dbstat``'s bytes in use per table, its indexes included (page bytes minus unused
  bytes), then the file's size after ``PRAGMA incremental_vacuum``;
* PostgreSQL: ``pg_total_relation_size`` (heap, indexes, TOAST) after ``VACUUM FULL``.

A finished run is compacted when it ends (docs/deploy.md, "Bytes per run"): the target is
≤ 40 KB per run. Tables of the server's own (users, API keys, rate limits, the queue's) are
left out: they do not grow with runs. Run ``python benchmarks/storage.py`` (about a minute)
or ``--quick``; ``--no-postgres`` for SQLite only; ``--whole`` with compaction off (what a run
kept before it).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server import (  # the benchmark next to this one
    Api,
    BenchmarkError,
    Server,
    server_settings,
    throughput,
    write_team,
)

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
TARGET_KB = 40.0
SKIPPED = ("users", "api_keys", "rate_limits", "alembic_version", "sqlite_schema")


async def run_many(
    database_url: str, root: Path, runs: int, concurrency: int, compact: bool = True
) -> None:
    """``runs`` runs of the 4-step team through a server on ``database_url``."""
    teams = write_team(root)
    settings = server_settings(root, teams, database_url).model_copy(
        update={"compact_runs": compact}
    )
    server = Server(settings, root)
    try:
        await server.wait_ready()
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            api = await Api.login(http)
            sessions = [await api.session() for _ in range(runs)]
            await throughput(lambda i: api.run(sessions[i]), runs, concurrency)
    except BenchmarkError as exc:
        raise BenchmarkError(f"{exc}\n{server.log_tail()}") from None
    finally:
        server.stop()


def sqlite_bytes(path: Path) -> tuple[dict[str, int], int]:
    """Bytes in use per table (its indexes included) and the file's size once vacuumed."""
    with sqlite3.connect(path) as conn:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_schema"))
        used: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize - unused) FROM dbstat GROUP BY 1"):
            table = owner.get(name, name)
            if not table.startswith(SKIPPED) and "_migrations" not in table:
                used[table] = used.get(table, 0) + int(size)
        conn.execute("PRAGMA incremental_vacuum")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return used, path.stat().st_size


def postgres_bytes(url: str) -> dict[str, int]:
    """``pg_total_relation_size`` of every table in the public schema, after ``VACUUM FULL``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM FULL")
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
    return {
        str(name): int(size)
        for name, size in rows
        if not str(name).startswith((*SKIPPED, "procrastinate", "store_vectors"))
        and "_migrations" not in str(name)
    }


def report(label: str, tables: dict[str, int], runs: int, extra: str = "") -> float:
    total = sum(tables.values()) / runs / 1024
    print(f"{label}: {total:.1f} KB per run (target ≤ {TARGET_KB:.0f} KB){extra}")
    for name, size in sorted(tables.items(), key=lambda item: -item[1]):
        if size / runs >= 10:  # bytes: the empty tables' pages left out
            print(f"  {name:<18} {size / runs / 1024:8.2f} KB")
    return total


async def benchmark(args: argparse.Namespace) -> int:
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="teamgraph-storage-") as tmp:
        root = Path(tmp) / "sqlite"
        root.mkdir()
        url = f"sqlite:///{root}/server.db"
        await run_many(url, root, args.runs, args.concurrency, args.compact)
        used, file_size = sqlite_bytes(root / "server.db")
        extra = f"; file {file_size / args.runs / 1024:.1f} KB per run after incremental vacuum"
        worst = max(worst, report("sqlite", used, args.runs, extra))
        if args.postgres:
            import psycopg

            name = f"tg_storage_{uuid.uuid4().hex[:8]}"
            url = args.admin_url.rsplit("/", 1)[0] + "/" + name
            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            try:
                root = Path(tmp) / "postgres"
                root.mkdir()
                await run_many(url, root, args.runs, args.concurrency, args.compact)
                worst = max(worst, report("postgres", postgres_bytes(url), args.runs))
            finally:
                with psycopg.connect(args.admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0 if worst <= TARGET_KB or not args.check else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--admin-url", default=ADMIN, help="A PostgreSQL database to create from.")
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    parser.add_argument("--check", action="store_true", help="exit 1 above the target")
    parser.add_argument(
        "--whole",
        dest="compact",
        action="store_false",
        help="finished runs keep everything (TEAMGRAPH_COMPACT_RUNS=false): the bytes before",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 20
    try:
        return asyncio.run(benchmark(args))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
