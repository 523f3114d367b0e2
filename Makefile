# The README's two commands are `make run` and `make test`; the other targets are their parts.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
LISTEN_ADDR ?= 127.0.0.1
LISTEN_PORT ?= 7263
export LISTEN_ADDR LISTEN_PORT
URL := http://$(LISTEN_ADDR):$(LISTEN_PORT)

.PHONY: run test test-postgres lint format prepare schema

run: prepare
	@echo
	@echo "Serving on $(URL)  (Ctrl-C stops)"
	@echo "  Annotator (segmentation)  $(URL)/"
	@echo "  TV viewer                 $(URL)/tv/"
	@echo "  Channel admin             $(URL)/tv/admin/  (staff login)"
	@echo "  GraphQL API and GraphiQL  $(URL)/graphql"
	@echo "  Documentation             $(URL)/docs/"
	@echo "  Health                    $(URL)/healthz"
	@echo "  Django admin              $(URL)/admin/  (make a login: $(BIN)/python manage.py createsuperuser)"
	@echo
	$(BIN)/python -m edge.server --bind $(LISTEN_ADDR) --port $(LISTEN_PORT) config.asgi:application

# The test process's own engine is classic whatever var/models holds (servers the tests start
# choose from their own folders). Most tests wait on servers, browsers and sockets: three
# pytest-xdist workers keep 2 cores busy (TEST_WORKERS=0 runs them in this one process), and
# with every core taken NumPy's OpenBLAS gets one thread in each process (a second one spends
# CPU waiting on memory in the classic engine's thin matrix products).
TEST_WORKERS ?= 3
test: $(VENV)/.dev-installed vendor/.fetched lint
	SEGMENTATION_ENGINE=classic OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS)
	@$(MAKE) --no-print-directory test-postgres

# The tests that use the test process's own database, again on PostgreSQL when one is reachable
# (the others start servers that keep their own SQLite, or use no database).
TEST_POSTGRES_URL ?= postgresql://postgres@127.0.0.1:5432/postgres
test-postgres: $(VENV)/.dev-installed vendor/.fetched
	@if $(BIN)/python scripts/reachable.py '$(TEST_POSTGRES_URL)'; then \
		echo "DATABASE_URL=$(TEST_POSTGRES_URL) pytest -m database -n $(TEST_WORKERS)"; \
		SEGMENTATION_ENGINE=classic DATABASE_URL='$(TEST_POSTGRES_URL)' $(BIN)/python -m pytest -m database -q -n $(TEST_WORKERS); \
	else \
		echo "test-postgres skipped: PostgreSQL is not reachable at $(TEST_POSTGRES_URL)"; \
	fi

# ruff, then the import contracts of pyproject.toml (the layers; docs/architecture.md).
lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(VENV)/.dev-installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Rewrite the committed schema.graphql after a deliberate change to the GraphQL types.
schema: $(VENV)/.installed
	$(BIN)/python manage.py graphql_schema

# The embedded defaults under var/: database tables and the default video (the secret key is
# made on first start); expired sessions and the deletion IDs that expired with them go.
prepare: $(VENV)/.installed vendor/.fetched
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py default_video
	$(BIN)/python manage.py purge_expired

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed; point PYTHON= at it" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements-dev.txt $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

vendor/.fetched: assets.json scripts/fetch_assets.py | $(BIN)/python
	$(BIN)/python scripts/fetch_assets.py
	touch $@
