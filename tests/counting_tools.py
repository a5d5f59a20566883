"""A side-effecting tool that counts its executions in a file (for crash tests)."""

import os
from pathlib import Path

from langchain_core.tools import tool


@tool
def charge_card(customer: str) -> str:
    """Charge the customer's card for the order."""
    counter = Path(os.environ["TG_COUNTER_FILE"])
    with counter.open("a") as handle:
        handle.write(f"{customer}\n")
    return f"charged the card of customer {customer}"


charge_card.metadata = {"requires_approval": True}
