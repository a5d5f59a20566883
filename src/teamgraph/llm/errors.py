"""Which model errors are worth retrying."""

from __future__ import annotations

from teamgraph.errors import TransientModelError

_TRANSIENT_NAMES = {
    "APIConnectionError",
    "APITimeoutError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "OverloadedError",
    "TimeoutException",
    "ConnectTimeout",
    "ReadTimeout",
    "ConnectError",
    "RemoteProtocolError",
}


def is_transient(exc: BaseException) -> bool:
    """Timeouts, rate limits (429), server errors (5xx) and connection failures; nothing else."""
    if isinstance(exc, TransientModelError | TimeoutError | ConnectionError):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    status = _status_code(exc)
    return status is not None and (status == 429 or status >= 500)


def _status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        code = getattr(holder, "status_code", None)
        if isinstance(code, int):
            return code
    return None
