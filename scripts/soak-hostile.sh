#!/usr/bin/env bash
# The hostile soak: LoCoMo-8 plus messages of almost 1 MiB posted through the HTTP API, through
# `memsift daemon` on the batch lane of `memsift sim`, whose fault plan writes U+0000 and prose
# into answers, cuts answers short, and answers bursts of 401 and 404 to batch creates and polls.
# At the end it counts what must be zero: segments lost (neither extracted nor dead), chunks
# applied twice, answers left `succeeded`, and segments dead because of a setting fault.
#
# Usage: scripts/soak-hostile.sh [--database URL] [--big-messages N] [--timeout SECS] [LOCOMO_FILE]
#   --database URL     default: a fresh SQLite file in a temporary directory
#   --big-messages N   messages of almost 1 MiB posted through the API (default 3)
#   --timeout SECS     give up waiting for the daemon after SECS (default 1200)
#   LOCOMO_FILE        default: $LOCOMO (LoCoMo is not part of this repository: see README,
#                      "Running on LoCoMo")
# Needs: a built memsift (MEMSIFT_BIN, default target/debug/memsift), python3, curl. Talks only
# to 127.0.0.1. Exits 1 when any of the four counts is not zero.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source=scripts/common.sh
. "$here/common.sh"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/memsift}"
locomo="${LOCOMO:-}"
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
big_messages=3
wait_secs=1200
while [ $# -gt 0 ]; do
    case "$1" in
        --database) database="$2"; shift 2 ;;
        --big-messages) big_messages="$2"; shift 2 ;;
        --timeout) wait_secs="$2"; shift 2 ;;
        -*) echo "unknown argument $1" >&2; exit 2 ;;
        *) locomo="$1"; shift ;;
    esac
done
if [ -z "$locomo" ] || [ ! -f "$locomo" ]; then
    echo "name the LoCoMo JSON file as the last argument (or LOCOMO=PATH)" >&2
    exit 2
fi

sim_pid=""; daemon_pid=""
cleanup() {
    for pid in $daemon_pid $sim_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# The fault plan: every hostile answer a provider can give that memsift must survive.
cat >"$work/faults.toml" <<'TOML'
seed = 13
nul_share = 0.15
malformed_share = 0.15
malformed_kinds = ["prose"]
truncated_share = 0.1

# A key refused for a while (as if rotated): creates and polls answer 401.
[auth_error]
skip = 1
first = 3
endpoints = ["anthropic.batches.create", "anthropic.batches.retrieve"]

# A base URL that answers 404 for a while (a proxy misrouted): creates answer 404.
[not_found]
skip = 4
first = 2
endpoints = ["anthropic.batches.create"]
TOML

start_sim "$work" --responder "locomo:$locomo" --faults "$work/faults.toml"
api_port="$(free_port)"
echo "sim: $sim_url; API: http://127.0.0.1:$api_port"
echo "sim-key" >"$work/key"
cat >"$work/memsift.toml" <<TOML
[batch]
# Small batches, so the bursts land on many creates and polls.
max_requests_per_batch = 20
pack_max_wait_secs = 1
poll_initial_secs = 1
poll_max_secs = 5
reconcile_grace_secs = 5

[extraction]
claim_lease_secs = 30

[embeddings]
backend = "hashing"

[health]
cool_down_secs = 2
max_cool_down_secs = 16

[api]
listen = "127.0.0.1:$api_port"

[schedules]
run_pipeline = "* * * * * *"

[llm.extraction_standard]
provider = "anthropic"
endpoint = "$sim_url"
model = "claude-haiku-4-5"
api_key_file = "$work/key"
lane = "batch"
max_tokens = 8192
TOML
m() { "$bin" --config "$work/memsift.toml" --database "$database" "$@"; }
export MEMSIFT_API_TOKEN="soak-token"
m import --format locomo "$locomo"
# The binary itself, not the `m` function: `$!` of a backgrounded function is its subshell, and
# SIGTERM to that would leave the daemon running.
MEMSIFT_LOG="${MEMSIFT_LOG:-warn,memsift::health=info}" \
    "$bin" --config "$work/memsift.toml" --database "$database" daemon >"$work/daemon.out" 2>"$work/daemon.err" &
daemon_pid=$!
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$api_port/healthz" >/dev/null && break; sleep 0.1; done

# Messages of almost 1 MiB (the API's default body limit), one closed segment each.
python3 - "$big_messages" "$work" <<'PY'
import json, sys
count, work = int(sys.argv[1]), sys.argv[2]
for n in range(count):
    words = (f"I keep a field journal about alpine birds, entry {n}, and ") * 18_000
    body = [{"conversation": f"big-{n}", "role": "user", "content": words[:1_000_000],
             "timestamp": "2026-03-01T10:00:00Z", "boundary": True}]
    with open(f"{work}/big-{n}.json", "w") as out:
        json.dump(body, out)
PY
posted=0
for n in $(seq 0 $((big_messages - 1))); do
    status="$(curl -s -o "$work/big-$n.answer" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $MEMSIFT_API_TOKEN" -H 'content-type: application/json' \
        --data-binary "@$work/big-$n.json" "http://127.0.0.1:$api_port/v1/users/soak-big/messages")"
    echo "POST big message $n ($(stat -c %s "$work/big-$n.json") bytes): HTTP $status"
    [ "$status" = 200 ] && posted=$((posted + 1))
done

started=$(date +%s)
while :; do
    m segments --json >"$work/segments.json"
    m requests --json >"$work/requests.json"
    pending="$(python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
segments = json.load(open(f"{work}/segments.json"))
requests = json.load(open(f"{work}/requests.json"))
waiting = sum(1 for s in segments if s["status"] not in ("extracted", "dead"))
unapplied = sum(1 for r in requests if r["status"] in ("planned", "submitted", "succeeded"))
print(waiting + unapplied)
PY
)"
    elapsed=$(( $(date +%s) - started ))
    if [ "$pending" = 0 ]; then echo "all work finished after ${elapsed} s"; break; fi
    if [ "$elapsed" -ge "$wait_secs" ]; then echo "still $pending items pending after ${elapsed} s"; break; fi
    if ! kill -0 "$daemon_pid" 2>/dev/null; then echo "the daemon died:"; tail -n 5 "$work/daemon.err"; break; fi
    sleep 5
done
kill -TERM "$daemon_pid" 2>/dev/null || true
daemon_status=0; wait "$daemon_pid" || daemon_status=$?
daemon_pid=""
echo "daemon exit after SIGTERM: $daemon_status"

counters="$(curl -s "$sim_url/_sim/counters")"
m segments --json >"$work/segments.json"
m requests --json >"$work/requests.json"
m batches --json >"$work/batches.json"
m batches --limit 1 | grep '^lane ' || echo "provider lanes: all healthy at the end"
echo "lane pauses logged: $(grep -c 'Lane paused by a setting fault' "$work/daemon.err" || true); resumed: $(grep -c 'Lane healthy again' "$work/daemon.err" || true)"
python3 - "$work" "$counters" "$posted" <<'PY'
import collections, json, sys
work, counters, posted = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
segments = json.load(open(f"{work}/segments.json"))
requests = json.load(open(f"{work}/requests.json"))
batches = json.load(open(f"{work}/batches.json"))
print("segments:", len(segments), dict(collections.Counter(s["status"] for s in segments)))
print("big messages posted:", posted, "| their segments:",
      dict(collections.Counter(s["status"] for s in segments if s["user"] == "soak-big")))
print("requests by status:", dict(collections.Counter(r["status"] for r in requests)))
print("batches by status:", dict(collections.Counter(b["status"] for b in batches)))
print("faults injected:", counters.get("faults", {}))
lost = [s for s in segments if s["status"] not in ("extracted", "dead")]
applied = collections.Counter((r["segment_id"], r["chunk_index"]) for r in requests if r["status"] == "applied")
double = sum(1 for n in applied.values() if n > 1)
succeeded = sum(1 for r in requests if r["status"] == "succeeded")
setting_words = ("paused", "setting fault", "not authorised", "not found (", "likely fix")
dead = [s for s in segments if s["status"] == "dead"]
dead_setting = [s for s in dead if any(word in (s["last_error"] or "") for word in setting_words)]
print("lost:", len(lost), "| double-applied:", double, "| left succeeded:", succeeded,
      "| dead from setting faults:", len(dead_setting), "| dead otherwise:", len(dead) - len(dead_setting))
for s in dead[:5]:
    print("  dead:", s["conversation_key"], s["name"], "-", (s["last_error"] or "")[:200])
sys.exit(1 if (lost or double or succeeded or dead_setting) else 0)
PY
echo "work directory: $work"
