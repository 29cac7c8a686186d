#!/usr/bin/env bash
# Runs the official anthropic and openai Python SDKs against a memsift simulator.
#
# Usage: conformance/run.sh            (builds and starts the example sim, runs, stops it)
#        MEMSIFT_SIM_URL=http://HOST:PORT conformance/run.sh   (uses a sim that is already running)
# The venv lives in $CONFORMANCE_VENV (default: $TMPDIR/memsift-conformance-venv) and is reused.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
venv="${CONFORMANCE_VENV:-${TMPDIR:-/tmp}/memsift-conformance-venv}"

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check anthropic openai

sim_pid=""
cleanup() {
    if [ -n "$sim_pid" ]; then
        kill "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT

if [ -z "${MEMSIFT_SIM_URL:-}" ]; then
    # MEMSIFT_BIN: a memsift binary that is already built (.ci/run passes the one its tests built,
    # which saves a rebuild with another feature set); otherwise build one.
    bin="${MEMSIFT_BIN:-}"
    if [ -z "$bin" ]; then
        (cd "$repo" && cargo build -q -p memsift)
        bin="${CARGO_TARGET_DIR:-$repo/target}/debug/memsift"
    fi
    out="$(mktemp)"
    "$bin" sim --listen 127.0.0.1:0 --responder heuristic >"$out" &
    sim_pid=$!
    # Wait for the first stdout line, which names the chosen port.
    for _ in $(seq 1 100); do
        if grep -q '^listening on ' "$out"; then break; fi
        sleep 0.1
    done
    MEMSIFT_SIM_URL="$(sed -n 's/^listening on //p' "$out" | head -n 1)"
    rm -f "$out"
    if [ -z "$MEMSIFT_SIM_URL" ]; then
        echo "the simulator did not start" >&2
        exit 1
    fi
fi

MEMSIFT_SIM_URL="$MEMSIFT_SIM_URL" "$venv/bin/python" "$here/sdk_conformance.py"
