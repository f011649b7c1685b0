# Two commands on a fresh clone: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CASES  ?= samples

.PHONY: setup run test bench ui screenshot lint docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Analyse every bundled sample through Dagster (in-process), print a summary, write SQLite.
run: $(STAMP)
	$(BIN)/attribution run $(CASES)

## The test suite (PostgreSQL / Prometheus tests use servers that .ci/run starts).
test: $(STAMP)
	$(BIN)/python -m pytest -q

## Speed and memory against grep on a generated 64-node case.
bench: $(STAMP)
	$(BIN)/python bench/run_bench.py

lint: $(STAMP)
	$(BIN)/ruff check attribution_dagster tests bench

## Regenerate the parser and rule catalogs in docs/.
docs: $(STAMP)
	$(BIN)/python -m attribution_dagster.rules.parsers --markdown > docs/parsers.md
	$(BIN)/python -m attribution_dagster.rules.engine --markdown > docs/rules.md

clean:
	rm -rf $(VENV) .attribution .pytest_cache .hypothesis build *.egg-info
