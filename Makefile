# teamgraph — the two commands: `make demo` (set up + run the offline demo) and `make test`.
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
REQUEST ?= Compare PostgreSQL and MongoDB on performance, security and cost

.PHONY: setup sandbox-tools browser-tools demo test bench clean

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

setup: $(VENV)/.synced sandbox-tools

# The code sandbox needs bubblewrap (Debian's package); without it code execution is refused.
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  $(SUDO) apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q bubblewrap >/dev/null; } || \
	  echo "warning: could not install bubblewrap; sandboxed code execution will be refused"; }

# The web workspace's browser tests drive Debian's Chromium (Playwright, no downloaded browser).
browser-tools:
	@command -v chromium >/dev/null 2>&1 || { \
	  $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q chromium >/dev/null; } || \
	  echo "warning: could not install chromium; browser tests skip (and fail in CI)"; }

$(UV):
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --extra openai
	touch $@

demo: setup
	$(VENV)/bin/teamgraph run --team examples/teams/research.yaml "$(REQUEST)"

test: setup browser-tools
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest

bench: setup
	$(VENV)/bin/python benchmarks/scheduling.py
	$(VENV)/bin/python benchmarks/tools.py
	$(VENV)/bin/python benchmarks/sandbox.py
	$(VENV)/bin/python benchmarks/server.py
	$(VENV)/bin/python benchmarks/crash.py
	$(VENV)/bin/python benchmarks/providers.py
	$(VENV)/bin/python benchmarks/cli_startup.py

clean:
	rm -rf .tools $(VENV) teamgraph.db
