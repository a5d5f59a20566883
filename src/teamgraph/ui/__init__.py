"""The web workspace: static ES modules (no build step), served by ``teamgraph serve`` at ``/``.

The page talks only to the documented HTTP API. ``STATIC_DIR`` holds ``index.html``, ``app.css``
and ``js/`` (``runstate.js`` folds a run's events into the view state the panels draw)."""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"

__all__ = ["STATIC_DIR"]
