"""``import teamgraph`` stays light: the heavy libraries load when a team is built or run."""

from __future__ import annotations

import importlib
import subprocess
import sys

HEAVY = ("langgraph", "langchain_core", "sqlalchemy", "fastapi", "httpx")


def _loaded_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in out.stdout.split()}


def test_importing_the_package_or_its_errors_loads_no_heavy_library() -> None:
    for statement in ("import teamgraph", "from teamgraph.errors import UsageError"):
        assert not _loaded_after(statement) & set(HEAVY), statement


def test_public_names_still_resolve_on_first_use() -> None:
    loaded = _loaded_after("import teamgraph\nteamgraph.Team")
    assert {"langgraph", "langchain_core"} <= loaded
    import teamgraph

    assert teamgraph.RunConflict.__module__ == "teamgraph.errors"
    assert "Team" in dir(teamgraph)


def test_every_public_name_has_one_home() -> None:
    import teamgraph

    homes = teamgraph._HOME_OF
    assert sorted(homes) == teamgraph.__all__
    for name, home in homes.items():
        assert getattr(teamgraph, name) is getattr(importlib.import_module(home), name)
