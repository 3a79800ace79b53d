"""benchmarks/gpu_session.sh keeps to its budget: with 20 seconds it runs
the first steps at toy sizes (PyTorch only, the quickest to start), skips
what no longer fits and says so, and packs what finished. (Run once, under
PyTorch: it starts its own processes.)"""

import gzip
import importlib.metadata
import os
import subprocess
import sys
import tarfile
import time

import keras
import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the script starts its own backends; once is enough",
)
def test_a_short_budget_skips_the_long_steps(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, ZOO_GPU_BACKENDS="torch")
    start = time.monotonic()
    run = subprocess.run(
        ["bash", "benchmarks/gpu_session.sh", "--smoke", "20", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - start
    log = (tmp_path / "log.txt").read_text()
    assert run.returncode == 0, run.stderr + log[-2000:]
    assert seconds < 20 + 20  # a step's limit is what is left, plus its kill
    steps = [
        "environment",
        "tests on the GPU (torch)",
        "empty query rows in PyTorch's CUDA kernels",
        "GPT training",
        "attention scaling",
        "BERT pretraining",
        "ViT images",
        "GPT generation",
        "GPT training, GPT-2 size",
        "GPT training, torch.compile",
        "layers grid",
    ]
    for name in steps:  # each step ran to an exit status or was skipped
        assert (f"== {name}: exit " in log) != (f"== {name}: skipped" in log)
    # The environment step ran (on a busy machine it may outlast what is
    # left of 20 seconds, and then its limit stops it: exit 124;
    # test_only_runs_the_steps_it_names sees it succeed).
    assert "== environment: exit " in log
    assert "== ViT images: skipped" in log  # the last steps
    assert "== done after" in log
    with tarfile.open(tmp_path / "results.tgz") as packed:
        assert packed.getnames()  # packed, even if only the folder


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the script starts its own backends; once is enough",
)
def test_only_runs_the_steps_it_names(tmp_path):
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        ZOO_GPU_BACKENDS="torch",
        ZOO_GPU_ONLY="^no such step$",
    )
    run = subprocess.run(
        ["bash", "benchmarks/gpu_session.sh", "--smoke", "60", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (tmp_path / "log.txt").read_text()
    assert run.returncode == 0, run.stderr + log[-2000:]
    assert "== environment: exit 0" in log
    assert "== GPT training, GPT-2 size: skipped, not in ZOO_GPU_ONLY" in log
    assert "== ViT images: skipped, not in ZOO_GPU_ONLY" in log
    assert not any(
        line.startswith("== ")
        and ": exit " in line
        and not line.startswith("== environment")
        for line in log.splitlines()
    )


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the script starts its own backends; once is enough",
)
def test_it_stops_at_once_where_zoo_does_not_import(tmp_path):
    broken = tmp_path / "python"
    broken.write_text(
        "#!/bin/sh\necho 'ImportError: no kagglesdk' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    env = dict(os.environ, PYTHON=str(broken), ZOO_GPU_BACKENDS="torch")
    run = subprocess.run(
        [
            "bash",
            "benchmarks/gpu_session.sh",
            "--smoke",
            "60",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    log = (tmp_path / "out" / "log.txt").read_text()
    assert run.returncode == 1
    assert "no kagglesdk" in log and "== stopping: 'import zoo' fails" in log
    assert "== environment" not in log  # no step ran


@pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="a shell script; once is enough"
)
def test_the_carry_script_asks_for_the_wheels_and_packs_the_corpus(tmp_path):
    # PIP stands in for pip: it records what it was asked to download.
    record = tmp_path / "asked.txt"
    fake_pip = tmp_path / "pip"
    fake_pip.write_text(f'#!/bin/sh\necho "$@" > {record}\n')
    fake_pip.chmod(0o755)
    corpus = tmp_path / "shakespeare.txt"
    corpus.write_text("First Citizen:\nBefore we proceed any further.\n")
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        PIP=str(fake_pip),
        ZOO_CARRY_DIR=str(tmp_path / "out"),
    )
    run = subprocess.run(
        ["bash", "benchmarks/gpu_carry.sh", str(corpus)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    asked = record.read_text().split()
    for name in ("keras", "keras-hub", "namex", "optree"):
        assert f"{name}=={importlib.metadata.version(name)}" in asked
    assert not any("kagglehub" in word for word in asked)
    assert "3.12" in asked and "--no-deps" in asked
    packed = tmp_path / "out" / ".gpu_data" / "tinyshakespeare.txt.gz"
    assert gzip.decompress(packed.read_bytes()).decode() == corpus.read_text()
