#!/usr/bin/env bash
# List-price cost per 1,000 segments of LoCoMo-8 under memsift's requests as sent, against the
# reference design of scripts/reference-design.toml, for Claude Haiku 4.5 and Sonnet 4.5, on the
# batch and the immediate lane.
#
# For each model the script runs LoCoMo-8 through `memsift sim` (scripts/locomo-postprocess.sh:
# extraction with the LoCoMo responder, then relationship classification, every request on the
# batch lane, the simulator counting tokens with o200k_base and cache hits by the model's
# published rules) and dumps every request with the usage the simulator reported. `cost-compare`
# then prices those requests, rebuilds the reference's requests for the same segments and the same
# candidate pairs, counts them with the same tokenizer, and prints the table. The formula and the
# assumptions are printed with it and written out in BENCHMARKS.md.
#
# Usage: scripts/cost-compare.sh LOCOMO_JSON [MODEL…]   (default models: claude-haiku-4-5 claude-sonnet-4-5)
# Needs: built memsift and cost-compare binaries (MEMSIFT_BIN and COST_COMPARE_BIN, default
# target/release/…) and python3. Talks only to 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
compare="${COST_COMPARE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/cost-compare}"
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: scripts/cost-compare.sh LOCOMO_JSON [MODEL…]" >&2
    exit 2
fi
locomo="$1"
shift
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(claude-haiku-4-5 claude-sonnet-4-5)
work="$(mktemp -d)"
runs=()
for model in "${models[@]}"; do
    echo "== $model: LoCoMo-8 through extraction and relationship classification"
    "$here/locomo-postprocess.sh" --locomo "$locomo" --model "$model" --stages relationships \
        --dump "$work/$model.jsonl" >"$work/$model.log"
    grep -E '^(extracted|postprocess relationships|  input tokens per classified pair)' "$work/$model.log" || true
    runs+=(--run "$model=$work/$model.jsonl")
done
echo
"$compare" --reference "$here/reference-design.toml" "${runs[@]}"
echo "work directory: $work"
