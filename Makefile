# `make demo`: set up .venv and run the main job on the embedded default.
# `make test`: set up .venv and run the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint venv clean bench labextension labextension-test docs

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel is on disk; a loose "torch" pulls a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[train,test,dev,trackers]"
	touch $(STAMP)

demo: venv
	$(BIN)/python -m primenb.demo

# two workers, a test file each (--dist loadfile keeps a file's module fixtures in one process): many
# tests wait on a server, a browser or a subprocess's imports, and the other worker uses that time
test: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# everything but the tests that train a model (-m "not slow"): under a minute
test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow"

# ruff (lint + format), import-linter (the layers of docs/architecture.md), mypy
lint: venv
	$(BIN)/ruff check primenb tests bench
	$(BIN)/ruff format --check primenb tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
# The JupyterLab sidebar (labextension/ -> primenb/labextension/, shipped in the wheel). Needs node >= 18;
# jlpm comes with jupyterlab (the test extra). `make venv` works without it: the sidebar is then not built.
labextension: venv
	cd labextension && PATH="$(CURDIR)/$(BIN):$$PATH" jlpm install && PATH="$(CURDIR)/$(BIN):$$PATH" jlpm build:prod

labextension-test: labextension
	cd labextension && PATH="$(CURDIR)/$(BIN):$$PATH" jlpm test

# docs/magics.md from the command declarations (primenb/commands.py); a test checks it is current
docs: venv
	$(BIN)/python -m primenb.commands --markdown > docs/magics.md

bench: venv
	$(BIN)/python bench/bench_load.py

clean:
	rm -rf $(VENV) build dist *.egg-info labextension/node_modules labextension/lib labextension/lib-test primenb/labextension test-artifacts
