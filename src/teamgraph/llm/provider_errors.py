"""What a failed model call means: retry it, stop the run, or fail the step — and how to say so.

* **transient** — timeouts, 408, 409, 429, 5xx, connection errors: retried (``Retry-After``
  honoured); still failing after the retries, the run stops (:class:`ModelUnavailable`) and can
  be resumed once the provider is back;
* **access** — 401, 403, 404 (a key, a permission or a model name to fix): never retried, the run
  stops (:class:`ModelUnavailable`);
* **rejected** — any other 4xx (bad request, context too long, ...): never retried, the step
  fails (:class:`ModelCallFailed`).

Messages carry the provider's own words with anything that looks like a key removed.
"""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, Literal

from teamgraph.errors import ModelCallFailed, ModelUnavailable, TransientModelError

Kind = Literal["transient", "access", "rejected"]
MAX_RETRY_AFTER_S = 120.0  # a longer wait is not waited for: the run stops and resumes later

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
    "ReadError",
    "RemoteProtocolError",
}
_TRANSIENT_STATUS = {408, 409, 425, 429}
_ACCESS_STATUS = {401, 403, 404}
_KEYS = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|sk-ant-[A-Za-z0-9_\-*]+|[A-Za-z0-9_\-]{32,})")


def classify(exc: BaseException) -> Kind | None:
    """What kind of provider failure ``exc`` is; ``None`` when it is not a provider's."""
    if isinstance(exc, TransientModelError | TimeoutError | ConnectionError):
        return "transient"
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return "transient"
    status = status_code(exc)
    if status is None:
        return None
    if status in _TRANSIENT_STATUS or status >= 500:
        return "transient"
    return "access" if status in _ACCESS_STATUS else "rejected"


def is_transient(exc: BaseException) -> bool:
    """Timeouts, rate limits (429), server errors (5xx) and connection failures; nothing else."""
    return classify(exc) == "transient"


def status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        code = getattr(holder, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait (``retry-after-ms``, ``Retry-After`` in seconds or
    as an HTTP date), when it said."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        if value.strip().isdigit():
            return float(value)
        return max(0.0, parsedate_to_datetime(value).timestamp() - time())
    except (TypeError, ValueError):
        return None


def provider_message(exc: BaseException) -> str:
    """The provider's own explanation (its error body's message when there is one), keys
    removed."""
    body: Any = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    message = message or getattr(exc, "error", None) or str(exc) or type(exc).__name__
    return redact(str(message))


def redact(text: str) -> str:
    """``text`` with anything shaped like an API key replaced by ``[key removed]``."""
    return _KEYS.sub("[key removed]", text)


def translate(exc: BaseException, model: str, attempts: int) -> BaseException:
    """The error a run reports for a provider's failure (``exc`` itself when it is not one)."""
    kind = classify(exc)
    if kind is None:
        return exc
    status = status_code(exc)
    said = f"HTTP {status}: " if status is not None else f"{type(exc).__name__}: "
    said += provider_message(exc)
    if kind == "transient":
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        return ModelUnavailable(f"{model} still failing after {tries} ({said}); resume the run")
    if kind == "access":
        return ModelUnavailable(f"{model} refused access ({said}); fix it and resume the run")
    return ModelCallFailed(f"{model} rejected the request ({said})")
