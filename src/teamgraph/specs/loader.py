"""Load team specs from YAML (or dicts) with errors that name the file, the field and the value."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from teamgraph.errors import SpecError
from teamgraph.specs.builtin import BUILTIN_WORKERS
from teamgraph.specs.team import TeamSpec


def load_team_file(path: str | Path, known_tools: Collection[str] | None = None) -> TeamSpec:
    """Read a team YAML file; relative ``knowledge`` paths resolve against the file's folder."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    data = _resolve_paths(dict(raw), path.parent)
    return team_from_dict(data, source=str(path), known_tools=known_tools)


def team_from_dict(
    data: Mapping[str, Any], source: str = "<dict>", known_tools: Collection[str] | None = None
) -> TeamSpec:
    """Validate a team mapping. Members may be built-in names or partial overrides of them."""
    data = dict(data)
    data["members"] = _expand_members(data.get("members"), source)
    try:
        team = TeamSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format(exc, source)) from None
    if known_tools is not None:
        check_tools(team, known_tools, source)
    return team


def check_tools(team: TeamSpec, known_tools: Collection[str], source: str = "<team>") -> None:
    """Raise :class:`SpecError` for the first tool name no registry provides (nested teams too)."""
    for i, member in enumerate(team.members):
        if isinstance(member, TeamSpec):
            check_tools(member, known_tools, f"{source}: members[{i}]")
            continue
        for j, tool in enumerate(member.tools):
            if tool not in known_tools and ":" not in tool:
                raise SpecError(
                    f"{source}: members[{i}].tools[{j}]: unknown tool {tool!r} "
                    f"(available: {', '.join(sorted(known_tools))})"
                )


def _expand_members(members: Any, source: str) -> Any:
    if not isinstance(members, list):
        return members  # let pydantic report the type error
    expanded: list[Any] = []
    for i, member in enumerate(members):
        if isinstance(member, Mapping) and "members" in member:  # a nested team
            expanded.append({**member, "members": _expand_members(member["members"], source)})
        elif isinstance(member, str):
            if member not in BUILTIN_WORKERS:
                raise SpecError(
                    f"{source}: members[{i}]: unknown worker {member!r} "
                    f"(built-in workers: {', '.join(sorted(BUILTIN_WORKERS))})"
                )
            expanded.append(BUILTIN_WORKERS[member].model_dump())
        elif isinstance(member, Mapping) and member.get("name") in BUILTIN_WORKERS:
            expanded.append({**BUILTIN_WORKERS[member["name"]].model_dump(), **member})
        else:
            expanded.append(member)
    return expanded


def _resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make ``knowledge`` and ``workflow.templates_dirs`` relative to the YAML file, in nested
    teams too."""
    if isinstance(data.get("knowledge"), list):
        data["knowledge"] = [_resolve(base, p) for p in data["knowledge"]]
    workflow = data.get("workflow")
    if isinstance(workflow, Mapping) and isinstance(workflow.get("templates_dirs"), list):
        dirs = [_resolve(base, p) for p in workflow["templates_dirs"]]
        data["workflow"] = {**workflow, "templates_dirs": dirs}
    if isinstance(data.get("members"), list):
        data["members"] = [
            _resolve_paths(dict(m), base) if isinstance(m, Mapping) and "members" in m else m
            for m in data["members"]
        ]
    return data


def _resolve(base: Path, value: Any) -> Any:
    if isinstance(value, str) and not Path(value).is_absolute():
        return str((base / value).resolve())
    return value


def _format(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        field = _loc(err["loc"])
        value = err.get("input")
        message = err["msg"].removeprefix("Value error, ")
        if not field:  # a cross-field rule; its message names the field and value itself
            lines.append(f"{source}: {message}")
            continue
        shown = "" if err["type"] == "missing" else f" (got {_short(value)})"
        lines.append(f"{source}: {field}: {message}{shown}")
    return "\n".join(lines)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        if part in ("agent", "team") and isinstance(previous, int):
            continue  # the tag of the agent-or-team union, not a field
        previous = part
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
