"""Fake model providers for tests: real wire protocols on 127.0.0.1, scripted replies."""

from .brain import sending_briefs
from .model import Fail, Hang, Refuse, Reset, Say
from .server import FakeProvider, Served

__all__ = ["Fail", "FakeProvider", "Hang", "Refuse", "Reset", "Say", "Served", "sending_briefs"]
