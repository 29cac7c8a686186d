#!/usr/bin/env bash
# LoCoMo-8 through the batch lane against `memsift sim`, with optional injected faults, and a
# summary of what happened (segments by status, memories, batches, polls, tokens, sim counters).
#
# Usage: scripts/locomo-batch.sh [--locomo PATH | PATH] [--database URL] [--faults FILE] [--kill-loop N]
#                                [--provider anthropic|openai] [--openai-url-without-v1]
#                                [--embeddings BACKEND] [--model-dir DIR] [--timeout SECS] [--timings]
#   --locomo PATH    the LoCoMo JSON file (locomo10.json format); or set LOCOMO
#   --database URL   default: a fresh SQLite file in a temporary directory
#   --faults FILE    a memsift-sim fault plan (TOML or JSON)
#   --kill-loop N    kill -9 `memsift run` N times at random moments, restarting it each time
#   --provider P     the batch provider the sim plays (default anthropic)
#   --openai-url-without-v1  configure the OpenAI endpoint without /v1, the setting mistake whose
#                    every files.create answers 404 (a setting fault: no attempt may be spent)
#   --embeddings B   [embeddings] backend (default minilm; `hashing` needs no model)
#   --model-dir DIR  [embeddings] model_dir: the static table `memsift distill` wrote (required
#                    with --embeddings static), or another MiniLM install
#   --timeout SECS   stop the final `run --until-idle` after SECS and report it (default: none)
#   --timings        the final run prints where its wall time went (`run --until-idle --timings`)
#   --max-continuations N  [extraction] max_continuations for the run (default: the compiled-in one)
# Needs: a built memsift (MEMSIFT_BIN, default target/release/memsift) and python3. LoCoMo is not
# part of this repository: see README, "Running on LoCoMo". Talks only to 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/memsift}"
locomo="${LOCOMO:-}"
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
faults=""
kills=0
provider=anthropic
without_v1=0
embeddings=minilm
model_dir=""
run_timeout=0
timings=()
max_continuations=""
while [ $# -gt 0 ]; do
    case "$1" in
        --locomo) locomo="$2"; shift 2 ;;
        --database) database="$2"; shift 2 ;;
        --faults) faults="$2"; shift 2 ;;
        --kill-loop) kills="$2"; shift 2 ;;
        --provider) provider="$2"; shift 2 ;;
        --openai-url-without-v1) without_v1=1; shift ;;
        --embeddings) embeddings="$2"; shift 2 ;;
        --model-dir) model_dir="$2"; shift 2 ;;
        --timings) timings=(--timings); shift ;;
        --max-continuations) max_continuations="$2"; shift 2 ;;
        --timeout) run_timeout="$2"; shift 2 ;;
        -*) echo "unknown argument $1" >&2; exit 2 ;;
        *) locomo="$1"; shift ;;
    esac
done
if [ -z "$locomo" ] || [ ! -f "$locomo" ]; then
    echo "name the LoCoMo JSON file with --locomo PATH (or LOCOMO=PATH)" >&2
    exit 2
fi
case "$provider" in
    anthropic) model="claude-haiku-4-5" ;;
    openai) model="gpt-4o-mini" ;;
    *) echo "--provider: use anthropic or openai, not $provider" >&2; exit 2 ;;
esac

sim_pid=""; run_pid=""
cleanup() {
    for pid in $run_pid $sim_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

sim_args=(sim --listen 127.0.0.1:0 --responder "locomo:$locomo")
[ -n "$faults" ] && sim_args+=(--faults "$faults")
"$bin" "${sim_args[@]}" >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
for _ in $(seq 1 100); do grep -q '^listening on ' "$work/sim.out" && break; sleep 0.1; done
sim_url="$(sed -n 's/^listening on //p' "$work/sim.out" | head -n 1)"
echo "sim: $sim_url"
echo "sim-key" >"$work/key"
endpoint="$sim_url"
if [ "$provider" = openai ] && [ "$without_v1" = 0 ]; then endpoint="$sim_url/v1"; fi
cat >"$work/memsift.toml" <<TOML
[batch]
pack_max_wait_secs = 1
poll_initial_secs = 1
poll_max_secs = 5
reconcile_grace_secs = 5

[extraction]
claim_lease_secs = 10
$([ -n "$max_continuations" ] && echo "max_continuations = $max_continuations")

[embeddings]
backend = "$embeddings"
$([ -n "$model_dir" ] && echo "model_dir = \"$model_dir\"")

[llm.extraction_standard]
provider = "$provider"
endpoint = "$endpoint"
model = "$model"
api_key_file = "$work/key"
lane = "batch"
max_tokens = 8192
TOML
m() { "$bin" --config "$work/memsift.toml" --database "$database" "$@"; }
# The embedding model is installed (pinned, verified) only on request; `run` never fetches it.
# `model install` writes to [embeddings] model_dir, which with --model-dir may hold a static table.
if [ "$embeddings" = minilm ]; then m model install >/dev/null; fi
m import --format locomo "$locomo"
started=$(date +%s.%N)
if [ "$kills" -gt 0 ]; then
    for kill_idx in $(seq 1 "$kills"); do
        # The binary itself, not the `m` function: `$!` of a backgrounded function is its subshell,
        # and killing that would leave memsift running (an earlier version of this loop did).
        "$bin" --config "$work/memsift.toml" --database "$database" run --until-idle >>"$work/run.log" 2>&1 &
        run_pid=$!
        sleep "0.$(( RANDOM % 9 + 1 ))$(( RANDOM % 10 ))"
        if kill -0 "$run_pid" 2>/dev/null; then kill -9 "$run_pid" 2>/dev/null || true; fi
        wait "$run_pid" 2>/dev/null || true
        run_pid=""
    done
    echo "killed memsift run $kills times"
    if pgrep -f "$work/memsift.toml" >/dev/null; then
        echo "a killed memsift run is still alive; the soak is invalid" >&2
        exit 1
    fi
fi
run_status=0
# With --timings the final run's own CPU time is reported too: wall time alone says little on a
# machine shared with other work.
timed_run=()
if [ "${#timings[@]}" -gt 0 ] && [ -x /usr/bin/time ]; then
    timed_run=(/usr/bin/time -f "run --until-idle process: %e s wall, %U s user + %S s system CPU, peak RSS %M KB" -o "$work/final-run.time")
fi
if [ "$run_timeout" -gt 0 ]; then
    "${timed_run[@]}" timeout "$run_timeout" "$bin" --config "$work/memsift.toml" --database "$database" run --until-idle "${timings[@]}" \
        >"$work/final-run.out" 2>"$work/final-run.err" || run_status=$?
else
    "${timed_run[@]}" "$bin" --config "$work/memsift.toml" --database "$database" run --until-idle "${timings[@]}" \
        >"$work/final-run.out" 2>"$work/final-run.err" || run_status=$?
fi
finished=$(date +%s.%N)
cat "$work/final-run.out"
case "$run_status" in
    0) echo "run --until-idle: exit 0" ;;
    124) echo "run --until-idle: still running after ${run_timeout} s, stopped (exit 124)" ;;
    *) echo "run --until-idle: exit $run_status: $(grep '^error' "$work/final-run.err" | tail -n 1)" ;;
esac
echo "wall seconds (final run included): $(python3 -c "print(round($finished - $started, 2))")"
[ -f "$work/final-run.time" ] && cat "$work/final-run.time"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
counters="$(curl -s "$sim_url/_sim/counters")"
m segments --json >"$work/segments.json"
m batches --json >"$work/batches.json"
m requests --json >"$work/requests.json"
# Every drop with what it duplicated, for reading the dedupe stages' decisions by eye.
python3 - "$work/requests.json" >"$work/dropped.ids" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["n_dropped"] > 0 and r["status"] == "applied":
        print(r["id"])
PY
while read -r id; do m show "$id" --json; done <"$work/dropped.ids" >"$work/drops.jsonl"
for user in $(python3 -c "import json,sys; print(' '.join(sorted({s['user'] for s in json.load(open(sys.argv[1]))})))" "$work/segments.json"); do
    m memories --user "$user" --json
done >"$work/memories.jsonl"
python3 - "$work" "$counters" <<'PY'
import collections, json, sys
work, counters = sys.argv[1], json.loads(sys.argv[2])
segments = json.load(open(f"{work}/segments.json"))
batches = json.load(open(f"{work}/batches.json"))
requests = json.load(open(f"{work}/requests.json"))
by_status = collections.Counter(s["status"] for s in segments)
print("segments:", len(segments), dict(by_status))
lost = [s for s in segments if s["status"] not in ("extracted", "dead")]
print("lost segments (neither extracted nor dead):", len(lost))
dead = [s for s in segments if s["status"] == "dead"]
for s in dead[:5]:
    print("  dead:", s["conversation_key"], s["name"], "-", s["last_error"])
print("memories:", sum(s["n_memories"] for s in segments))
applied = collections.Counter((r["segment_id"], r["chunk_index"]) for r in requests if r["status"] == "applied")
print("double-applied chunks:", sum(1 for n in applied.values() if n > 1))
print("requests by status:", dict(collections.Counter(r["status"] for r in requests)))
print("requests past their first attempt:", sum(1 for r in requests if r["attempt"] > 1))
tracked = [b for b in batches if b["provider_batch_id"]]
print("batches recorded:", len(batches), "with a provider id:", len(tracked), "| sim creates:", counters["creates"])
print("duplicate provider batches (sim creates - tracked):", counters["creates"] - len(tracked))
print("batches by status:", dict(collections.Counter(b["status"] for b in batches)))
polls = [b["n_polls"] for b in tracked]
if polls:
    print("polls per batch: mean %.1f, max %d | sim polls %d, result downloads %d" % (sum(polls) / len(polls), max(polls), counters["polls"], counters["result_downloads"]))
inp = sum(r["input_tokens"] for r in requests)
out = sum(r["output_tokens"] for r in requests)
print("input tokens (uncached) per extracted segment: %.0f" % (inp / max(1, by_status["extracted"])))
cache_read = sum(r["cache_read_tokens"] for r in requests)
cache_write = sum(r["cache_creation_tokens"] for r in requests)
prompt = inp + cache_read + cache_write
print("prompt tokens: %d uncached, %d cache writes, %d cache reads; share served from cache %.1f%%" % (inp, cache_write, cache_read, 100.0 * cache_read / max(1, prompt)))
# Every request of a chunk after its first is a continuation or a re-plan of a failed attempt.
first_of_chunk = {}
for r in sorted(requests, key=lambda r: r["created_at"]):
    first_of_chunk.setdefault((r["segment_id"], r["chunk_index"]), r["id"])
later = [r for r in requests if first_of_chunk[(r["segment_id"], r["chunk_index"])] != r["id"]]
print("later requests of a chunk (continuations, re-plans): %d, %d input + %d output tokens, $%.4f" % (len(later), sum(r["input_tokens"] for r in later), sum(r["output_tokens"] for r in later), sum(r["cost_usd"] for r in later)))
print("output tokens:", out, "| per extracted segment: %.1f" % (out / max(1, by_status["extracted"])), "| cost $%.4f" % sum(r["cost_usd"] for r in requests))
print("faults injected:", counters.get("faults", {}))
texts = {}
decoder = json.JSONDecoder()
def documents(path):
    text, position = open(path).read(), 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return
        value, position = decoder.raw_decode(text, position)
        yield value
for listing in documents(f"{work}/memories.jsonl"):
    for memory in listing:
        texts[memory["id"]] = memory["text"]
reasons = collections.Counter()
pairs = []
for detail in documents(f"{work}/drops.jsonl"):
    for drop in detail["drops"]:
        reasons[drop["reason"]] += 1
        if drop["reason"] in ("duplicate_by_vector", "near_duplicate_of_known") and drop.get("duplicate_of"):
            pairs.append((drop["reason"], drop.get("score") or 0.0, drop.get("text") or "", texts.get(drop["duplicate_of"], "(archived or another request's item)")))
print("items dropped by reason:", dict(reasons))
with open(f"{work}/dropped-pairs.txt", "w") as out:
    for reason, score, dropped, kept in sorted(pairs, key=lambda pair: pair[1]):
        out.write(f"{reason} {score:.3f}\n  dropped: {dropped}\n  kept:    {kept}\n")
print(f"dropped pairs against stored memories: {len(pairs)} (lowest scores first in {work}/dropped-pairs.txt)")
for reason, score, dropped, kept in sorted(pairs, key=lambda pair: pair[1])[:5]:
    print(f"  {reason} {score:.3f}: {dropped!r} ~ {kept!r}")
PY
# The provider lanes that are paused or unwell, as `memsift batches` prints them under its table.
m batches --limit 1 | grep '^lane ' || echo "provider lanes: all healthy"
echo "work directory: $work"
