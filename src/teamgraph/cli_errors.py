"""What the CLI says when a command fails: one line — what went wrong, where, what to do — and
an exit code; the traceback only with ``--debug`` (or ``TEAMGRAPH_DEBUG=1``). Imports nothing
heavy: the database drivers' errors are recognised by where their classes live."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from teamgraph.errors import RunNotFound, SpecError, TeamgraphError, UsageError

USAGE, FAILURE = 2, 1
_DRIVERS = ("sqlalchemy.", "asyncpg.", "psycopg", "sqlite3", "aiosqlite")
_URL_SECRET = re.compile(r"(://[^:/@\s]+):[^@\s]+@")


@dataclass(frozen=True)
class Failure:
    line: str
    code: int


def debugging() -> bool:
    return os.environ.get("TEAMGRAPH_DEBUG", "").lower() in ("1", "true", "yes")


def explain(exc: BaseException, database_url: str = "") -> Failure:
    """The one line and the exit code for ``exc`` (a spec's errors: one line each, all of them)."""
    if isinstance(exc, SpecError) and len(lines := str(exc).strip().splitlines()) > 1:
        listed = "\n".join(f"  {line}" for line in lines)
        return Failure(f"{len(lines)} errors in the team's spec:\n{listed}", USAGE)
    if isinstance(exc, TeamgraphError):  # an unknown run id is the caller's mistake too
        usage = isinstance(exc, UsageError | RunNotFound)
        return Failure(_first_line(exc), USAGE if usage else FAILURE)
    if _is_validation(exc):
        return Failure(f"invalid setting: {_validation_line(exc)}", USAGE)
    if _is_database(exc) and _is_sqlite(exc, database_url):
        where = f" {_sqlite_file(database_url)}" if database_url else ""
        return Failure(
            f"cannot use the database file{where}: {_first_line(exc)} — can this user read and "
            "write it and its folder? (choose another with --db or DATABASE_URL)",
            FAILURE,
        )
    if _is_database(exc):
        where = f" at {hide_password(database_url)}" if database_url else ""
        return Failure(
            f"cannot use the database{where}: {_first_line(exc)} — is it running and reachable? "
            "(choose another with --db or DATABASE_URL)",
            FAILURE,
        )
    if isinstance(exc, OSError) and exc.filename:
        return Failure(f"{exc.filename}: {exc.strerror or _first_line(exc)}", USAGE)
    if isinstance(exc, OSError):
        return Failure(_first_line(exc), FAILURE)
    return Failure(
        f"unexpected {type(exc).__name__}: {_first_line(exc)} (run with --debug for the traceback)",
        FAILURE,
    )


def hide_password(url: str) -> str:
    return _URL_SECRET.sub(r"\1:***@", url)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    line = text.splitlines()[0]
    if type(exc).__module__.startswith("sqlalchemy."):  # "(driver.Error) message" → message
        line = re.sub(r"^\([\w.]+\)\s*", "", line)
    return hide_password(line)


def _is_database(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith(_DRIVERS) or isinstance(seen, ConnectionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_sqlite(exc: BaseException, database_url: str) -> bool:
    """A SQLite file's error: by the URL when known, else by the driver that raised."""
    if database_url:
        return database_url.startswith("sqlite")
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith(("sqlite3", "aiosqlite")):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _sqlite_file(database_url: str) -> str:
    return re.sub(r"^sqlite(\+\w+)?:///", "", database_url)


def _is_validation(exc: BaseException) -> bool:
    return type(exc).__name__ == "ValidationError" and type(exc).__module__.startswith("pydantic")


def _validation_line(exc: BaseException) -> str:
    errors = exc.errors()  # type: ignore[attr-defined]
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or "value"
    value = first.get("input")
    shown = f" (got {value!r})" if isinstance(value, str | int | float) else ""
    more = f"; and {len(errors) - 1} more" if len(errors) > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{field}: {message}{shown}{more}"
