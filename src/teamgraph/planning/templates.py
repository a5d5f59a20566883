"""Plan templates: YAML recipes of steps, matched against a request by keywords and regexes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from teamgraph.errors import SpecError
from teamgraph.plan import Plan, Step, plan_errors, validate_plan

BUILTIN_TEMPLATES_DIR: Path = Path(__file__).parent / "templates"
REQUEST_PLACEHOLDER = "{request}"
_KEYWORD_SUFFIX = r"(?:s|es|d|ed|ing|er|ers)?"


class MatchRules(BaseModel):
    """When a template applies: any keyword (1 point each) or regex (2 points each) that hits."""

    model_config = ConfigDict(extra="forbid")

    keywords: list[str] = Field(default_factory=list)
    regex: list[str] = Field(default_factory=list, description="Case-insensitive, re.search")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
        return patterns


class Template(BaseModel):
    """A named plan recipe; step tasks may use the ``{request}`` placeholder."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")
    description: str = ""
    match: MatchRules = Field(default_factory=MatchRules)
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _valid_dag(self) -> Template:
        workers = {s.worker for s in self.steps}  # workers are checked against a team later
        errors = plan_errors(Plan(steps=self.steps), workers, max_steps=len(self.steps))
        if errors:
            raise ValueError("steps: " + "; ".join(errors))
        return self


def load_template_file(path: str | Path) -> Template:
    """Read one template YAML file; ``name`` defaults to the file's stem.

    Raises :class:`SpecError` naming the file, the field and the value.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"{path}: cannot read template: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    data: dict[str, Any] = {"name": path.stem, **raw}
    try:
        return Template.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format(exc, path)) from None


def load_templates(dirs: Iterable[str | Path]) -> dict[str, Template]:
    """Every ``*.yaml``/``*.yml`` template in ``dirs``, by name; later dirs override earlier.

    A missing directory, a bad file or two files with one name in the same directory raise
    :class:`SpecError`.
    """
    templates: dict[str, Template] = {}
    for directory in map(Path, dirs):
        if not directory.is_dir():
            raise SpecError(f"{directory}: templates directory not found")
        seen: dict[str, Path] = {}
        for path in sorted(directory.iterdir()):
            if path.suffix not in {".yaml", ".yml"} or not path.is_file():
                continue
            template = load_template_file(path)
            if template.name in seen:
                raise SpecError(
                    f"{path}: name: duplicate template name {template.name!r} "
                    f"(also in {seen[template.name]})"
                )
            seen[template.name] = path
            templates[template.name] = template
    return templates


def available(*dirs: Iterable[str | Path]) -> dict[str, Template]:
    """The templates a team can name: the built-in ones, then each folder of ``dirs`` (the
    settings', then the team's own), later ones overriding earlier."""
    return load_templates([BUILTIN_TEMPLATES_DIR, *(d for group in dirs for d in group)])


def misfit(template: Template, members: Iterable[str]) -> str:
    """Why ``template`` cannot plan for a team of ``members`` (empty when it can): the workers
    its steps name that the team lacks."""
    missing = sorted({step.worker for step in template.steps} - set(members))
    if not missing:
        return ""
    return f"template {template.name!r} needs {', '.join(missing)}, which the team does not have"


def instantiate(template: Template, request: str, workers: Iterable[str] | None = None) -> Plan:
    """The template's plan for ``request``: ``{request}`` substituted in every task, and the line
    ``User's original request: <request>`` appended to every task.

    With ``workers``, raises :class:`~teamgraph.errors.PlanValidationError` if a step uses a
    worker not in it.
    """
    suffix = f"\n\nUser's original request: {request}"
    steps = [
        Step(
            id=step.id,
            worker=step.worker,
            task=step.task.replace(REQUEST_PLACEHOLDER, request) + suffix,
            depends_on=list(step.depends_on),
        )
        for step in template.steps
    ]
    about = f": {template.description}" if template.description else ""
    plan = Plan(
        name=template.name,
        reasoning=f"Matched template {template.name!r}{about}",
        confidence=1.0,
        steps=steps,
    )
    if workers is not None:
        validate_plan(plan, workers, max_steps=len(steps))
    return plan


def match_score(template: Template, request: str) -> int:
    """2 points per regex and 1 per keyword of ``template`` found in ``request``."""
    text = request.lower()
    regex = sum(2 for p in template.match.regex if re.search(p, request, re.IGNORECASE))
    return regex + sum(1 for k in dict.fromkeys(template.match.keywords) if _has_keyword(text, k))


def shaped(template: Template, request: str) -> bool:
    """Whether one of ``template``'s regexes matches ``request``: its keywords alone say what the
    request is about, not that it asks for the template's steps ("review my essay" is no code
    review)."""
    return any(re.search(p, request, re.IGNORECASE) for p in template.match.regex)


def ranked(request: str, templates: Mapping[str, Template]) -> list[tuple[int, Template]]:
    """The templates whose match rules hit ``request``, with their scores, best first (ties:
    alphabetical name)."""
    scored = sorted(
        ((match_score(t, request), name) for name, t in templates.items()),
        key=lambda item: (-item[0], item[1]),
    )
    return [(score, templates[name]) for score, name in scored if score > 0]


def _has_keyword(text: str, keyword: str) -> bool:
    """ASCII keywords match whole words (plus a plural/verb suffix); others match as substrings."""
    keyword = keyword.lower().strip()
    if not keyword:
        return False
    if not keyword.isascii():
        return keyword in text
    pattern = rf"(?<![a-z0-9]){re.escape(keyword)}{_KEYWORD_SUFFIX}(?![a-z0-9])"
    return re.search(pattern, text) is not None


def _format(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if not field:  # a whole-model rule: its message names the field and the value
            lines.append(f"{path}: {message}")
        elif err["type"] == "missing":
            lines.append(f"{path}: {field.lstrip('.')}: {message}")
        else:
            lines.append(f"{path}: {field.lstrip('.')}: {message} (got {err.get('input')!r:.80})")
    return "\n".join(lines)
