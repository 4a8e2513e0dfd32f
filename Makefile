# Everything installs from the project's own files: uv (pinned) into .tools/, then the locked environment
# (uv.lock) into .venv/. Two installs a month apart get the same versions.
UV_VERSION := 0.13.9
UV := .tools/bin/uv
PY := .venv/bin/python

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup browser demo test lint unit bench clean

## The environment, and the archive of the classes Spark's JVM loads for a run (pielake/engine/class_archive.py):
## built once for this Java, Spark and Delta, so that every JVM started after it starts sooner.
setup: .venv/.synced
	$(PY) -m pielake.engine.class_archive

$(UV):
	python3 -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

.venv/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --quiet
	touch $@

## Debian's Chromium, for the test that opens the lake's Data Docs in a real browser (as root, or through sudo).
browser:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		$(SUDO) apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

## The main job on the embedded local default.
demo: setup
	.venv/bin/pielake demo --lake lake

## The whole default test suite (lint first), one worker per core and one test file per worker (pytest-xdist),
## the longest files first (tests/conftest.py); benchmarks are marked and left out.
test: setup browser lint
	.venv/bin/pytest -m "not benchmark" -n 2 --dist loadfile --no-loadscope-reorder --durations=15

lint: setup
	.venv/bin/ruff check .

unit: setup
	.venv/bin/pytest -m unit -q

clean:
	rm -rf .venv .tools .pytest_cache .ruff_cache .hypothesis
