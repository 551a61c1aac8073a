# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean warm-imports warm-kernels

setup: $(STAMP)

# Bytecode is compiled when a module is first imported and kept, as Python does by default, even
# where PYTHONDONTWRITEBYTECODE is set: otherwise every process (a test run starts dozens) compiles
# every module it imports again. Only about a quarter of the installed files are ever imported, so
# compiling all at install (pip's default, or compileall) took longer. [our choice]
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -e '.[test,box2d,ray,flower,tensorboard]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 4 --out results/demo

# While mypy checks on one core, the other compiles what the tests import (the extras' packages
# first) and a tiny run compiles the engine's numba kernels into their on-disk cache, so that the
# pytest workers load both instead of each compiling them again (benchmarks/suite_steps.sh times each).
WARM_IMPORTS := ray, flwr.server, flwr.simulation, stable_baselines3, opacus, tensorboard, pytest, xdist
warm-imports: $(STAMP)
	$(BIN)/python -c 'import $(WARM_IMPORTS)'

warm-kernels: $(STAMP)
	warm=$$(mktemp -d); $(BIN)/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 1 --hidden 8 \
	  --period 2 --max-episodes 4 --no-progress --out $$warm > /dev/null; status=$$?; rm -rf $$warm; exit $$status

test: $(STAMP)
	$(BIN)/ruff check .
	$(MAKE) -s warm-imports warm-kernels > /dev/null 2>&1 & pid=$$!; $(BIN)/mypy; status=$$?; wait $$pid; exit $$status
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --durations=10

clean:
	rm -rf $(VENV) results
