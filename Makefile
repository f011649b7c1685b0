# Two commands on a fresh clone: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CASES  ?= samples

PORT ?= 3000

.PHONY: setup run test bench bench-10g bench-week bench-scale up down quality ui screenshots screenshot lint docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Analyse every bundled sample through Dagster (in-process), print a summary, write SQLite.
run: $(STAMP)
	$(BIN)/attribution run $(CASES) --instance .dagster

## The Dagster UI on 127.0.0.1:3000 over the instance in .dagster/ (what `make run` recorded).
## The Dagster UI on http://127.0.0.1:$(PORT) (default 3000; the next free port if taken).
ui: $(STAMP)
	VENV_BIN=$(BIN) PORT=$(PORT) scripts/ui.sh

## The README's screens into docs/screens/ (asset graph, a job's verdict, the verdict check,
## the weekly report): a throwaway instance, dagster-webserver, headless Chromium through
## Playwright (Debian's `chromium`: apt-get install -y chromium). scripts/screenshot.sh
## takes any other page.
screenshots: $(STAMP)
	$(BIN)/python scripts/ui_screens.py docs/screens
screenshot: screenshots

## The test suite (PostgreSQL / Prometheus tests use servers that .ci/run starts).
test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

## Speed and memory against grep on a generated 64-node case, the issue-16 profiles against
## a 6-term grep and cat (docs/performance.md), the topology readers on a 4,096-node
## fabric (issue 23), then quality (below).
bench: $(STAMP)
	$(BIN)/python bench/run_bench.py
	$(BIN)/python bench/profiles.py
	$(BIN)/python bench/dagster_path.py
	$(BIN)/python bench/dagster_path.py /tmp/attr-bench/profiles/nccl_init-1 --repeat 2
	$(BIN)/python bench/topology.py
	$(BIN)/python bench/quality.py

## The opt-in 1,024-node ~10 GB job (bench/generate.py fleet_1024): 10 GB under
## /tmp/attr-bench/profiles, about a minute to generate, minutes to measure.
bench-10g: $(STAMP)
	$(BIN)/python bench/profiles.py --only fleet_1024

## Quality per labelled set (held-out h*, real-threads, samples), through the Dagster per-job
## path and directly: top-1/top-3 suspect node, precision/recall per category, abstention,
## false attributed; writes docs/quality.md.
quality: $(STAMP)
	$(BIN)/python bench/quality.py --write docs/quality.md

## A synthetic week of 10,000 small jobs: the window path through Dagster vs the engine
## directly, the weekly report's planted offenders, the per-job path on 1,000 (docs/fleet.md).
bench-week: $(STAMP)
	$(BIN)/python bench/week.py

## The production-shaped deployment (PostgreSQL, code server, daemon, a process per run):
## jobs/s with 1, 2 and 4 concurrent runs, per job and per window (docs/deployment.md).
bench-scale: $(STAMP)
	ATTRIBUTION_TEST_PG_URL="$$(scripts/ci-services.sh start)" $(BIN)/python bench/deploy.py

## The production-shaped stack for you to try: PostgreSQL, code server, daemon, webserver on
## http://127.0.0.1:$(PORT), a generated week of jobs (docs/deployment.md). `make down` stops it.
up: $(STAMP)
	ATTRIBUTION_TEST_PG_URL="$$(scripts/ci-services.sh start)" PYTHONPATH=$(CURDIR) \
	  $(BIN)/python bench/deploy_stack.py up --port $(PORT)

down: $(STAMP)
	PYTHONPATH=$(CURDIR) $(BIN)/python bench/deploy_stack.py down
	scripts/ci-services.sh stop

lint: $(STAMP)
	$(BIN)/ruff check attribution_dagster tests bench

## Regenerate the parser and rule catalogs in docs/, and the README's examples from real
## runs (scripts/readme_examples.py; tests/test_readme_examples.py checks them).
docs: $(STAMP)
	$(BIN)/attribution parsers --markdown > docs/parsers.md
	$(BIN)/attribution rules --markdown > docs/rules.md
	$(BIN)/python scripts/readme_examples.py

clean:
	rm -rf $(VENV) .attribution .dagster .pytest_cache .hypothesis build *.egg-info
