"""Orchestration patterns; each module's ``build(team, ...)`` returns a compiled LangGraph graph."""
