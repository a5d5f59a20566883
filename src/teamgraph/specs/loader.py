"""Load team specs from YAML (or dicts) with errors that name the file, the field and the value.

Every error of a file is reported at once, each at its line and column (``team.yaml:4:1:
memebers: unknown field (did you mean 'members'?)``), unknown fields first: a misspelt field is
usually why another one is missing. YAML syntax errors keep their line and column too.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from teamgraph.errors import SpecError
from teamgraph.specs import team as team_models
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.builtin import BUILTIN_WORKERS
from teamgraph.specs.team import TeamSpec

Loc = tuple[int | str, ...]
Marks = dict[Loc, tuple[int, int]]  # where each key and item of a YAML file starts (1-based)


def load_team_file(path: str | Path, known_tools: Collection[str] | None = None) -> TeamSpec:
    """Read a team YAML file; relative ``knowledge`` paths resolve against the file's folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: file not found") from None
    try:
        raw = yaml.safe_load(text)
        marks = _marks(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        raise SpecError(_yaml_error(path, exc)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    data = _resolve_paths(dict(raw), path.parent)
    return team_from_dict(data, source=str(path), known_tools=known_tools, marks=marks)


def team_from_dict(
    data: Mapping[str, Any],
    source: str = "<dict>",
    known_tools: Collection[str] | None = None,
    marks: Marks | None = None,
) -> TeamSpec:
    """Validate a team mapping. Members may be built-in names or partial overrides of them.
    Raises :class:`SpecError` listing every error (one per line), unknown fields first."""
    data = dict(data)
    problems: list[tuple[Loc, str]] = []
    if "members" in data:
        data["members"] = _expand_members(data["members"], (), problems)
    try:
        team = TeamSpec.model_validate(data)
    except ValidationError as exc:
        problems += _problems(exc)
        team = None
    if team is not None and known_tools is not None:
        problems += _tool_problems(team, known_tools, ())
    if problems:
        raise SpecError(_report(problems, source, marks or {}))
    assert team is not None
    return team


def check_tools(team: TeamSpec, known_tools: Collection[str], source: str = "<team>") -> None:
    """Raise :class:`SpecError` naming every tool no registry provides (nested teams too)."""
    problems = _tool_problems(team, known_tools, ())
    if problems:
        raise SpecError(_report(problems, source, {}))


def _tool_problems(team: TeamSpec, known_tools: Collection[str], at: Loc) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    for i, member in enumerate(team.members):
        if isinstance(member, TeamSpec):
            problems += _tool_problems(member, known_tools, (*at, "members", i))
            continue
        for j, tool in enumerate(member.tools):
            if tool not in known_tools and ":" not in tool:
                problems.append(
                    (
                        (*at, "members", i, "tools", j),
                        f"unknown tool {tool!r} (available: {', '.join(sorted(known_tools))})",
                    )
                )
    return problems


def _expand_members(members: Any, at: Loc, problems: list[tuple[Loc, str]]) -> Any:
    if not isinstance(members, list):
        return members  # let pydantic report the type error
    expanded: list[Any] = []
    for i, member in enumerate(members):
        if isinstance(member, Mapping) and "members" in member:  # a nested team
            inner = _expand_members(member["members"], (*at, "members", i), problems)
            expanded.append({**member, "members": inner})
        elif isinstance(member, str):
            if member not in BUILTIN_WORKERS:
                near = difflib.get_close_matches(member, BUILTIN_WORKERS, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                problems.append(
                    (
                        (*at, "members", i),
                        f"unknown worker {member!r} ({hint}built-in workers: "
                        f"{', '.join(sorted(BUILTIN_WORKERS))})",
                    )
                )
                # stands in for it, so that the rest of the file is checked too
                expanded.append({"name": f"unknown-{i}", "description": "unknown"})
                continue
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


def _problems(exc: ValidationError) -> list[tuple[Loc, str]]:
    """(where, what) of each validation error, the field's name not repeated."""
    problems: list[tuple[Loc, str]] = []
    for err in exc.errors():
        loc = _clean_loc(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            near = difflib.get_close_matches(loc[-1], _FIELDS, n=1, cutoff=0.7)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append((loc, f"unknown field{hint}"))
        elif not loc or err["type"] == "missing":  # a cross-field rule names field and value
            problems.append((loc, message))
        else:
            problems.append((loc, f"{message} (got {_short(err.get('input'))})"))
    return problems


def _report(problems: list[tuple[Loc, str]], source: str, marks: Marks) -> str:
    """One line per problem, ``source[:line:column]: field: message``; unknown fields first."""
    placed = [(loc, message, _mark_of(loc, marks)) for loc, message in problems]
    placed.sort(key=lambda p: (not p[1].startswith("unknown field"), p[2] or (0, 0)))
    lines = []
    for loc, message, mark in placed:
        where = f"{source}:{mark[0]}:{mark[1]}" if mark else source
        field = _loc(loc)
        lines.append(f"{where}: {field}: {message}" if field else f"{where}: {message}")
    return "\n".join(dict.fromkeys(lines))


def _mark_of(loc: Loc, marks: Marks) -> tuple[int, int] | None:
    """Where the field at ``loc`` is written, or its nearest enclosing field (a missing field:
    the mapping it is missing from)."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in marks:
            return marks[loc[:end]]
    return None


def _marks(node: yaml.Node | None, at: Loc = ()) -> Marks:
    """The line and column (1-based) of every key and list item of a composed YAML document."""
    if node is None:
        return {}
    marks: Marks = {at: (node.start_mark.line + 1, node.start_mark.column + 1)}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                inner = _marks(value, (*at, key.value))
                inner[(*at, key.value)] = (key.start_mark.line + 1, key.start_mark.column + 1)
                marks.update(inner)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            marks.update(_marks(item, (*at, i)))
    return marks


def _yaml_error(path: Path, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    what = " ".join(x for x in (exc.context, exc.problem) if x) or str(exc)
    return f"{where}: not valid YAML: {what}"


def _clean_loc(loc: tuple[int | str, ...]) -> Loc:
    """``loc`` without the tags of the agent-or-team union."""
    out: list[int | str] = []
    previous: int | str | None = None
    for part in loc:
        if part in ("agent", "team") and isinstance(previous, int):
            continue
        previous = part
        out.append(part)
    return tuple(out)


def _model_fields() -> list[str]:
    models = [AgentSpec, *vars(team_models).values()]
    names = {
        name
        for model in models
        if isinstance(model, type) and issubclass(model, BaseModel) and model is not BaseModel
        for name in model.model_fields
    }
    return sorted(names)


_FIELDS = _model_fields()


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
