# The two commands a new user needs: `make demo` and `make test`.
# Both create (or reuse) the virtual environment in .venv: `make demo` installs the package
# alone (no extra), `make test` adds every extra and the test tools (the dev extra).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Offline copies of the image data sets, when this checkout sits beside them.
ifneq ($(wildcard ../shared/data),)
export HCCT_DATA_DIR ?= $(abspath ../shared/data)
endif

.PHONY: demo test test-fast lint bench venv core clean figures notebooks lab reproduce report book \
	classroom grade flower-next

core: $(VENV)/.core
venv: $(VENV)/.installed

$(VENV)/.core: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hcct-lite needs Python >= 3.11, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed: $(VENV)/.core
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: core
	MPLBACKEND=Agg $(BIN)/python -m hcct_lite.demo

# Unit tests (the browser tests where Chromium is installed: -rs prints why not), every
# notebook with its solutions (docs/solutions/) below its exercises under nbval, 01-03 in
# quick mode (they train) and 04-05 in shipped mode (their quick mode retrains grids for
# seven minutes of the suite's twenty; `make notebooks` runs it), then the notebooks as they
# are in shipped mode (results/, as a student sees them). A cell that runs past
# CELL_TIMEOUT seconds fails, named, instead of hanging the run.
CELL_TIMEOUT ?= 600
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT)
# pytest-xdist on every core: each test file (a notebook's cells included) stays on one worker
# (conftest.py); TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS)
test: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf build/solved
	$(BIN)/python tools/make_classroom.py --solved build/solved
	HCCT_MODE=quick MPLBACKEND=Agg $(BIN)/python -m pytest -rs $(XDIST) tests \
	  build/solved/0[1-3]_*.ipynb $(NBVAL)
	HCCT_MODE=shipped MPLBACKEND=Agg $(BIN)/python -m pytest $(XDIST) \
	  build/solved/0[4-5]_*.ipynb notebooks $(NBVAL)

# The fast lane a contributor runs often (about 3 minutes on 2 cores): lint, then tests/
# without the tests marked slow (conftest.py: Flower deployments, Ray, GPU, the browser,
# the notebook builds, reruns in fresh processes, long training), and no notebook.
# `make test` runs everything.
test-fast: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	HCCT_MODE=quick MPLBACKEND=Agg $(BIN)/python -m pytest -rs $(XDIST) -m "not slow" tests

# The Flower tests against Flower's next release (its nightly build, flwr-nightly) in an
# environment of their own, .venv-flower-next: the package pins Flower to the range its
# tests pass on (hcct_lite/deploy/flower_internals.py), and this says before a release what
# breaks. The first run installs the package's dependencies there (torch included; e.g.
# FLOWER_NEXT_PIP="--extra-index-url https://download.pytorch.org/whl/cpu" for a CPU torch).
FLOWER_NEXT := .venv-flower-next
FLOWER_NEXT_PIP ?=
FLOWER_TESTS ?= tests/deploy/test_flower_*.py tests/deploy/test_silo_*.py \
  tests/deploy/test_local_files.py
flower-next:
	test -x $(FLOWER_NEXT)/bin/python || $(PYTHON) -m venv $(FLOWER_NEXT)
	$(FLOWER_NEXT)/bin/python -m pip install --quiet --upgrade pip
	$(FLOWER_NEXT)/bin/python -m pip install --quiet $(FLOWER_NEXT_PIP) -e . pytest hypothesis "opacus>=1.5"
	$(FLOWER_NEXT)/bin/python -m pip install --quiet --upgrade --pre "flwr-nightly[simulation]"
	$(FLOWER_NEXT)/bin/python -c 'import flwr; print("Flower", flwr.__version__)'
	MPLBACKEND=Agg $(FLOWER_NEXT)/bin/python -m pytest -rs -p no:cacheprovider $(FLOWER_TESTS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: venv
	$(BIN)/python benchmarks/bench_partition.py
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_overhead.py
	$(BIN)/python benchmarks/bench_designer.py

# The paper's grids at Table III settings into results/ (resumable), then docs/reproduction.md.
# Pick grids and a GPU with e.g. REPRODUCE_ARGS="--grids schemes-cifar10 --device cuda".
WORKERS ?= 2
reproduce: core
	$(BIN)/hcct-lite reproduce --workers $(WORKERS) $(REPRODUCE_ARGS)

# Regenerate docs/reproduction.md from results/ without running anything.
report: core
	$(BIN)/python -c "from hcct_lite.reproduction.report import write_report; write_report()"

# Notebooks run outside the tests through tools/notebook_exec.py (nbclient): a fresh kernel
# in the notebook's folder, HCCT_MODE as --mode says; a cell that fails or runs past
# CELL_TIMEOUT seconds stops the run, the notebook and cell named.
EXEC := $(BIN)/python tools/notebook_exec.py --timeout $(CELL_TIMEOUT)

# Save every figure the notebooks draw to figures/ (the committed ones): all notebooks in
# shipped mode, then notebook 4 in quick mode for the figure grids not shipped yet
# (those files end in -quick).
figures: venv
	HCCT_FIG_DIR=$(CURDIR)/figures MPLBACKEND=Agg $(EXEC) --mode shipped notebooks/*.ipynb
	HCCT_FIG_DIR=$(CURDIR)/figures MPLBACKEND=Agg $(EXEC) --mode quick notebooks/04_experiments.ipynb

# The book: the notebooks executed in shipped mode, the guides and the API reference
# (autodoc, numpy docstrings), built by Sphinx (MyST-NB, Sphinx Book Theme) into site/,
# offline: a table of contents, previous/next, search, local MathJax. A warning fails it.
book: venv
	$(BIN)/python tools/build_book.py site

# The classroom editions, generated (not committed): classroom/student/ (no solutions, no
# outputs; each checked to run top to bottom in shipped mode), classroom/instructor/
# (solutions shown and run, outputs kept; the final assessment worked for an example id)
# and classroom/student-kit/ (+ .zip: what to hand out, nothing of docs/ or tools/).
# docs/teaching.md says how to use them.
classroom: venv
	$(BIN)/python tools/make_classroom.py classroom

# Grade the final assessment's submitted notebooks: make grade SUBMISSIONS="hand-ins/*.ipynb"
# writes GRADES. Each runs in a fresh kernel in a temporary folder, against a read-only copy
# of the package and results/; each student's key is computed here from their student_id,
# and a submission that changes files is flagged and scores 0. A cell that runs past
# GRADE_TIMEOUT seconds stops that notebook there. docs/teaching.md says what it cannot stop.
GRADES ?= grades.csv
GRADE_TIMEOUT ?= 120
grade: venv
	@test -n "$(SUBMISSIONS)" || { echo 'name the notebooks: make grade SUBMISSIONS="hand-ins/*.ipynb"'; exit 1; }
	$(BIN)/python tools/assessment.py grade $(SUBMISSIONS) --csv $(GRADES) --timeout $(GRADE_TIMEOUT)

# Refresh the outputs nbval checks, then strip every other output (small diffs) with
# nbstripout: a cell keeps its outputs when its metadata says keep_output (the cells marked
# NBVAL_CHECK_OUTPUT, tests/notebooks/test_stripped_notebooks.py checks both ways), cell ids stay,
# execution counts stay (nbval fails a cell whose outputs have no count: "unrun reference
# cell"; nbstripout cannot keep them on the kept cells alone), and editor state goes. The
# pre-commit hook runs the same options.
NBSTRIPOUT_ARGS := --keep-id --keep-count --extra-keys "metadata.vscode metadata.toc metadata.celltoolbar \
  metadata.varInspector cell.metadata.editable cell.metadata.deletable cell.metadata.slideshow \
  cell.metadata.vscode cell.metadata.jp-MarkdownHeadingCollapsed"
notebooks: venv
	MPLBACKEND=Agg $(EXEC) --mode quick --inplace notebooks/*.ipynb
	$(BIN)/nbstripout $(NBSTRIPOUT_ARGS) notebooks/*.ipynb

lab: core
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf $(VENV) $(FLOWER_NEXT) .pytest_cache .hypothesis build *.egg-info site
