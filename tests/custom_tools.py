"""Plain functions referenced from YAML as ``tests.custom_tools:<name>``."""

from langchain_core.tools import tool


def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@tool
def launch(target: str) -> str:
    """Launch something (marked as requiring approval)."""
    raise AssertionError("must not run without approval")


launch.metadata = {"requires_approval": True}
