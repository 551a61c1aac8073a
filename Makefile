# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

# pip compiles what it installs on one core; compileall uses them all. A few third-party files
# that are not Python 3 (pip skips them too) make it exit 1, hence the leading '-'.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -e '.[test,box2d,ray,flower,tensorboard]'
	-$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 4 --out results/demo

# While mypy checks on one core, a tiny run on the other compiles the engine's numba kernels into
# their on-disk cache, so that the pytest workers load them instead of each compiling them again.
test: $(STAMP)
	$(BIN)/ruff check .
	warm=$$(mktemp -d); $(BIN)/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 1 --hidden 8 \
	  --period 2 --max-episodes 4 --no-progress --out $$warm > /dev/null 2>&1 & pid=$$!; \
	  $(BIN)/mypy; status=$$?; wait $$pid; rm -rf $$warm; exit $$status
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --durations=10

clean:
	rm -rf $(VENV) results
