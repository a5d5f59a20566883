"""The FastAPI application: ``create_app(settings)``; ``teamgraph serve`` runs it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import async_sessionmaker

from teamgraph.config import Settings
from teamgraph.runtime.backend import open_backend
from teamgraph.server.errors import install_error_handlers
from teamgraph.server.routes import auth, teams
from teamgraph.server.state import AppState, load_teams


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_backend(settings) as backend:  # also runs the migrations
            sessions = async_sessionmaker(backend.engine, expire_on_commit=False)
            app.state.teamgraph = AppState(settings, backend, load_teams(settings), sessions)
            yield

    app = FastAPI(
        title="teamgraph",
        version="0.1.0",
        description="Run durable, streamed, cost-tracked teams of AI agents.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for router in (auth.router, teams.router):
        app.include_router(router)
    return app
