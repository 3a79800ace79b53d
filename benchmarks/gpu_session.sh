#!/usr/bin/env bash
# The GPU checks of docs/performance.md, in one prepared run for a short
# lease of a GPU machine: each step in priority order, under `timeout`,
# inside a total budget, so whatever time there is buys the most important
# figures first.
#
#   bash benchmarks/gpu_session.sh [--smoke] [BUDGET_SECONDS] [OUT_DIR]
#
# BUDGET_SECONDS (default 480) bounds the whole run; a step gets what is
# left, up to its own limit, and is skipped (said so in the log) when less
# than its minimum is left. OUT_DIR (default $OUT, else runs/gpu_session)
# receives log.txt, results.tgz (each benchmark's --json, the attention
# scaling plot) and hlo.tgz (the GPT-2 step's optimised HLO under JAX),
# written as the run goes, so a run cut short still returns what
# finished. --smoke runs every step at toy sizes (and a tenth of each
# step's minimum), on a CPU too, to check the script itself.
#
# Wheels for what the machine lacks (keras, keras-hub, ...) may travel in
# .whl/; they are installed into /tmp/site first. Backends: JAX and
# PyTorch (a machine without TensorFlow skips it; ZOO_GPU_BACKENDS
# overrides the list).
#
# ZOO_GPU_ONLY (a bash regular expression) runs only the steps whose names
# match it (and the environment), to spend a second, shorter lease on the
# steps a first one did not reach.
#
# Steps, what is still unmeasured on a GPU first: the environment; the
# layers grid (its first GPU run timed host copies with the layers); GPT
# training at GPT-2 small's size (MFU where nanoGPT quotes it, with each
# model's compiled JAX step kept as HLO); GPT training under torch.compile;
# the attention and Transformer tests on the GPU (fused cuDNN/flash
# kernels, masks, empty rows; JAX's, slow to compile, after the next step);
# attention time and memory against length, fused and explicit; ViT
# training and inference; the nanogpt recipe on Tiny Shakespeare (JAX;
# .gpu_data/, see below), then again with attention dropout off (the fused
# kernel in training). Then what was measured on a GPU before, to compare:
# cached GPT generation in bfloat16 under PyTorch, eager and with the
# decode step compiled (default mode and CUDA graphs); BERT masked-LM
# pretraining, GPT nanogpt training against keras-hub, what PyTorch's CUDA
# kernels give a query with no key.

set -u
SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; shift; fi
BUDGET=${1:-480}
DEST=${2:-${OUT:-runs/gpu_session}}
mkdir -p "$DEST"
RESULTS=$(mktemp -d)
LOG="$DEST/log.txt"
START=$(date +%s)
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
# Keras' default backend is TensorFlow, which the machine may lack; each
# benchmark still runs every backend in a process of its own.
export KERAS_BACKEND=${KERAS_BACKEND:-jax}
PYTHON=${PYTHON:-python3}

# The HLO dumps go apart: a results.tgz over the 16 MiB a lent machine
# returns per file would lose every figure with it.
pack() {
    tar czf "$DEST/results.tgz" --exclude=./hlo -C "$RESULTS" . 2>/dev/null
    if [ -d "$RESULTS/hlo" ]; then
        tar czf "$DEST/hlo.tgz" -C "$RESULTS" hlo 2>/dev/null
    fi
}
trap pack EXIT

say() { echo "$*" | tee -a "$LOG"; }

# step NAME MIN_SECONDS MAX_SECONDS COMMAND...: runs COMMAND with what is
# left of the budget (at most MAX_SECONDS), or skips it.
step() {
    local name=$1 min=$2 max=$3
    shift 3
    if [ "$SMOKE" = 1 ]; then min=$((min / 10)); fi  # toy sizes start fast
    if [ -n "${ZOO_GPU_ONLY:-}" ] && [ "$name" != environment ] && \
            ! [[ "$name" =~ $ZOO_GPU_ONLY ]]; then
        say "== $name: skipped, not in ZOO_GPU_ONLY"
        return
    fi
    local left=$((BUDGET - ($(date +%s) - START)))
    if [ "$left" -lt "$min" ]; then
        say "== $name: skipped, ${left} s left of the budget (needs ${min})"
        return
    fi
    local limit=$((left < max ? left : max))
    say "== $name (at most ${limit} s): $*"
    local t0
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    say "== $name: exit $rc after $(($(date +%s) - t0)) s"
    pack
}

installed() {  # installed MODULE...: all findable (without importing them)
    "$PYTHON" -c "import importlib.util, sys
sys.exit(not all(importlib.util.find_spec(m) for m in sys.argv[1:]))" "$@"
}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && \
        ! installed keras keras_hub; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
# Every step imports zoo, and zoo keras-hub: if that fails (a wheel
# missing, or one that breaks the import, as kagglehub without kagglesdk
# does), stop before the lease is spent on failing steps.
if ! "$PYTHON" -c "import zoo" >>"$LOG" 2>&1; then
    say "== stopping: 'import zoo' fails here (its error is above in" \
        "$LOG); check the wheels in .whl/"
    exit 1
fi

BACKENDS=${ZOO_GPU_BACKENDS:-jax,torch}
if [ -z "${ZOO_GPU_BACKENDS:-}" ] && installed tensorflow; then
    BACKENDS=jax,tensorflow,torch
fi
if [ "$SMOKE" = 1 ]; then
    GPT="--preset smoke --batch-size 4 --steps 2"
    GPT2="--preset smoke --vocabulary-size 512 --batch-size 2 --steps 2 --approximate-gelu"
    BERT="--preset smoke --vocabulary-size 50 --sequence-length 16 --batch-size 4 --steps 2"
    VIT="--preset smoke --batch-size 4 --steps 2 --repeats 1 --no-task"
    SCALING="--lengths 64,128 --steps 1 --repeats 1"
    LAYERS="--layers mha --lengths 32 --batch-size 2 --steps 1 --repeats 1"
    GENERATION="--num-layers 1 --hidden-dim 16 --num-heads 2 --new-tokens 4 --repeats 1"
    TESTS="tests/layers/test_attention.py -k empty"
    RECIPE="--smoke"
else
    GPT="--preset nanogpt --steps 30"
    # GPT-2 small's shape and nanoGPT's padded vocabulary: the size its
    # 37% MFU (A100) is quoted at.
    GPT2="--preset gpt2 --vocabulary-size 50304 --batch-size 16 --steps 10 --approximate-gelu"
    BERT="--preset small --sequence-length 256 --batch-size 128 --steps 20"
    VIT="--preset cifar --batch-size 256 --steps 20 --no-task"
    SCALING="--lengths 1024,2048,4096,8192,16384,32768 --batch-size 4"
    # A launch-bound length and a compute-bound one.
    LAYERS="--lengths 256,4096 --batch-size 16"
    # Per-token figures: 128 new tokens say as much as 256, in half the time.
    GENERATION="--repeats 1 --new-tokens 128"
    TESTS="tests/layers/test_attention.py tests/layers/test_transformer.py"
    # Its best validation loss came at epochs 5-7 (30-40 s) on an H100/H200.
    RECIPE="--preset nanogpt --max-minutes 1"
fi
BF16="--mixed-precision bfloat16"

# The installed versions, read without importing the frameworks again
# ('import zoo' above imported them: seconds of the lease each time).
step environment 5 60 bash -c "nvidia-smi -L; $PYTHON -c '
import importlib.metadata as metadata
for name in (\"jax\", \"torch\", \"keras\", \"keras-hub\", \"tensorflow\"):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, \"missing\")'"

tests() {  # tests BACKEND: the attention and Transformer tests there
    # shellcheck disable=SC2086
    step "tests on the GPU ($1)" 30 150 env KERAS_BACKEND="$1" \
        "$PYTHON" -m pytest -q -p no:cacheprovider -x $TESTS
}

# Still unmeasured on a GPU first (docs/log/performance.md), then what was
# measured before, to compare. The layers grid without host copies (the
# 2026-11-27 grid timed them with the layers).
# shellcheck disable=SC2086
step "layers grid" 120 300 "$PYTHON" benchmarks/layers.py \
    --backends "$BACKENDS" $LAYERS --dtypes bfloat16 \
    --json "$RESULTS/layers.json"
# MFU at GPT-2 small's size (the target).
# shellcheck disable=SC2086
step "GPT training, GPT-2 size" 120 240 "$PYTHON" benchmarks/gpt_training.py \
    --backends "$BACKENDS" $GPT2 $BF16 --hlo-dir "$RESULTS/hlo" \
    --json "$RESULTS/gpt_training_gpt2.json"
# Its compile (forward, backward and AdamW, zoo's and keras-hub's model)
# outlasted 240 s on an H200; keras-hub's GPT-2 step breaks into about 25
# graphs there, zoo's into 4 (the breaks are Keras' PyTorch trainer's:
# loss.backward(), zero_grad), so zoo's alone, then zoo's eager step as
# its peer on the same machine.
# shellcheck disable=SC2086
step "GPT training, torch.compile" 120 300 "$PYTHON" \
    benchmarks/gpt_training.py --backends torch $GPT $BF16 --jit-compile \
    --no-peer --json "$RESULTS/gpt_training_torch_compile.json"
# shellcheck disable=SC2086
step "GPT training, torch.compile's eager peer" 30 90 "$PYTHON" \
    benchmarks/gpt_training.py --backends torch $GPT $BF16 --no-peer \
    --json "$RESULTS/gpt_training_torch_eager.json"
IFS=, read -r -a BACKEND_LIST <<<"$BACKENDS"
for backend in "${BACKEND_LIST[@]}"; do
    [ "$backend" = jax ] || tests "$backend"  # JAX's compile: after
done
# shellcheck disable=SC2086
step "attention scaling" 90 180 "$PYTHON" benchmarks/attention_scaling.py \
    --backends "$BACKENDS" $SCALING --dtype bfloat16 \
    --plot "$RESULTS/attention_scaling_gpu.png" \
    --json "$RESULTS/attention_scaling.json"
case ",$BACKENDS," in *,jax,*) tests jax ;; esac
# shellcheck disable=SC2086
step "ViT images" 90 180 "$PYTHON" benchmarks/vit_images.py \
    --backends "$BACKENDS" $VIT $BF16 --json "$RESULTS/vit_images.json"
# The nanogpt recipe on Tiny Shakespeare under JAX: tokens/s, model FLOPs
# utilisation and validation loss of a real run (NumPy windows: no
# TensorFlow needed). The corpus travels gzipped in .gpu_data/.
CORPUS=.gpu_data/tinyshakespeare.txt.gz
if [ -f "$CORPUS" ]; then
    gzip -dc "$CORPUS" >/tmp/tinyshakespeare.txt
    rm -rf /tmp/gpt_recipe /tmp/gpt_recipe_fused  # no earlier run's metrics
    # shellcheck disable=SC2086
    step "GPT recipe (JAX)" 90 180 env KERAS_BACKEND=jax "$PYTHON" \
        recipes/gpt_text.py $RECIPE --pipeline ids $BF16 --verbose 2 \
        --data /tmp/tinyshakespeare.txt --output-dir /tmp/gpt_recipe
    cp /tmp/gpt_recipe/metrics.json "$RESULTS/gpt_recipe_metrics.json" \
        2>/dev/null
    # The same with attention dropout off: the fused kernel in training
    # (the residual and embedding dropout stay).
    # shellcheck disable=SC2086
    step "GPT recipe, fused attention (JAX)" 90 180 env KERAS_BACKEND=jax \
        "$PYTHON" recipes/gpt_text.py $RECIPE --pipeline ids $BF16 \
        --attention-dropout 0 --verbose 2 --data /tmp/tinyshakespeare.txt \
        --output-dir /tmp/gpt_recipe_fused
    cp /tmp/gpt_recipe_fused/metrics.json \
        "$RESULTS/gpt_recipe_fused_metrics.json" 2>/dev/null
else
    say "== GPT recipe: skipped, no $CORPUS (gzip -c" \
        "../shared/data/tinyshakespeare.txt > $CORPUS, and carry .gpu_data)"
fi
# Measured on a GPU before (docs/log/performance.md), to compare.
# PyTorch's per-token cost, eager and with its decode step under
# torch.compile, as compile(jit_compile=True) runs it and replaying CUDA
# graphs (measured on an H100 on 2026-11-27; JAX's cached generation
# too, earlier; ZOO_GPU_GENERATION adds backends).
# shellcheck disable=SC2086
step "GPT generation" 90 300 "$PYTHON" benchmarks/gpt_generation.py \
    --backends "${ZOO_GPU_GENERATION:-torch}" $GENERATION --dtype bfloat16 \
    --torch-compile-mode default,reduce-overhead \
    --json "$RESULTS/gpt_generation.json"
# shellcheck disable=SC2086
step "BERT pretraining" 90 180 "$PYTHON" benchmarks/bert_pretraining.py \
    --backends "$BACKENDS" $BERT $BF16 --json "$RESULTS/bert_pretraining.json"
# shellcheck disable=SC2086
step "GPT training" 120 240 "$PYTHON" benchmarks/gpt_training.py \
    --backends "$BACKENDS" $GPT $BF16 --json "$RESULTS/gpt_training.json"
step "empty query rows in PyTorch's CUDA kernels" 20 60 "$PYTHON" \
    benchmarks/sdpa_empty_rows.py --json "$RESULTS/sdpa_empty_rows.json"
say "== done after $(($(date +%s) - START)) s of ${BUDGET}"
