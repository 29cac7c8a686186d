#!/usr/bin/env bash
# The kill -9 soak beyond extraction: LoCoMo-8 through the batch lane of `memsift sim`, then
# `memsift postprocess all` (every stage on the batch lane, answered by the offline judge) or
# `memsift daemon` with its HTTP API on (every job scheduled every few seconds, messages posted
# through the API meanwhile) killed with SIGKILL at random moments and restarted, N times; then
# one clean run to the end. It counts what must be zero afterwards:
#   - segments lost (neither extracted nor dead), chunks applied twice, answers left unapplied;
#   - stage answers journaled twice (two `operations` rows for one request);
#   - provider batches created but not tracked (sim creates - batches with a provider id);
#   - memories whose `superseded_by` names no memory, active links to archived memories;
#   - (daemon) messages acknowledged by the API but not stored, or stored twice.
#
# Usage: scripts/soak-kill.sh --in postprocess|daemon [--kills N] [--database URL] LOCOMO_FILE
#   --in           what is killed: `postprocess` (`memsift postprocess all`) or `daemon`
#   --kills N      how many times (default 50)
#   --database URL default: a fresh SQLite file in a temporary directory; a PostgreSQL URL must
#                  name an empty database (psql is used to age its timestamps)
#   LOCOMO_FILE    or $LOCOMO (LoCoMo is not part of this repository: see README, "Running on LoCoMo")
# Needs: a built memsift (MEMSIFT_BIN, default target/release/memsift), python3, curl, and psql for
# PostgreSQL. Talks only to 127.0.0.1. Exits 1 when any count is not zero.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source=scripts/common.sh
. "$here/common.sh"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/memsift}"
locomo="${LOCOMO:-}"
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
target=""
kills=50
while [ $# -gt 0 ]; do
    case "$1" in
        --in) target="$2"; shift 2 ;;
        --kills) kills="$2"; shift 2 ;;
        --database) database="$2"; shift 2 ;;
        -*) echo "unknown argument $1" >&2; exit 2 ;;
        *) locomo="$1"; shift ;;
    esac
done
case "$target" in
    postprocess|daemon) ;;
    *) echo "--in takes postprocess or daemon" >&2; exit 2 ;;
esac
if [ -z "$locomo" ] || [ ! -f "$locomo" ]; then
    echo "name the LoCoMo JSON file as the last argument (or LOCOMO=PATH)" >&2
    exit 2
fi

sim_pid=""; victim_pid=""
cleanup() {
    for pid in $victim_pid $sim_pid; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

start_sim "$work" --responder "locomo:$locomo"
api_port="$(free_port)"
echo "sim: $sim_url; kills: $kills in $target"
echo "sim-key" >"$work/key"
{
    printf '[batch]\nmax_requests_per_batch = 40\npack_max_wait_secs = 1\npoll_initial_secs = 1\npoll_max_secs = 3\nreconcile_grace_secs = 3\n\n'
    printf '[extraction]\nclaim_lease_secs = 5\n\n[embeddings]\nbackend = "hashing"\n\n'
    printf '[api]\nlisten = "127.0.0.1:%s"\n\n' "$api_port"
    printf '[schedules]\nrun_pipeline = "* * * * * *"\nclose_idle_segments = "*/2 * * * * *"\nsweep = "*/7 * * * * *"\n'
    printf 'relationships = "*/3 * * * * *"\nsummaries = "*/4 * * * * *"\nconsolidation = "*/5 * * * * *"\n'
    printf 'refinement = "*/6 * * * * *"\nentity_gc = "*/8 * * * * *"\nscoring = "*/9 * * * * *"\n\n'
    batch_llm_sections "$sim_url" claude-haiku-4-5 "$work/key"
} >"$work/memsift.toml"
m() { "$bin" --config "$work/memsift.toml" --database "$database" "$@"; }
export MEMSIFT_API_TOKEN="soak-kill-token-0123456789abcdef0123456789"
m import --format locomo "$locomo" >/dev/null

# Messages posted through the API while the daemon is killed and restarted: each carries an id,
# and a message is posted again until the API acknowledges it (ingest by id is idempotent).
posted=0
post_message() {
    local n="$1" status
    local body="[{\"conversation\": \"kill-soak-$n\", \"id\": \"kill-soak-msg-$n\", \"role\": \"user\", \"content\": \"My name is Rowan and I moved to Lisbon in 2024; note $n.\", \"timestamp\": \"2026-03-01T10:00:00Z\", \"boundary\": true}]"
    status="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST \
        -H "Authorization: Bearer $MEMSIFT_API_TOKEN" -H 'content-type: application/json' \
        --data-binary "$body" "http://127.0.0.1:$api_port/v1/users/kill-soak/messages" || true)"
    [ "$status" = 200 ]
}

started=$(date +%s)
if [ "$target" = postprocess ]; then
    m run --until-idle >/dev/null
    age_store "$database"
    for _ in $(seq 1 "$kills"); do
        "$bin" --config "$work/memsift.toml" --database "$database" postprocess all >>"$work/victim.log" 2>&1 &
        victim_pid=$!
        sleep "$(( RANDOM % 3 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
        kill -9 "$victim_pid" 2>/dev/null || true
        wait "$victim_pid" 2>/dev/null || true
        victim_pid=""
    done
    m postprocess all >"$work/final.out" 2>"$work/final.err"
    m run --until-idle >>"$work/final.out" 2>>"$work/final.err"
else
    # The first pass extracts (and already post-processes, on schedule); the store is aged once
    # memories exist, between two kills, so refinement and entity GC have work too.
    next_message=0
    for kill_idx in $(seq 1 "$kills"); do
        "$bin" --config "$work/memsift.toml" --database "$database" daemon >>"$work/victim.log" 2>&1 &
        victim_pid=$!
        for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$api_port/healthz" >/dev/null && break; sleep 0.05; done
        if post_message "$next_message"; then
            posted=$((posted + 1)); next_message=$((next_message + 1))
        fi
        sleep "$(( RANDOM % 3 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
        kill -9 "$victim_pid" 2>/dev/null || true
        wait "$victim_pid" 2>/dev/null || true
        victim_pid=""
        if [ "$kill_idx" = $((kills / 2)) ]; then age_store "$database"; fi
    done
    # The last message, if its acknowledgement was lost to a kill, is posted again now.
    "$bin" --config "$work/memsift.toml" --database "$database" daemon >>"$work/victim.log" 2>&1 &
    victim_pid=$!
    for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$api_port/healthz" >/dev/null && break; sleep 0.05; done
    post_message "$next_message" && posted=$((posted + 1))
    kill -TERM "$victim_pid"; wait "$victim_pid" || true; victim_pid=""
    m run --until-idle >"$work/final.out" 2>"$work/final.err"
    for stage in relationships consolidation refinement entity-gc summaries; do
        m postprocess "$stage" >>"$work/final.out" 2>>"$work/final.err"
    done
fi
echo "killed $kills times; final run exit 0 after $(( $(date +%s) - started )) s"
if pgrep -f "$work/memsift.toml" >/dev/null; then
    echo "a killed memsift is still alive; the soak is invalid" >&2
    exit 1
fi

counters="$(curl -s "$sim_url/_sim/counters")"
m segments --json >"$work/segments.json"
m batches --json >"$work/batches.json"
m requests --json >"$work/requests.json"
# The journal and the memory links, read with SQL: the listings show neither whole.
query() {
    case "$database" in
        sqlite://*) python3 -c 'import json,sqlite3,sys; db=sqlite3.connect(sys.argv[1]); print(json.dumps([list(r) for r in db.execute(sys.argv[2])]))' "${database#sqlite://}" "$1" ;;
        *) psql -At "$database" -c "SELECT coalesce(json_agg(row_to_json(x)), '[]') FROM ($1) AS x" ;;
    esac
}
query "SELECT request_id, COUNT(*) FROM operations WHERE request_id IS NOT NULL GROUP BY request_id HAVING COUNT(*) > 1" >"$work/double-journal.json"
query "SELECT m.id FROM memories m WHERE m.superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories s WHERE s.id = m.superseded_by)" >"$work/dangling.json"
query "SELECT kind, COUNT(*) FROM operations GROUP BY kind ORDER BY kind" >"$work/journal.json"
query "SELECT external_id, COUNT(*) FROM messages WHERE external_id LIKE 'kill-soak-msg-%' GROUP BY external_id" >"$work/api-messages.json"
python3 - "$work" "$counters" "$target" "$posted" <<'PY'
import collections, json, sys
work, counters, target, posted = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
load = lambda name: json.load(open(f"{work}/{name}"))
# SQL results: SQLite rows arrive as lists, PostgreSQL's as objects (row_to_json); both become lists.
rows = lambda name: [list(row.values()) if isinstance(row, dict) else row for row in load(name)]
segments, batches, requests = load("segments.json"), load("batches.json"), load("requests.json")
bad = {}
print("segments:", len(segments), dict(collections.Counter(s["status"] for s in segments)))
bad["segments lost (neither extracted nor dead)"] = sum(1 for s in segments if s["status"] not in ("extracted", "dead"))
applied = collections.Counter((r["segment_id"], r["chunk_index"]) for r in requests if r["status"] == "applied" and r["purpose"] == "extraction")
bad["extraction chunks applied twice"] = sum(1 for n in applied.values() if n > 1)
print("requests by purpose and status:", dict(collections.Counter(f'{r["purpose"]}:{r["status"]}' for r in requests)))
bad["answers left unapplied (planned, submitted, succeeded)"] = sum(1 for r in requests if r["status"] in ("planned", "submitted", "succeeded"))
bad["stage answers journaled twice"] = len(rows("double-journal.json"))
tracked = sum(1 for b in batches if b["provider_batch_id"])
print("batches:", len(batches), dict(collections.Counter(b["status"] for b in batches)), "| sim creates:", counters["creates"])
bad["provider batches created but not tracked"] = counters["creates"] - tracked
bad["superseded_by naming no memory"] = len(rows("dangling.json"))
print("journal by kind:", dict((k, n) for k, n in rows("journal.json")))
print("memories:", sum(s["n_memories"] for s in segments))
if target == "daemon":
    stored = dict((k, n) for k, n in rows("api-messages.json"))
    print("API messages acknowledged:", posted, "| stored:", len(stored))
    bad["API messages acknowledged but not stored"] = max(0, posted - len(stored))
    bad["API messages stored twice"] = sum(1 for n in stored.values() if n > 1)
for what, n in bad.items():
    print(f"{what}: {n}")
sys.exit(1 if any(bad.values()) else 0)
PY
echo "work directory: $work"
