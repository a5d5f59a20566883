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

PAYMENTS_TEAM = """
name: payments
members:
  - name: clerk
    description: Charges customers' cards for orders
    tools: ["tests.counting_tools:charge_card"]
"""  # a team whose one member charges cards, each charge needing approval
PAYMENTS_REQUEST = "charge the card of customer 42"
