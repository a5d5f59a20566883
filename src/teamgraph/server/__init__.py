"""The HTTP service (FastAPI): a core — who calls, sessions, the run manager and its queue and
workers, operations — and the wire dialects as adapters on one seam
(:mod:`teamgraph.server.protocols`, :mod:`teamgraph.server.compat`)."""
