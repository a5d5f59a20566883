"""Tools of the browser tests' teams (imported by the server as ``tests.ui.ui_tools:<name>``)."""

from langchain_core.tools import tool


@tool
def delete_record(record_id: str) -> str:
    """Delete a record from the records database."""
    return f"deleted record {record_id}"
