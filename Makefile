# teamgraph — the two commands: `make demo` (set up + run the offline demo) and `make test`.
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
REQUEST ?= Compare PostgreSQL and MongoDB on performance, security and cost

.PHONY: setup demo test bench clean

setup: $(VENV)/.synced

$(UV):
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --extra openai
	touch $@

demo: setup
	$(VENV)/bin/teamgraph run --team examples/teams/research.yaml "$(REQUEST)"

test: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest

bench: setup
	$(VENV)/bin/python benchmarks/scheduling.py

clean:
	rm -rf .tools $(VENV) teamgraph.db
