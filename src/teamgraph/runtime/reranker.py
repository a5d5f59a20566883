"""The reranker role: ``search_docs`` has the team's model put the passages it found in order
(a team's ``rerank: true``; :mod:`teamgraph.knowledge.rerank`). One model call per search,
through the run's one model call path — journaled (a resumed run does not ask again), charged to
the run as ``reranker``, within its budget — and none when the model is the offline model."""

from __future__ import annotations

import hashlib

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from teamgraph.brief import Brief
from teamgraph.durable import JournalKey
from teamgraph.knowledge.rerank import INSTRUCTIONS, Ask
from teamgraph.llm.call import Caller, ask
from teamgraph.llm.resolve import is_offline
from teamgraph.run_context import RunContext

RERANKER = "reranker"  # the role: its model override and the usage it is charged


def reranker(ctx: RunContext) -> Ask | None:
    """How ``search_docs`` asks the team's model to order passages, or None (off, offline)."""
    team = ctx.team
    if not team.rerank:
        return None
    model, name = ctx.models.for_role(RERANKER, team.model, team.model_kwargs)
    if is_offline(name):
        return None
    caller = Caller(RERANKER, model, name)

    async def ask_model(prompt: str) -> str:
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]
        key = JournalKey.task(ctx.task_scope(f"{RERANKER}-{digest}")).model_call(1)
        messages: list[BaseMessage] = [SystemMessage(INSTRUCTIONS), HumanMessage(prompt)]
        reply = await ask(ctx, caller, messages, key, Brief(role="reranker", request=prompt))
        return reply.text

    return ask_model
