"""The HTTP service: a thin delivery layer over the runner (FastAPI)."""
