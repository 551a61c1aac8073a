# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,box2d,ray,flower]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 4 --out results/demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest --durations=10

clean:
	rm -rf $(VENV) results
