# Two commands: `make demo` and `make test`. Both create .venv on a fresh machine.
# The demo installs only what it runs (llama-cpp); the tests add the transformers backend, the
# bench, the server and the clients it is tested with.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo-installed
TEST_STAMP := $(VENV)/.test-installed
# llama-cpp-python's multimodal library (mtmd) and llama.cpp's common library are never loaded here:
# they are not compiled (mtmd a tenth of the build; common, its HTTP client and parsers a large part
# of the rest: scripts/llama-cpp-without-common.cmake). A CMAKE_ARGS of your own (-DGGML_CUDA=on,
# say) still reaches the build.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/scripts/llama-cpp-without-common.cmake $(CMAKE_ARGS)
DEFAULT_MODEL := qwen2.5-coder-0.5b

.PHONY: demo test lint setup setup-test clean

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "installing localtools, then llama-cpp-python: the first time it compiles llama.cpp (minutes; pip caches the wheel)"
	$(BIN)/pip install --quiet -e .
	# The default model downloads while llama.cpp compiles (the network and the cores at once);
	# a pull that fails here is tried again by the targets that need the model.
	@echo "pulling the default model in the background (log: $(VENV)/pull.log)"
	$(BIN)/localtools models pull $(DEFAULT_MODEL) > $(VENV)/pull.log 2>&1 & pull=$$!; \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e '.[llama-cpp]'; built=$$?; \
		wait $$pull || echo "the background pull failed (see $(VENV)/pull.log); it is tried again"; exit $$built
	touch $@

$(TEST_STAMP): $(DEMO_STAMP)
	@echo "building llama-server for the engine tests in the background (minutes; log: $(VENV)/llama-server-build.log)"
	# Started now, it compiles while pip installs and the linters run, at the lowest priority so the
	# tests it may overlap keep the cores; the tests wait for it (one build at a time), or build it
	# themselves if this one failed.
	nice -n 19 $(BIN)/localtools engines build llama-server > $(VENV)/llama-server-build.log 2>&1 &
	@echo "adding the transformers backend (CPU torch), bench, serve and the test clients; the test models download meanwhile"
	# torch pinned to its CPU build first: a bare torch requirement pulls a multi-GB CUDA build.
	# LlamaIndex gets an environment of its own: it pins an older openai SDK than the other clients.
	( $(BIN)/localtools models pull smollm2-135m && $(BIN)/localtools models pull gemma3-270m ) > $(VENV)/pull-test.log 2>&1 & \
		pull=$$!; \
		$(BIN)/pip install --quiet torch==2.13.0 && \
		$(BIN)/pip install --quiet -e '.[llama-cpp,transformers,bench,serve,remote,mcp,otel,routing,dev]' && \
		{ test -x $(VENV)/llamaindex/bin/python || $(PY) -m venv $(VENV)/llamaindex; } && \
		$(VENV)/llamaindex/bin/pip install --quiet 'llama-index-core>=0.12' 'llama-index-llms-openai-like>=0.3'; \
		ok=$$?; wait $$pull || echo "a background pull failed (see $(VENV)/pull-test.log); it is tried again"; exit $$ok
	touch $@

setup: $(DEMO_STAMP)

setup-test: $(TEST_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/localtools models pull $(DEFAULT_MODEL)
	$(BIN)/localtools run "What subscription plan is customer cust-1001 using?" --tools localtools.examples:get_customer \
		|| { echo "the demo failed; '$(BIN)/localtools doctor' says what this machine can run, and the fix" >&2; exit 1; }

test: $(TEST_STAMP)
	$(BIN)/localtools models pull $(DEFAULT_MODEL)
	$(BIN)/localtools models pull smollm2-135m
	$(BIN)/localtools models pull gemma3-270m
	$(BIN)/ruff check localtools tests benchmarks
	$(BIN)/mypy localtools tests benchmarks
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/pytest -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check localtools tests benchmarks
	$(BIN)/mypy localtools tests benchmarks
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) build dist *.egg-info
