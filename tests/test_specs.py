from __future__ import annotations

import re
from pathlib import Path

import pytest

from teamgraph import AgentSpec, SpecError, Team, TeamSpec
from teamgraph.specs.builtin import BUILTIN_WORKERS
from teamgraph.specs.loader import load_team_file, team_from_dict

TOOLS = ["search_docs"]


def _err(data: dict, source: str = "team.yaml") -> str:
    with pytest.raises(SpecError) as info:
        team_from_dict(data, source=source, known_tools=TOOLS)
    return str(info.value)


def test_builtin_workers_have_descriptions_and_instructions() -> None:
    assert set(BUILTIN_WORKERS) == {"researcher", "coder", "analyst", "writer", "critic"}
    for spec in BUILTIN_WORKERS.values():
        assert spec.description and spec.instructions


def test_builtin_worker_fields_can_be_overridden() -> None:
    team = team_from_dict({"name": "t", "members": [{"name": "writer", "instructions": "Haiku."}]})
    writer = team.member("writer")
    assert writer.instructions == "Haiku."
    assert writer.description == BUILTIN_WORKERS["writer"].description


def test_unknown_worker_names_field_and_value() -> None:
    message = _err({"name": "t", "members": ["researcher", "wizard"]})
    assert "team.yaml" in message and "members[1]" in message and "'wizard'" in message


def test_an_unknown_handoff_target_names_the_members_it_could_be() -> None:
    members = [
        {"name": "triage", "description": "sorts", "can_handoff_to": ["biling"]},
        {"name": "billing", "description": "bills"},
        {"name": "support", "description": "helps"},
    ]
    error = _err({"name": "t", "pattern": "swarm", "members": members})
    assert "'triage' can_handoff_to unknown member 'biling' (did you mean 'billing'?)" in error
    assert error.endswith("it can hand off to: billing, support")


def test_duplicate_name() -> None:
    message = _err({"name": "t", "members": ["writer", {"name": "writer", "description": "x"}]})
    assert "team.yaml" in message and "duplicate" in message and "'writer'" in message


def test_unknown_tool() -> None:
    message = _err({"name": "t", "members": [{"name": "a", "description": "d", "tools": ["sql"]}]})
    assert "members[0].tools[0]" in message and "'sql'" in message and "search_docs" in message


def test_wrong_type() -> None:
    message = _err({"name": "t", "members": ["writer"], "workflow": {"max_parallel": "many"}})
    assert "workflow.max_parallel" in message and "'many'" in message


def test_missing_required_field() -> None:
    message = _err({"name": "t", "members": [{"name": "solo"}]})
    assert "members[0].description" in message and "required" in message.lower()


def test_unknown_default_worker() -> None:
    message = _err({"name": "t", "members": ["writer"], "workflow": {"default_worker": "bob"}})
    assert "default_worker" in message and "'bob'" in message


def test_yaml_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nmembers: [researcher]\nworkflow: {fail_fast: sometimes}\n")
    with pytest.raises(SpecError) as info:
        load_team_file(bad, TOOLS)
    assert str(bad) in str(info.value) and "workflow.fail_fast" in str(info.value)
    with pytest.raises(SpecError, match="file not found"):
        load_team_file(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_team_file(tmp_path / "broken.yaml")


def test_knowledge_paths_resolve_against_the_team_file(tmp_path: Path) -> None:
    (tmp_path / "teams").mkdir()
    path = tmp_path / "teams" / "t.yaml"
    path.write_text("name: t\nmembers: [researcher]\nknowledge: [../docs]\n")
    assert load_team_file(path).knowledge == [str((tmp_path / "docs").resolve())]


def test_python_specs_build_a_team() -> None:
    spec = TeamSpec(
        name="py",
        members=[AgentSpec(name="solo", description="does everything", tools=["search_docs"])],
    )
    team = Team(spec)
    assert team.spec.default_worker == "solo"
    with pytest.raises(SpecError, match="unknown tool 'nope'"):
        Team(TeamSpec(name="py", members=[AgentSpec(name="a", description="d", tools=["nope"])]))


def test_retry_is_a_team_setting_and_its_old_place_is_still_read() -> None:
    retry = {"max_attempts": 5, "initial_delay_s": 0}
    top = team_from_dict({"name": "t", "members": ["writer"], "retry": retry})
    old = team_from_dict({"name": "t", "members": ["writer"], "workflow": {"retry": retry}})
    assert top.retry.max_attempts == old.retry.max_attempts == 5
    with pytest.raises(SpecError, match="retry is set twice"):
        team_from_dict(
            {"name": "t", "members": ["writer"], "retry": retry, "workflow": {"retry": retry}}
        )


def test_every_error_of_a_file_at_once_with_line_and_column(tmp_path: Path) -> None:
    """The misspelt field comes first, with a suggestion; the error it causes ("members" is
    missing) and the file's other errors follow, each at its line and column."""
    bad = tmp_path / "team.yaml"
    bad.write_text(
        "name: t\nmemebers: [researcher]\nworkflow:\n  max_paralel: 3\n  fail_fast: sometimes\n"
    )
    with pytest.raises(SpecError) as info:
        load_team_file(bad, TOOLS)
    assert str(info.value).splitlines() == [
        f"{bad}:2:1: memebers: unknown field (did you mean 'members'?)",
        f"{bad}:4:3: workflow.max_paralel: unknown field (did you mean 'max_parallel'?)",
        f"{bad}:1:1: members: Field required",
        f"{bad}:5:3: workflow.fail_fast: Input should be a valid boolean, unable to interpret "
        "input (got 'sometimes')",
    ]


def test_unknown_workers_and_tools_are_all_reported(tmp_path: Path) -> None:
    bad = tmp_path / "team.yaml"
    bad.write_text(
        "name: t\nmembers:\n  - wrtier\n  - name: a\n    description: d\n    tools: [sql, nope]\n"
    )
    with pytest.raises(SpecError) as info:
        load_team_file(bad, TOOLS)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{bad}:3:5: members[0]: unknown worker 'wrtier' (did you mean")
    assert lines[1].startswith(f"{bad}:6:13: members[1].tools[0]: unknown tool 'sql'")
    assert lines[2].startswith(f"{bad}:6:18: members[1].tools[1]: unknown tool 'nope'")


def test_a_yaml_syntax_error_keeps_its_line_and_column(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: t\nmembers: [researcher\nmodel: offline\n")
    with pytest.raises(SpecError, match=rf"^{re.escape(str(broken))}:\d+:\d+: not valid YAML"):
        load_team_file(broken)
