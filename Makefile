# teamgraph — the two commands: `make demo` (set up + run the offline demo) and `make test`.
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
LOWEST := .venv-lowest
LOWEST_PINS := .ci/langgraph-lowest.txt
REQUEST ?= Compare PostgreSQL and MongoDB on performance, security and cost

.PHONY: setup lowest lowest-pins sandbox-tools browser-tools js-clients services demo test bench eval clean

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

# The official JavaScript clients (MCP, A2A, OpenAI) that tests/api/test_js_clients.py runs
# against the server, pinned by tests/api/js/package-lock.json; without npm those tests skip.
js-clients:
	@if command -v npm >/dev/null 2>&1; then \
	  [ tests/api/js/node_modules/.package-lock.json -nt tests/api/js/package-lock.json ] || \
	  npm ci --prefix tests/api/js --silent --no-audit --no-fund || \
	  echo "warning: could not install the JS clients; their tests skip"; \
	else echo "note: no npm: the JS client tests skip"; fi

$(UV):
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --extra openai
	touch $@

# LangGraph and LangChain are ranges in pyproject.toml, tested at both ends: uv.lock pins the
# newest releases (.venv), $(LOWEST_PINS) the lowest allowed — the LangGraph and LangChain
# packages at their floors (uv's lowest-direct resolution), every other package as uv.lock
# pins it ($(LOWEST)). `make lowest-pins` makes that file again after a change to either.
lowest: $(LOWEST)/.synced

$(LOWEST)/.synced: $(VENV)/.synced $(LOWEST_PINS)
	$(UV) venv --quiet --allow-existing --python $(VENV)/bin/python $(LOWEST)
	$(UV) pip sync --quiet --python $(LOWEST)/bin/python $(LOWEST_PINS)
	$(UV) pip install --quiet --python $(LOWEST)/bin/python --no-deps -e .
	touch $@

lowest-pins: $(UV)
	$(UV) export --quiet --frozen --no-hashes --no-emit-project --extra openai \
	  | grep -Ev '^(langgraph|langchain)' > $(LOWEST_PINS).in
	$(UV) pip compile --quiet pyproject.toml --extra openai --group dev --python-version 3.11 \
	  --resolution lowest-direct --constraints $(LOWEST_PINS).in --no-annotate \
	  --custom-compile-command "make lowest-pins" -o $(LOWEST_PINS)
	rm $(LOWEST_PINS).in

demo: setup
	$(VENV)/bin/teamgraph run --team examples/teams/research.yaml "$(REQUEST)"

# The tests talk to PostgreSQL at 127.0.0.1:5432 (user postgres, trust): start a local
# cluster that is installed but stopped. Without one the PostgreSQL tests skip, except in CI.
services:
	@if command -v pg_lsclusters >/dev/null 2>&1; then \
	  pg_lsclusters --no-header | while read version cluster port status rest; do \
	    [ "$$status" = online ] || pg_ctlcluster "$$version" "$$cluster" start \
	      || echo "could not start PostgreSQL $$version/$$cluster"; \
	  done; \
	else echo "PostgreSQL is not installed: its tests skip outside CI"; fi

# The whole suite on the newest LangGraph and LangChain, then again on the lowest releases
# pyproject.toml allows: all but the browser (tests/ui) and HTTP API (tests/api) tests, which
# exercise the server rather than LangGraph. That second run adds about 11 minutes (770 tests,
# 10 min 41 s measured on the 2-core machine with other suites running beside it).
test: setup lowest browser-tools js-clients services
	$(VENV)/bin/ruff check src tests benchmarks evals
	$(VENV)/bin/ruff format --check src tests benchmarks evals
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest
	$(LOWEST)/bin/pytest -p no:cacheprovider --ignore=tests/ui --ignore=tests/api

# How well the offline planner plans and routes: accuracy per measure, language and confusion;
# how well the knowledge base finds the passage that answers: keyword, vector and hybrid.
eval: setup
	$(VENV)/bin/python evals/planning.py
	$(VENV)/bin/python evals/retrieval.py
	$(VENV)/bin/python evals/template_matching.py

bench: setup services
	$(VENV)/bin/python benchmarks/scheduling.py
	$(VENV)/bin/python benchmarks/tools.py
	$(VENV)/bin/python benchmarks/sandbox.py
	$(VENV)/bin/python benchmarks/server.py
	$(VENV)/bin/python benchmarks/crash.py
	$(VENV)/bin/python benchmarks/providers.py
	$(VENV)/bin/python benchmarks/cli_startup.py
	$(VENV)/bin/python benchmarks/scale.py
	$(VENV)/bin/python benchmarks/capacity.py
	$(VENV)/bin/python benchmarks/http_floor.py
	$(VENV)/bin/python benchmarks/peer_server.py

clean:
	rm -rf .tools $(VENV) $(LOWEST) teamgraph.db
