# Three commands matter: `make demo`, `make test` and `make book`. Each creates .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BOOK_STAMP := $(VENV)/.installed-book
# Pinned to match the GPU machine (torch 2.11 there; 2.13 CPU build here), transformers 5.17, triton 3.6.
TORCH_SPEC ?= torch==2.13.0
PIP := $(BIN)/python -m pip -q --disable-pip-version-check

.PHONY: demo test test-deps test-engine lab labs labs-gpu labs-record book clean gpu-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install "$(TORCH_SPEC)"
	$(PIP) install "transformers==5.17.0" "triton==3.6.0"
	$(PIP) install -e ".[dev,labs]"
	$(BIN)/python -c "from minivllm_labs.plots import install_plotlyjs; install_plotlyjs('labs/_static')"
	touch $(STAMP)

$(BOOK_STAMP): $(STAMP) pyproject.toml
	$(PIP) install -e ".[book]"
	touch $(BOOK_STAMP)

demo: $(STAMP)
	$(BIN)/minivllm demo

# pytest over tests/, the book in Debian's chromium, nbval over labs/: each part runs to its end, then a table of
# seconds per part (scripts/test_all.py). test-deps comes first: without root or sudo it stops before anything
# else, printing the one command to run.
test: test-deps $(STAMP) $(BOOK_STAMP)
	$(BIN)/python scripts/test_all.py

# chromium and a CJK font for the browser test, through apt-get (never a downloaded browser build)
test-deps:
	@bash scripts/test_system_deps.sh

# The quick half: the engine's and the kernels' tests only (no labs, no book, no nbval).
test-engine: $(STAMP)
	$(BIN)/python -m pytest -q tests/engine tests/kernels

# Regenerate labs/*.ipynb from labs/src/*.py, executed on the CPU (the outputs CI's nbval compares).
labs: $(STAMP)
	$(BIN)/python -m minivllm_labs.build

# On a CUDA machine: run every lab end to end, GPU-only cells included, into LABS_GPU_OUT; fails on any error.
LABS_GPU_OUT ?= /tmp/minivllm-labs-gpu
labs-gpu: $(STAMP)
	$(BIN)/python -m minivllm_labs.build --gpu $(LABS_GPU_OUT)

# On any CUDA machine: record every lab into assets/results/<gpu>/ (the H200's folder is the reference; yours
# appears beside it in the notebooks and the book). A lab that fails is named with why; the others still run.
labs-record: $(STAMP)
	$(BIN)/python -m minivllm_labs.record all

book: $(BOOK_STAMP)
	$(BIN)/python book/_ext/book_build.py

# LAB_ARGS passes options to JupyterLab, e.g. `make lab LAB_ARGS="--port 8801"` (book/handbook/workshop.md).
LAB_ARGS ?=
# The lab notebooks are this repository's own build: trusting them lets JupyterLab run their pages' scripts
# (language switch, toggles, the interview's inputs) before a first run, not only after it.
lab: $(STAMP)
	$(BIN)/jupyter trust labs/*.ipynb
	$(BIN)/jupyter lab labs/ $(LAB_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache book/_build
