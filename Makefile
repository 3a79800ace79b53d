# zoo: set-up and the main jobs. `make help` lists the targets.
#
#   make imdb     set up if needed, then train the IMDB attention classifier
#   make test     set up if needed, then run the suite under jax, tensorflow, torch
#   make lint     ruff: the lint rules and the formatting (pyproject.toml)
#   make format   ruff: fix what it can, then format
#   make smoke    every recipe's --smoke run and the GPT's cross-backend check
#
# Variables: BACKEND (jax|tensorflow|torch), MODEL (mean|attention|query|rnn|
# transformer), DATA_DIR (a local aclImdb folder; default: tensorflow-
# datasets downloads IMDB), ARGS (more recipe flags), PYTHON (3.10+).

PYTHON ?= python3
VENV ?= .venv
BACKEND ?= jax
MODEL ?= attention
DATA_DIR ?=
ARGS ?=
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
# Where there is no NVIDIA GPU, PyTorch's CPU wheels (PyPI's Linux wheel
# is the multi-GB CUDA build); where there is one, the CUDA builds.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
# (Where PyTorch's index cannot be reached, pip looks only where it is
# configured to, as on machines that keep the CPU wheel on disk.)
CPU_INDEX := https://download.pytorch.org/whl/cpu
ifeq ($(HAS_GPU),1)
TORCH_INDEX =
JAX_SPEC := jax[cuda12]
else
TORCH_INDEX = $(shell $(PYTHON) -c "import socket; socket.create_connection(('download.pytorch.org', 443), 5)" >/dev/null 2>&1 && echo --extra-index-url $(CPU_INDEX))
JAX_SPEC := jax
endif

.PHONY: help setup imdb test lint format smoke clean

help:
	@sed -n '2,12p' Makefile | sed 's/^# \{0,1\}//'

$(VENV)/.installed: pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "zoo needs Python 3.10 or newer; set PYTHON=python3.x")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV) ($(if $(HAS_GPU),CUDA,CPU) builds; a few minutes the first time)"
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet "torch==$(TORCH_VERSION)" $(TORCH_INDEX)
	@$(PY) -m pip install --quiet "$(JAX_SPEC)" -e ".[all]"
	@touch $@

setup: $(VENV)/.installed

imdb: setup
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/imdb_attention.py --model $(MODEL) $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(ARGS)

test: setup
	$(PY) tests/all_backends.py $(ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

smoke: setup
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/imdb_attention.py --smoke --verbose 0
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/gpt_text.py --smoke --verbose 0
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/translate.py --smoke --verbose 0 --output-dir runs/smoke/translate
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/bert_imdb.py all --smoke --verbose 0 --output-dir runs/smoke/bert_imdb
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/vit_images.py --smoke --verbose 0 --output-dir runs/smoke/vit
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/imagegpt_digits.py --smoke --verbose 0 --output-dir runs/smoke/imagegpt
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/caption_images.py --smoke --verbose 0 --output-dir runs/smoke/caption
	KERAS_BACKEND=$(BACKEND) $(PY) recipes/caption_images.py --smoke --dataset digits --verbose 0 --output-dir runs/smoke/caption_digits
	$(PY) recipes/check_backends.py gpt_text --smoke

clean:
	rm -rf $(VENV) runs build *.egg-info
