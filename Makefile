# Two commands: `make demo` and `make test`. Both create .venv on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint setup clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch pinned to its CPU build first: a bare torch requirement pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	# llama-cpp-python compiles from source the first time (a few minutes); pip caches the wheel.
	$(BIN)/pip install --quiet -e '.[llama-cpp,transformers,bench,serve,dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/localtools models pull qwen2.5-coder-0.5b
	$(BIN)/localtools run "What subscription plan is customer cust-1001 using?" --tools localtools.examples:get_customer

test: $(STAMP)
	$(BIN)/localtools models pull qwen2.5-coder-0.5b
	$(BIN)/localtools models pull smollm2-135m
	$(BIN)/localtools models pull gemma3-270m
	$(BIN)/ruff check localtools tests benchmarks
	$(BIN)/mypy localtools tests benchmarks
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check localtools tests benchmarks
	$(BIN)/mypy localtools tests benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info
