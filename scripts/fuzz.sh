#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60) and prints one summary line per target.
#
# Usage: scripts/fuzz.sh [SECONDS]
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Not part of .ci/run: a useful
# run takes minutes. Each target's corpus grows in fuzz/corpus/<target> (ignored by git) and starts from the
# committed seeds in fuzz/seeds/<target>; a crash leaves its input in fuzz/artifacts/<target> and makes the script
# exit non-zero once every target has run.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"

status=0
for target in $(cargo +nightly fuzz list); do
    log="$(mktemp)"
    mkdir -p "corpus/$target"
    dirs=("corpus/$target")
    if [[ -d "seeds/$target" ]]; then
        dirs+=("seeds/$target")
    fi
    if cargo +nightly fuzz run "$target" "${dirs[@]}" -- -max_total_time="$seconds" >"$log" 2>&1; then
        result="ok"
    else
        result="CRASH"
        status=1
    fi
    # libFuzzer ends a clean run with "Done N runs in S second(s)"; after a crash the last status line has the count.
    runs="$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -n 1 || true)"
    if [[ -z "$runs" ]]; then
        runs="$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -n 1 || true)"
    fi
    coverage="$(grep -oE 'cov: [0-9]+' "$log" | grep -oE '[0-9]+' | tail -n 1 || true)"
    corpus="$(find "corpus/$target" -type f | wc -l)"
    artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | awk '{print $5}' | tail -n 1 || true)"
    echo "$target: $result runs=${runs:-?} seconds=$seconds cov=${coverage:-?} corpus=$corpus${artifact:+ artifact=$artifact} log=$log"
done
exit "$status"
