"""JSON logs: one object per line with the request id and run id of the code that logged.

``request_id`` is set by the request middleware (from ``X-Request-ID`` or generated) and
``run_id`` by :func:`bind_run`; both are context variables, so tasks started while handling a
request (a run, say) keep them. Enabled by ``TEAMGRAPH_JSON_LOGS=true``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any

from teamgraph.config import Settings

request_id_var: ContextVar[str | None] = ContextVar("teamgraph_request_id", default=None)
run_id_var: ContextVar[str | None] = ContextVar("teamgraph_run_id", default=None)

LOGGERS = ("teamgraph", "uvicorn.access")
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_TRUE = {"1", "true", "yes", "on"}


@contextmanager
def bind_run(run_id: str) -> Iterator[None]:
    """Tag every log line written inside the block (and tasks started in it) with ``run_id``."""
    token = run_id_var.set(run_id)
    try:
        yield
    finally:
        run_id_var.reset(token)


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "request_id"?, "run_id"?, ...extra}``."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, var in (("request_id", request_id_var), ("run_id", run_id_var)):
            value = getattr(record, key, None) or var.get()
            if value:
                data[key] = value
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            data.update(_access_fields(record.args))
        data.update({k: v for k, v in vars(record).items() if k not in _STANDARD and k not in data})
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def _access_fields(args: tuple[Any, ...]) -> dict[str, Any]:
    if len(args) != 5:
        return {}
    client, method, path, _version, status = args
    return {"client": client, "method": method, "path": path, "status": status}


def json_logs_enabled(settings: Settings) -> bool:
    """``settings.json_logs`` when that setting exists, else ``TEAMGRAPH_JSON_LOGS`` (off)."""
    value = getattr(settings, "json_logs", None)
    if isinstance(value, bool):
        return value
    return os.environ.get("TEAMGRAPH_JSON_LOGS", "").strip().lower() in _TRUE


@contextmanager
def json_logging(stream: IO[str] | None = None, level: int = logging.INFO) -> Iterator[None]:
    """Write the ``teamgraph`` and ``uvicorn.access`` loggers as JSON lines (to stderr) while
    the block runs, replacing their handlers; restore them afterwards."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.level, logger.propagate))
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, handlers, old_level, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(old_level)
