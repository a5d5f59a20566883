"""A tool that holds its run until the test releases it: a subprocess test can then act on a run
that is certainly in the middle of a step, however busy the machine (for signal tests)."""

import asyncio
import os

from langchain_core.tools import tool

from tests.helpers import PROCESS_CEILING_S


@tool
async def hold_until_released(reason: str) -> str:
    """Hold on until released, then say so."""
    released = os.environ["TG_RELEASE_FILE"]  # made by the test: no event crosses processes
    async with asyncio.timeout(PROCESS_CEILING_S):
        while not await asyncio.to_thread(os.path.exists, released):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return f"released: {reason}"


HELD_TEAM = """
name: held
members:
  - name: holder
    description: Holds on until released
    tools: ["tests.held_tools:hold_until_released"]
"""  # a team whose one member holds its step until the test releases it
HELD_REQUEST = "hold on until released"
