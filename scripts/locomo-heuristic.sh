#!/usr/bin/env bash
# LoCoMo through memsift's default configuration, the offline heuristic lane (no key, no network,
# no spend) with MiniLM dedupe, into a fresh SQLite database; then the memory-quality figures:
# observation recall, the share of memories matching an observation (precision), memories per
# observation, and QA evidence coverage (scripts/locomo-quality.py).
#
# Usage: scripts/locomo-heuristic.sh LOCOMO.json [--database URL] [--keep]
#   LOCOMO.json     the LoCoMo file (locomo10.json format); it is read, never copied
#   --database URL  default: a fresh SQLite file in a temporary directory
#   --keep          keep the temporary directory (its path is printed)
# Needs: a built memsift (MEMSIFT_BIN, default ${CARGO_TARGET_DIR:-target}/debug/memsift), the
# MiniLM files (`memsift model install`, which this script runs) and python3.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
bin="${MEMSIFT_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/memsift}"
locomo=""
work="$(mktemp -d)"
database="sqlite://$work/memsift.db"
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --database) database="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        -*) echo "unknown argument $1" >&2; exit 2 ;;
        *) locomo="$1"; shift ;;
    esac
done
if [ -z "$locomo" ] || [ ! -f "$locomo" ]; then
    echo "name the LoCoMo JSON file: scripts/locomo-heuristic.sh LOCOMO.json" >&2
    exit 2
fi
if [ ! -x "$bin" ]; then
    echo "no memsift binary at $bin: build it (cargo build -p memsift) or set MEMSIFT_BIN" >&2
    exit 2
fi
if [ "$keep" = 0 ]; then trap 'rm -rf "$work"' EXIT; else echo "work directory: $work"; fi
m() { "$bin" --database "$database" "$@"; }
m model install >/dev/null
m import --format locomo "$locomo"
started=$(date +%s.%N)
m run --until-idle >"$work/run.out" 2>"$work/run.err"
finished=$(date +%s.%N)
echo "run --until-idle: $(python3 -c "print(f'{$finished - $started:.1f}')") s wall"
case "$database" in
    sqlite://*) python3 "$here/locomo-quality.py" "${database#sqlite://}" "$locomo" --recall ;;
    *) echo "the quality figures read a SQLite file; query $database yourself" >&2 ;;
esac
