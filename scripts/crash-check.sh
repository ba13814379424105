#!/usr/bin/env bash
# Kills ckport with SIGKILL at random moments of an import, a restore and a migrate apply, and
# checks after each kill that the store opens, that SQLite's integrity check says ok, and that
# it holds either the state before the operation or the state after it — nothing lost, nothing
# half-done. Then fills a size-limited file system (RLIMIT_FSIZE) during an import and checks
# for a clear error and an intact store.
#
#   scripts/crash-check.sh                 # 100,000 records, 20 kills per operation
#   scripts/crash-check.sh 200000 30       # more records, more kills
#
# Needs sqlite3. Work files go to $CRASH_DIR (default: a temporary folder, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-100000}
kills=${2:-20}
work=${CRASH_DIR:-$(mktemp -d)}
[ -n "${CRASH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
command -v sqlite3 >/dev/null || { echo "crash-check: sqlite3 is missing (apt-get install sqlite3)" >&2; exit 1; }
swift build -c release --product ckport >/dev/null
ckport=$(swift build -c release --show-bin-path)/ckport

"$ckport" generate --app family-todo --records "$records" --seed 11 -q -o "$work/data.jsonl"
"$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
"$ckport" schema import "$work/schema.ckdb" --store "$work/empty.sqlite" -q
cp "$work/empty.sqlite" "$work/full.sqlite"
"$ckport" import "$work/data.jsonl" --store "$work/full.sqlite" -q
"$ckport" backup --store "$work/full.sqlite" -o "$work/full.ckbundle" -q
total=$(sqlite3 "$work/full.sqlite" 'SELECT count(*) FROM _ck_record WHERE deleted = 0')

failures=0
fail() { echo "  FAIL: $*"; failures=$((failures + 1)); }

# seconds CMD...: how long the operation takes when nothing interrupts it.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}

# kill_at DELAY CMD...: starts the command, kills it with SIGKILL after DELAY seconds (if it
# is still running), and says whether it was killed.
kill_at() {
  local delay=$1; shift
  "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep "$delay"
  if kill -9 "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; echo killed; else wait "$pid" 2>/dev/null || true; echo finished; fi
}

records_in() { sqlite3 "$1" 'SELECT count(*) FROM _ck_record WHERE deleted = 0' 2>/dev/null || echo "unreadable"; }
integrity() { sqlite3 "$1" 'PRAGMA integrity_check' 2>&1 | head -1; }
random_delay() { awk -v max="$1" -v seed="$RANDOM$2" 'BEGIN { srand(seed); printf "%.3f", 0.05 + rand() * max }'; }

echo "crash check: $records records, $kills kills per operation"

# 1. Import into an empty store: one transaction, so 0 records or all of them.
full_time=$(cp "$work/empty.sqlite" "$work/s.sqlite" && seconds "$ckport" import "$work/data.jsonl" --store "$work/s.sqlite" -q)
echo "import (uninterrupted: $full_time s)"
for i in $(seq "$kills"); do
  cp "$work/empty.sqlite" "$work/s.sqlite"; rm -f "$work/s.sqlite-journal"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" import "$work/data.jsonl" --store "$work/s.sqlite" -q)
  check=$(integrity "$work/s.sqlite"); count=$(records_in "$work/s.sqlite")
  [ "$check" = "ok" ] || fail "import killed at $delay s: integrity_check says $check"
  [ "$count" = 0 ] || [ "$count" = "$total" ] || fail "import killed at $delay s: $count records, neither 0 nor $total"
  printf "  kill %2d at %6s s (%s): integrity %s, %s records\n" "$i" "$delay" "$outcome" "$check" "$count"
done

# 2. Restore into a new store: the store is empty or holds the whole bundle.
full_time=$(rm -f "$work/r.sqlite" && seconds "$ckport" restore "$work/full.ckbundle" --store "$work/r.sqlite" -q)
echo "restore (uninterrupted: $full_time s)"
for i in $(seq "$kills"); do
  rm -f "$work/r.sqlite" "$work/r.sqlite-journal"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" restore "$work/full.ckbundle" --store "$work/r.sqlite" -q)
  if [ ! -e "$work/r.sqlite" ]; then
    printf "  kill %2d at %6s s (%s): no store created yet\n" "$i" "$delay" "$outcome"
    continue
  fi
  check=$(integrity "$work/r.sqlite"); count=$(records_in "$work/r.sqlite")
  [ "$check" = "ok" ] || fail "restore killed at $delay s: integrity_check says $check"
  [ "$count" = 0 ] || [ "$count" = "$total" ] || fail "restore killed at $delay s: $count records, neither 0 nor $total"
  printf "  kill %2d at %6s s (%s): integrity %s, %s records\n" "$i" "$delay" "$outcome" "$check" "$count"
done

# 3. migrate apply (with its backup bundle first): version 0 with the old columns, or version
#    1 with every Task migrated; a bundle is there whole or not at all.
mkdir -p "$work/migrations"
cp scripts/bench-migration/*.yaml "$work/migrations/"
full_time=$(cp "$work/full.sqlite" "$work/m.sqlite" && seconds "$ckport" migrate apply --dir "$work/migrations" --store "$work/m.sqlite" -q)
tasks=$(sqlite3 "$work/full.sqlite" 'SELECT count(*) FROM "Task"')
echo "migrate apply (uninterrupted, backup included: $full_time s)"
for i in $(seq "$kills"); do
  rm -f "$work"/m.* "$work"/.m.* "$work"/.ckport-spool-*
  cp "$work/full.sqlite" "$work/m.sqlite"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" migrate apply --dir "$work/migrations" --store "$work/m.sqlite" -q)
  check=$(integrity "$work/m.sqlite")
  [ "$check" = "ok" ] || fail "migrate killed at $delay s: integrity_check says $check"
  version=$(sqlite3 "$work/m.sqlite" "SELECT coalesce(max(version), 0) FROM _ck_migration" 2>/dev/null || echo 0)
  if [ "$version" = 1 ]; then
    migrated=$(sqlite3 "$work/m.sqlite" 'SELECT count(*) FROM "Task" WHERE "statusCode" IS NOT NULL AND "_schemaVersion" = 1')
    [ "$migrated" = "$tasks" ] || fail "migrate killed at $delay s: version 1 but $migrated of $tasks tasks migrated"
    state="version 1, $migrated tasks migrated"
  else
    columns=$(sqlite3 "$work/m.sqlite" "SELECT group_concat(name) FROM pragma_table_info('Task') WHERE name IN ('notes', 'details', 'statusCode')")
    [ "$columns" = "notes" ] || fail "migrate killed at $delay s: version 0 but Task has columns $columns"
    state="version 0, old columns"
  fi
  count=$(records_in "$work/m.sqlite")
  [ "$count" = "$total" ] || fail "migrate killed at $delay s: $count records instead of $total"
  for bundle in "$work"/m.before-*.ckbundle; do
    [ -e "$bundle" ] || continue
    "$ckport" verify "$bundle" -q || fail "migrate killed at $delay s: the backup bundle $bundle is there but damaged"
  done
  printf "  kill %2d at %6s s (%s): integrity %s, %s, %s records\n" "$i" "$delay" "$outcome" "$check" "$state" "$count"
done

# 4. A full disk: the file may not grow past 8 MB (SIGXFSZ ignored, so writes fail with EFBIG).
echo "disk full"
cp "$work/empty.sqlite" "$work/d.sqlite"
before=$(sqlite3 "$work/d.sqlite" 'PRAGMA integrity_check')
if (trap '' XFSZ; ulimit -f 8192; exec "$ckport" import "$work/data.jsonl" --store "$work/d.sqlite" -q) 2>"$work/disk.err"; then
  fail "an import past the file size limit succeeded"
else
  status=$?
  message=$(head -1 "$work/disk.err")
  check=$(integrity "$work/d.sqlite"); count=$(records_in "$work/d.sqlite")
  [ "$check" = "ok" ] && [ "$count" = 0 ] || fail "after a full disk: integrity $check, $count records"
  [ -n "$message" ] || fail "a full disk gave no message"
  echo "  exit $status: $message"
  echo "  store afterwards: integrity $check, $count records (as before: $before)"
fi

if [ "$failures" -gt 0 ]; then
  echo "crash check: $failures failures" >&2
  exit 1
fi
echo "crash check: every kill left the state before or the state after; the full disk left the store as it was"
