"""Agent kinds. ``function``: native tool calling (more kinds arrive with the agents issue)."""
