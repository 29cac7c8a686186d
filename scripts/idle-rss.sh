#!/usr/bin/env bash
# What an idle `memsift daemon` costs: resident memory and CPU time of the release binary on a
# fresh SQLite store with the default configuration (MiniLM embeddings, heuristic lane).
#
# Usage: scripts/idle-rss.sh [--secs N] [--exercise] [--unload-secs N]
#   --secs N         seconds to stay idle after "Daemon ready." before measuring (default 20); CPU
#                    time is counted over the last N - 5 of them (all N when N <= 5)
#   --exercise       then import a few conversations, wait for the daemon to extract them (which
#                    loads the embedder), measure again, and once more after it released the embedder
#   --unload-secs N  [embeddings] idle_unload_secs for the run (default: the compiled-in 300)
# Reads VmRSS and VmHWM from /proc/PID/status and utime + stime from /proc/PID/stat. Needs a built
# release binary (MEMSIFT_BIN, default target/release/memsift) and the installed MiniLM model
# (`memsift model install`). Nothing leaves 127.0.0.1; the HTTP API stays off (no token).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/memsift}"
secs=20
exercise=0
unload_secs=""
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) secs="$2"; shift 2 ;;
        --exercise) exercise=1; shift ;;
        --unload-secs) unload_secs="$2"; shift 2 ;;
        *) echo "unknown argument $1; see the usage at the top of $0" >&2; exit 2 ;;
    esac
done
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
daemon_pid=""
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

: >"$work/memsift.toml"
if [ -n "$unload_secs" ]; then
    printf '[embeddings]\nidle_unload_secs = %s\n' "$unload_secs" >>"$work/memsift.toml"
fi
# The erasure key (and anything else of the data directory) goes to the work directory.
export STATE_DIRECTORY="$work"
m() { "$bin" --config "$work/memsift.toml" --database "$database" "$@"; }
m migrate >/dev/null

ticks() { getconf CLK_TCK; }
cpu_secs() { awk -v hz="$(ticks)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$daemon_pid/stat"; }
rss() { awk '/^VmRSS/ { printf "%.1f MB", $2 / 1024 }' "/proc/$daemon_pid/status"; }
hwm() { awk '/^VmHWM/ { printf "%.1f MB", $2 / 1024 }' "/proc/$daemon_pid/status"; }
wait_log() {
    local pattern="$1" limit="$2"
    for _ in $(seq 1 $((limit * 10))); do
        grep -q "$pattern" "$work/daemon.err" && return 0
        sleep 0.1
    done
    echo "no \"$pattern\" in the daemon's log after ${limit} s; see $work/daemon.err" >&2
    exit 1
}

# The load and release lines are info-level logs of memsift itself.
# The binary itself, not the `m` function: `$!` of a backgrounded function is its subshell.
MEMSIFT_LOG=memsift=info "$bin" --config "$work/memsift.toml" --database "$database" daemon \
    >"$work/daemon.out" 2>"$work/daemon.err" &
daemon_pid=$!
wait_log "Daemon ready" 30
echo "daemon pid $daemon_pid, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
window=$((secs > 5 ? secs - 5 : secs))
sleep $((secs - window))
cpu_before="$(cpu_secs)"
sleep "$window"
cpu_after="$(cpu_secs)"
echo "idle ${secs} s: RSS $(rss), peak RSS $(hwm), CPU $(python3 -c "print(round($cpu_after - $cpu_before, 2))") s over the last ${window} s"

if [ "$exercise" = 1 ]; then
    python3 - "$work/chat.jsonl" <<'PY'
import json, sys
facts = ["I live in Lisbon and I have a dog named Rex.", "I'm allergic to peanuts.",
         "I work as a nurse at the city hospital.", "My sister Clara lives in Porto."]
with open(sys.argv[1], "w") as out:
    for user_idx in range(8):
        for fact_idx, fact in enumerate(facts):
            last = fact_idx == len(facts) - 1
            for role, text in (("user", fact), ("assistant", "Good to know.")):
                out.write(json.dumps({"user": f"user-{user_idx}", "conversation": f"c{user_idx}",
                                      "role": role, "content": text, "timestamp": "2026-01-01T10:00:00Z",
                                      "boundary": last and role == "assistant"}) + "\n")
PY
    m import --format jsonl "$work/chat.jsonl" >/dev/null
    # run_pipeline fires every 30 s: the next tick extracts, loading the embedder.
    wait_log "Loaded the embedder" 60
    sleep 2
    echo "work extracted, embedder loaded: RSS $(rss), peak RSS $(hwm), CPU total $(cpu_secs) s"
    wait_log "Released the embedder" $(( ${unload_secs:-300} + 90 ))
    sleep 1
    echo "embedder released after ${unload_secs:-300} s unused: RSS $(rss), peak RSS $(hwm), CPU total $(cpu_secs) s"
fi
echo "work directory: $work"
