"""``python``: the LangChain tool that runs a model's Python code in teamgraph's sandbox."""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from teamgraph.sandbox import Sandbox, SandboxUnavailable

TOOL_NAME = "python"
TOOL_DESCRIPTION = (
    "Run Python code in an isolated sandbox (no network, no access outside a temporary working "
    "directory, CPU and memory limits); returns stdout, stderr, the value of the last "
    "expression and any error."
)


class PythonInput(BaseModel):
    """Arguments of the ``python`` tool."""

    code: str = Field(
        description="Python source to run; the value of a final expression is returned."
    )


def make_python_tool(sandbox: Sandbox | None = None) -> BaseTool:
    """Build the ``python`` tool over ``sandbox`` (a default ``Sandbox()`` when ``None``).

    The result is ``ExecResult.to_text()``. When isolation is unavailable the tool returns
    ``code execution refused: <reason>`` instead of raising, so the model sees why.
    """
    runner = sandbox if sandbox is not None else Sandbox()

    async def run_python(code: str) -> str:
        try:
            result = await runner.run(code)
        except SandboxUnavailable as exc:
            return f"code execution refused: {exc}"
        return result.to_text()

    return StructuredTool.from_function(
        coroutine=run_python,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=PythonInput,
    )
