#!/usr/bin/env bash
# What a lent GPU machine needs beside the checkout, in the two git-ignored
# folders `gpu_session.sh` reads (carry both):
#
#   bash benchmarks/gpu_carry.sh [TINY_SHAKESPEARE]
#
# .whl/: wheels for Python 3.12 on x86-64 of what the machine's image lacks
# (keras, keras-hub and their two missing needs, namex and optree), at the
# versions installed here. Not kagglehub: without kagglesdk its import
# fails there, and keras-hub's with it. .gpu_data/: the Tiny Shakespeare
# corpus, gzipped (default ../shared/data/tinyshakespeare.txt). PYTHON
# (default .venv/bin/python, else python3) names the interpreter whose
# versions are copied; PIP overrides the download command and ZOO_CARRY_DIR
# the folder that receives .whl/ and .gpu_data/ (tests).
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/data/tinyshakespeare.txt}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
PIP=${PIP:-"$PYTHON -m pip"}
version() {
    "$PYTHON" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"
}
PACKAGES=()
for name in keras keras-hub namex optree; do
    PACKAGES+=("$name==$(version "$name")")
done
DEST=${ZOO_CARRY_DIR:-.}
mkdir -p "$DEST/.whl" "$DEST/.gpu_data"
rm -f "$DEST"/.whl/*.whl
# shellcheck disable=SC2086
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$DEST/.whl" "${PACKAGES[@]}"
if [ ! -f "$CORPUS" ]; then
    echo "no corpus at $CORPUS: .gpu_data/ left as it is" >&2
else
    gzip -c "$CORPUS" >"$DEST/.gpu_data/tinyshakespeare.txt.gz"
fi
if [ "$DEST" = . ] && [ -d .git ]; then  # .gpu_data/ is in .gitignore
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || \
        echo '/.whl/' >>.git/info/exclude
fi
echo "carry: .whl ($(ls "$DEST/.whl" | wc -l) wheels) and .gpu_data"
