"""OpenTelemetry traces of runs across processes: the API process that queues a run and the
worker that executes it record spans of one trace (the W3C ``traceparent`` rides in the job).

Off by default: without ``TEAMGRAPH_OTEL_EXPORTER`` the OpenTelemetry API is a no-op. ``console``
writes each finished span as one JSON line on stdout; ``otlp`` sends them to the collector named
by the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``pip install "teamgraph[otel]"``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace

from teamgraph.config import Settings
from teamgraph.errors import UsageError

_tracer = trace.get_tracer("teamgraph")


def configure(settings: Settings, role: str) -> None:
    """Install a tracer provider for this process (``role``: api, worker) if one is asked for."""
    exporter = settings.otel_exporter
    if not exporter:
        return
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
            SpanExporter,
        )
    except ImportError:
        raise UsageError('traces need extra packages: pip install "teamgraph[otel]"') from None
    provider = TracerProvider(resource=Resource.create({"service.name": f"teamgraph-{role}"}))
    if exporter == "console":
        console = ConsoleSpanExporter(out=sys.stdout, formatter=_one_line)
        provider.add_span_processor(SimpleSpanProcessor(console))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        otlp: SpanExporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(otlp))
    trace.set_tracer_provider(provider)


def carrier() -> dict[str, str]:
    """The current trace context, to hand to another process (``traceparent``)."""
    found: dict[str, str] = {}
    propagate.inject(found)
    return found


@contextmanager
def span(
    name: str, run_id: str, parent: Mapping[str, str] | None = None, **attributes: Any
) -> Iterator[None]:
    """A span about run ``run_id``, child of ``parent`` (a :func:`carrier` of another process)
    or of the current span."""
    context = propagate.extract(dict(parent)) if parent else None
    values = {"teamgraph.run_id": run_id, **{f"teamgraph.{k}": v for k, v in attributes.items()}}
    with _tracer.start_as_current_span(name, context=context, attributes=values):
        yield


def _one_line(finished: Any) -> str:
    """A finished span as one JSON line (the console exporter's own format spans many)."""
    context = finished.get_span_context()
    parent = finished.parent
    return (
        json.dumps(
            {
                "otel_span": finished.name,
                "service": finished.resource.attributes.get("service.name"),
                "trace_id": f"{context.trace_id:032x}",
                "span_id": f"{context.span_id:016x}",
                "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
                "duration_ms": (finished.end_time - finished.start_time) / 1e6,
                "attributes": dict(finished.attributes or {}),
            }
        )
        + "\n"
    )
