#!/usr/bin/env bash
# LoCoMo-8 extracted through the batch lane against `memsift sim` (locomo responder), then every
# post-processing stage through the same batch lane (the simulator answers those requests with the
# offline judge), printing the store's shape before and after each stage: links by kind, clusters
# consolidated, memories refined, entities merged, summaries, and the tokens per classified pair.
#
# Refinement needs memories 7+ days old and read 3+ times, and entity GC entities dormant 45 days;
# a fresh import has neither, so between extraction and the stages the script lets time pass the
# only way a CLI run can: it moves every memory's and entity's timestamps 60 days back (python3's
# sqlite3, on the script's own SQLite file) and lists each user's memories three times (`memsift
# memories` counts as a read). Say so when quoting its refinement and entity GC figures.
# It also prints the memory-quality figures of scripts/locomo-quality.py after extraction and
# after the stages.
#
# Usage: scripts/locomo-postprocess.sh --locomo PATH [--responder locomo|heuristic] [--model M]
#                                      [--stages "relationships …"] [--dump FILE]
#   --locomo      the LoCoMo JSON file (locomo10.json format); or set LOCOMO
#   --responder   who answers extraction in the simulator: `locomo` (default; LoCoMo's own
#                 observations, which name no entities) or `heuristic` (the offline extraction
#                 rules, which do, so entity GC has something to review)
#   --model       the Anthropic model every request names (default claude-haiku-4-5); the simulator
#                 counts cache hits by that model's rules in the built-in price table
#   --stages      the post-processing stages to run, in this order (default: all five)
#   --dump FILE   write every applied batch request of the run as one JSON line each (what
#                 scripts/cost-compare.sh prices): purpose, segment, batch, system and user text,
#                 raw output, usage and recorded cost
# Needs: a built memsift (MEMSIFT_BIN, default target/release/memsift) and python3. LoCoMo is not
# part of this repository: see README, "Running on LoCoMo". Talks only to 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source=scripts/common.sh
. "$here/common.sh"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/memsift}"
locomo="${LOCOMO:-}"
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
responder_kind="locomo"
model="claude-haiku-4-5"
stages="relationships consolidation refinement entity-gc summaries"
dump=""
while [ $# -gt 0 ]; do
    case "$1" in
        --locomo) locomo="$2"; shift 2 ;;
        --responder)
            case "$2" in
                locomo|heuristic) responder_kind="$2" ;;
                *) echo "--responder takes locomo or heuristic, not $2" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --model) model="$2"; shift 2 ;;
        --stages) stages="$2"; shift 2 ;;
        --dump) dump="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$locomo" ] || [ ! -f "$locomo" ]; then
    echo "name the LoCoMo JSON file with --locomo PATH (or LOCOMO=PATH)" >&2
    exit 2
fi
case "$responder_kind" in
    locomo) responder="locomo:$locomo" ;;
    heuristic) responder="heuristic" ;;
esac

sim_pid=""
cleanup() {
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

start_sim "$work" --responder "$responder"
echo "sim: $sim_url"
echo "sim-key" >"$work/key"
{
    printf '[batch]\npack_max_wait_secs = 1\npoll_initial_secs = 1\npoll_max_secs = 5\nreconcile_grace_secs = 5\n\n'
    batch_llm_sections "$sim_url" "$model" "$work/key"
} >"$work/memsift.toml"
m() { "$bin" --config "$work/memsift.toml" --database "$database" "$@"; }
# The embedding model is installed (pinned, verified) only on request; `run` never fetches it.
m model install >/dev/null
m import --format locomo "$locomo" >/dev/null
m run --until-idle >/dev/null
echo "extracted: $(m segments --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(len(s), "segments,", sum(x["n_memories"] for x in s), "memories")')"
python3 "$here/locomo-quality.py" "$work/memsift.db" "$locomo" --baseline --recall

case " $stages " in
    *" refinement "* | *" entity-gc "*)
        age_store "$database"
        echo "time moved 60 days on; each memory read 3 times"
        ;;
esac

for stage in $stages; do
    m postprocess "$stage"
done
echo "after the stages:"
python3 "$here/locomo-quality.py" "$work/memsift.db" "$locomo"
echo "journal by kind:"
python3 - "$work/memsift.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for kind, n in db.execute("SELECT kind, COUNT(*) FROM operations GROUP BY kind ORDER BY kind"):
    print(f"  {kind}: {n}")
PY
if [ -n "$dump" ]; then
    python3 - "$work/memsift.db" "$dump" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.row_factory = sqlite3.Row
with open(sys.argv[2], "w") as out:
    for row in db.execute(
        "SELECT purpose, segment_id, batch_id, request_body, raw_output, input_tokens, output_tokens,"
        " cache_creation_tokens, cache_read_tokens, cost_usd FROM llm_requests"
        " WHERE status = 'applied' AND lane = 'batch' ORDER BY created_at"
    ):
        record = {key: row[key] for key in row.keys() if key != "request_body"}
        body = json.loads(row["request_body"] or "{}")
        record["system"] = body.get("system", "")
        record["user_message"] = body.get("user_message", "")
        out.write(json.dumps(record) + "\n")
PY
    echo "requests written to $dump"
fi
echo "work directory: $work"
