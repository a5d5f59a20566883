"""Where two runs differ: their plans, steps and outputs (``teamgraph diff RUN_A RUN_B``)."""

from __future__ import annotations

import difflib

from teamgraph.result import RunResult


def describe(result: RunResult) -> list[str]:
    """A run as comparable lines: status, plan, every step (state, worker, task, output), the
    answer, and what it cost."""
    lines = [f"status: {result.status}", f"planner tier: {result.planner_tier or '-'}"]
    deps = {s.id: s.depends_on for s in result.plan.steps} if result.plan else {}
    for step in result.steps:
        after = f" after {', '.join(deps[step.id])}" if deps.get(step.id) else ""
        lines.append(f"step {step.id} [{step.status}] {step.worker}{after}: {step.task}")
        lines += [f"  | {line}" for line in (step.output or step.error).splitlines()]
    lines.append("output:")
    lines += [f"  | {line}" for line in result.output.splitlines()]
    usage = result.usage
    lines.append(
        f"usage: {usage.input_tokens} in, {usage.output_tokens} out, ${usage.cost_usd:.6f}"
    )
    return lines


def diff_runs(first: RunResult, second: RunResult) -> str:
    """A unified diff of two runs' descriptions; empty when they agree in everything shown."""
    return "\n".join(
        difflib.unified_diff(
            describe(first),
            describe(second),
            f"run {first.run_id}",
            f"run {second.run_id}",
            lineterm="",
        )
    )
