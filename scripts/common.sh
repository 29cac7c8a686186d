#!/usr/bin/env bash
# Sourced by the LoCoMo and soak scripts, never run: start the simulator, pick a free port, write
# batch-lane `[llm.*]` sections, and age a store so refinement and entity GC have work.
# Callers set `bin` (the memsift binary) and, for age_store, define `m` (memsift with their config
# and database).

# start_sim DIR SIM_ARGS...: `memsift sim` on a free port, logging to DIR; sets sim_pid, sim_url.
start_sim() {
    local dir="$1"
    shift
    "$bin" sim --listen 127.0.0.1:0 "$@" >"$dir/sim.out" 2>"$dir/sim.err" &
    sim_pid=$!
    for _ in $(seq 1 100); do grep -q '^listening on ' "$dir/sim.out" && break; sleep 0.1; done
    sim_url="$(sed -n 's/^listening on //p' "$dir/sim.out" | head -n 1)"
    if [ -z "$sim_url" ]; then
        echo "memsift sim did not start: $(tail -n 3 "$dir/sim.err")" >&2
        return 1
    fi
}

# free_port: a TCP port on 127.0.0.1 nobody listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# batch_llm_sections URL MODEL KEY_FILE: one batch-lane `[llm.<purpose>_standard]` section per
# purpose, all against URL, so every stage goes through the provider's batch API.
batch_llm_sections() {
    local purpose
    for purpose in extraction relationship consolidation consolidation_review refinement entity_gc summary; do
        printf '[llm.%s_standard]\nprovider = "anthropic"\nendpoint = "%s"\nmodel = "%s"\napi_key_file = "%s"\nlane = "batch"\nmax_tokens = 8192\n\n' \
            "$purpose" "$1" "$2" "$3"
    done
}

# age_store DATABASE: refinement needs memories 7+ days old and read 3+ times, entity GC entities
# dormant 45 days, and a CLI run cannot let time pass; so every memory's and entity's timestamps
# move 60 days back (python3's sqlite3, or psql on PostgreSQL) and each user's memories are listed
# three times (a listing counts as a read). Say so when quoting refinement or entity GC figures.
age_store() {
    local database="$1" users
    case "$database" in
        sqlite://*)
            python3 - "${database#sqlite://}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# SQLite stores times as RFC 3339 text.
for table, columns in {"memories": ["created_at", "updated_at"], "entities": ["created_at", "last_linked_at"]}.items():
    for column in columns:
        db.execute(f"UPDATE {table} SET {column} = strftime('%Y-%m-%dT%H:%M:%f+00:00', {column}, '-60 days') WHERE {column} IS NOT NULL")
db.commit()
PY
            ;;
        *)
            psql -q -v ON_ERROR_STOP=1 "$database" \
                -c "UPDATE memories SET created_at = created_at - interval '60 days', updated_at = updated_at - interval '60 days'" \
                -c "UPDATE entities SET created_at = created_at - interval '60 days', last_linked_at = last_linked_at - interval '60 days' WHERE last_linked_at IS NOT NULL"
            ;;
    esac
    users="$(m segments --json | python3 -c 'import json,sys; print(" ".join(sorted({s["user"] for s in json.load(sys.stdin)})))')"
    for _ in 1 2 3; do for user in $users; do m memories --user "$user" --json >/dev/null; done; done
}
