"""``ExecResult``: what one sandboxed execution produced, and its text for a model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ExecResult:
    """The outcome of ``Sandbox.run``.

    ``value`` is the ``repr()`` of the code's last expression (``None`` when the code does not end
    with an expression or the expression is ``None``). ``error`` is ``"ExceptionType: message"``
    followed by a traceback of the sandboxed code only, or a message naming the limit that stopped
    the run. ``limit`` names that limit: ``"wall_time"``, ``"cpu_time"``, ``"memory"``,
    ``"processes"`` or ``"output"`` (the output was cut; the code itself may have finished).
    """

    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    limit: str | None = None

    @property
    def ok(self) -> bool:
        """The code ran to its end without an exception and within every limit but output."""
        return self.error is None

    def to_text(self) -> str:
        """Labelled ``[stdout]``, ``[stderr]``, ``[value]``, ``[error]`` sections, empty ones left
        out; a short note when there is nothing at all."""
        sections = [
            ("stdout", self.stdout),
            ("stderr", self.stderr),
            ("value", self.value),
            ("error", self.error),
        ]
        text = "\n".join(f"[{label}]\n{body.rstrip(chr(10))}" for label, body in sections if body)
        return text or "(no output, no value, no error)"
