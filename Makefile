# The two commands a new user needs: `make demo` and `make test`.
# Both create (or reuse) the virtual environment in .venv with the package and its dev extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Offline copies of the image data sets, when this checkout sits beside them.
ifneq ($(wildcard ../shared/data),)
export HCCT_DATA_DIR ?= $(abspath ../shared/data)
endif

.PHONY: demo test lint bench venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hcct-lite needs Python >= 3.11, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: venv
	MPLBACKEND=Agg $(BIN)/python -m hcct_lite.demo

test: venv
	$(BIN)/ruff check .
	HCCT_QUICK=1 MPLBACKEND=Agg $(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: venv
	$(BIN)/python benchmarks/bench_partition.py
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
