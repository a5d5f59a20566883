"""The CLI's side of a paused run: asking the human in the terminal, or saying how to resume."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from teamgraph.pauses import Decision

CHOICES = {"a": "approve", "r": "reject", "e": "edit"}


def ask(console: Console, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask about every pending item; returns ``resume_stream`` keyword arguments."""
    answer: str | None = None
    decisions: dict[str, Decision] = {}
    for item in pending:
        if item["type"] == "clarification":
            answer = Prompt.ask(f"[bold cyan]?[/] {escape(item['question'])}", console=console)
        else:
            decisions[item["id"]] = _decide(console, item)
    return {"answer": answer, "decisions": decisions}


def _decide(console: Console, item: dict[str, Any]) -> Decision:
    call = f"{item['tool']}({json.dumps(item['args'], ensure_ascii=False)})"
    console.print(f"[bold yellow]approval[/] {escape(item['agent'])} wants to call {escape(call)}")
    action = _action(console)
    if action == "reject":
        return Decision.reject(Prompt.ask("comment for the agent", default="", console=console))
    if action == "edit":
        return Decision.edit(_json_args(Prompt.ask("new arguments (JSON)", console=console)))
    return Decision.approve()


def _action(console: Console) -> str:
    """approve / reject / edit, as a word or its first letter (Enter: approve)."""
    while True:
        said = Prompt.ask("approve, reject or edit [a/r/e]", default="approve", console=console)
        word = said.strip().lower()
        chosen = CHOICES.get(word[:1]) if word else "approve"
        if chosen is not None and chosen.startswith(word):
            return chosen
        console.print(f"[red]{escape(said)!r} is none of approve, reject, edit[/red]")


def _json_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"arguments must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("arguments must be a JSON object")
    return value


def resume_options(
    answer: str | None, approve: bool, reject: bool, comment: str, edit: str | None
) -> dict[str, Any]:
    """``resume_stream`` keyword arguments from ``teamgraph resume`` flags."""
    chosen = [
        flag
        for flag, on in (("--approve", approve), ("--reject", reject), ("--edit", edit is not None))
        if on
    ]
    if len(chosen) > 1:
        raise typer.BadParameter(f"use one of {', '.join(chosen)}, not several")
    default: Decision | None = None
    if approve:
        default = Decision.approve()
    elif reject:
        default = Decision.reject(comment)
    elif edit is not None:
        default = Decision.edit(_json_args(edit))
    return {"answer": answer, "default": default}


def how_to_resume(run_id: str, pending: list[dict[str, Any]]) -> str:
    lines = [f"run {run_id} is waiting:"]
    for item in pending:
        if item["type"] == "clarification":
            lines.append(f"  question: {item['question']}")
        else:
            lines.append(
                f"  approval: {item['agent']} → {item['tool']}({json.dumps(item['args'])})"
            )
    lines.append(
        f"continue with: teamgraph resume {run_id} --answer TEXT | --approve | --reject "
        "[--comment TEXT] | --edit JSON"
    )
    return "\n".join(lines)
