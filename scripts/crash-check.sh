#!/usr/bin/env bash
# Kills ckport with SIGKILL at random moments of an import, a restore and a migrate apply, and
# checks after each kill that the store opens, that SQLite's integrity check says ok, and that
# it holds either the state before the operation or the state after it — nothing lost, nothing
# half-done. Then fills a size-limited file system (RLIMIT_FSIZE) during an import and checks
# for a clear error and an intact store. Then kills a backup into a repository and a forget
# --prune, and checks that the repository stays sound (every snapshot read whole) and that
# the snapshots it lists restore as they were.
#
#   scripts/crash-check.sh                 # 100,000 records, 20 kills per operation
#   scripts/crash-check.sh 200000 30       # more records, more kills
#   CRASH_BUILD=debug scripts/crash-check.sh 20000 8   # what CI runs: the debug build, briefly
#
# A kill counts only when it landed while the operation ran (the process ended by SIGKILL);
# most of each operation's kills must, or the check fails. Needs sqlite3. Work files go to
# $CRASH_DIR (default: a temporary folder, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-100000}
kills=${2:-20}
work=${CRASH_DIR:-$(mktemp -d)}
[ -n "${CRASH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
command -v sqlite3 >/dev/null || { echo "crash-check: sqlite3 is missing (apt-get install sqlite3)" >&2; exit 1; }
command -v jq >/dev/null || { echo "crash-check: jq is missing (apt-get install jq)" >&2; exit 1; }
build=${CRASH_BUILD:-release}
swift build -c "$build" --product ckport >/dev/null
ckport=$(swift build -c "$build" --show-bin-path)/ckport

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

# kill_at DELAY CMD...: starts the command, sends SIGKILL after DELAY seconds, and says
# whether the kill is what ended it ("killed": its status is 128 + 9) or it had finished first.
# (kill itself succeeds on a process that has ended but is not yet waited for, so it proves
# nothing.)
kill_at() {
  local delay=$1; shift
  "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null || true
  local status=0
  wait "$pid" 2>/dev/null || status=$?
  if [ "$status" -eq 137 ]; then echo killed; else echo "finished ($status)"; fi
}
# landed OPERATION KILLED: most kills must have landed mid-operation, or the check proved little.
landed() {
  echo "  $2 of $kills kills landed while $1 ran"
  [ $(( $2 * 2 )) -ge "$kills" ] || fail "$1: only $2 of $kills kills landed while it ran"
}

records_in() { sqlite3 "$1" 'SELECT count(*) FROM _ck_record WHERE deleted = 0' 2>/dev/null || echo "unreadable"; }
integrity() { sqlite3 "$1" 'PRAGMA integrity_check' 2>&1 | head -1; }
# A moment within the first 90% of an uninterrupted run (from 20 ms on).
random_delay() { awk -v max="$1" -v seed="$RANDOM$2" 'BEGIN { srand(seed); printf "%.3f", 0.02 + rand() * max * 0.9 }'; }

echo "crash check: $records records, $kills kills per operation"

# 1. Import into an empty store: one transaction, so 0 records or all of them.
full_time=$(cp "$work/empty.sqlite" "$work/s.sqlite" && seconds "$ckport" import "$work/data.jsonl" --store "$work/s.sqlite" -q)
echo "import (uninterrupted: $full_time s)"
killed=0
for i in $(seq "$kills"); do
  # The store as it was, without the log a killed run left beside it (stores keep a WAL).
  rm -f "$work/s.sqlite-wal" "$work/s.sqlite-shm" "$work/s.sqlite-journal"; cp "$work/empty.sqlite" "$work/s.sqlite"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" import "$work/data.jsonl" --store "$work/s.sqlite" -q)
  [ "$outcome" != killed ] || killed=$((killed + 1))
  check=$(integrity "$work/s.sqlite"); count=$(records_in "$work/s.sqlite")
  [ "$check" = "ok" ] || fail "import killed at $delay s: integrity_check says $check"
  [ "$count" = 0 ] || [ "$count" = "$total" ] || fail "import killed at $delay s: $count records, neither 0 nor $total"
  printf "  kill %2d at %6s s (%s): integrity %s, %s records\n" "$i" "$delay" "$outcome" "$check" "$count"
done
landed import "$killed"

# 2. Restore into a new store: the store is empty or holds the whole bundle.
full_time=$(rm -f "$work/r.sqlite" && seconds "$ckport" restore "$work/full.ckbundle" --store "$work/r.sqlite" -q)
echo "restore (uninterrupted: $full_time s)"
killed=0
for i in $(seq "$kills"); do
  rm -f "$work/r.sqlite" "$work/r.sqlite-journal" "$work/r.sqlite-wal" "$work/r.sqlite-shm"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" restore "$work/full.ckbundle" --store "$work/r.sqlite" -q)
  [ "$outcome" != killed ] || killed=$((killed + 1))
  if [ ! -e "$work/r.sqlite" ]; then
    printf "  kill %2d at %6s s (%s): no store created yet\n" "$i" "$delay" "$outcome"
    continue
  fi
  check=$(integrity "$work/r.sqlite"); count=$(records_in "$work/r.sqlite")
  [ "$check" = "ok" ] || fail "restore killed at $delay s: integrity_check says $check"
  [ "$count" = 0 ] || [ "$count" = "$total" ] || fail "restore killed at $delay s: $count records, neither 0 nor $total"
  printf "  kill %2d at %6s s (%s): integrity %s, %s records\n" "$i" "$delay" "$outcome" "$check" "$count"
done
landed restore "$killed"
# A restore into a new store builds it beside the path: what a killed one left there (planted
# here as well, under a process number no process has, with its journal) goes with the next
# restore, which leaves nothing of its own.
: > "$work/.r.sqlite.ckport-999999999-0123456789ab.tmp"
: > "$work/.r.sqlite.ckport-999999999-0123456789ab.tmp-journal"
before=$(cd "$work" && ls -A | grep -c '^\.r\.sqlite.*\.ckport-' || true)
"$ckport" restore "$work/full.ckbundle" --store "$work/r.sqlite.again" -q
left=$(cd "$work" && ls -A | grep -c '^\.r\.sqlite.*\.ckport-' || true)
[ "$left" = 0 ] || fail "restore: $left files of killed restores left beside the store after the next one"
echo "  after one more restore, files left beside the path: $left (before it: $before)"

# 3. migrate apply (with its backup bundle first): version 0 with the old columns, or version
#    1 with every Task migrated; a bundle is there whole or not at all.
mkdir -p "$work/migrations"
cp scripts/bench-migration/*.yaml "$work/migrations/"
full_time=$(cp "$work/full.sqlite" "$work/m.sqlite" && seconds "$ckport" migrate apply --dir "$work/migrations" --store "$work/m.sqlite" -q)
tasks=$(sqlite3 "$work/full.sqlite" 'SELECT count(*) FROM "Task"')
echo "migrate apply (uninterrupted, backup included: $full_time s)"
killed=0
for i in $(seq "$kills"); do
  rm -f "$work"/m.* "$work"/.m.* "$work"/.ckport-spool-*
  cp "$work/full.sqlite" "$work/m.sqlite"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" migrate apply --dir "$work/migrations" --store "$work/m.sqlite" -q)
  [ "$outcome" != killed ] || killed=$((killed + 1))
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
landed "migrate apply" "$killed"

# 4. A full disk: the file may not grow past 8 MB (SIGXFSZ ignored, so writes fail with EFBIG).
#    ckport must exit 3 with a message, and leave the store byte for byte as it was.
echo "disk full"
rm -f "$work/d.sqlite-wal" "$work/d.sqlite-shm"
cp "$work/empty.sqlite" "$work/d.sqlite"
before=$(cat "$work/d.sqlite" | sha256sum)
status=0
(trap '' XFSZ; ulimit -f 8192; exec "$ckport" import "$work/data.jsonl" --store "$work/d.sqlite" -q) 2>"$work/disk.err" || status=$?
message=$(head -1 "$work/disk.err")
[ "$status" -eq 3 ] || fail "an import past the file size limit ended with status $status, not 3"
[ -n "$message" ] || fail "a full disk gave no message"
[ "$(cat "$work/d.sqlite" | sha256sum)" = "$before" ] || fail "after a full disk the store's file differs from before"
for log in "$work/d.sqlite-wal" "$work/d.sqlite-journal"; do
  [ ! -s "$log" ] || fail "after a full disk $log holds $(wc -c < "$log") bytes"
done
echo "  exit $status: $message"
echo "  store afterwards: $(integrity "$work/d.sqlite"), $(records_in "$work/d.sqlite") records, the same bytes as before"
# The same into a store that does not exist yet (built beside the path): exit 3, a message,
# nothing at the path and nothing left beside it.
status=0
(trap '' XFSZ; ulimit -f 8192; exec "$ckport" import "$work/schema.ckdb" "$work/data.jsonl" --store "$work/n.sqlite" -q) 2>"$work/disk-new.err" || status=$?
message=$(head -1 "$work/disk-new.err")
[ "$status" -eq 3 ] || fail "an import into a new store past the file size limit ended with status $status, not 3"
case $message in *"disk may be full"*) ;; *) fail "a full disk under a new store gave another message: $message" ;; esac
[ ! -e "$work/n.sqlite" ] || fail "after a full disk a new store is at the path"
left=$(cd "$work" && ls -A | grep -c '^\.n\.sqlite.*\.ckport-' || true)
[ "$left" = 0 ] || fail "after a full disk under a new store $left files are left beside the path"
echo "  into a new store: exit $status: $message; nothing at the path, nothing beside it"

# 5. backup --repo into a folder repository: a killed backup leaves the snapshots there were,
#    each whole (verify reads every one), and never a half one listed; the next one goes on.
repo=$work/repo
"$ckport" repo init "$repo" -q
"$ckport" backup --repo "$repo" --store "$work/full.sqlite" -q
snapshots_in() { "$ckport" snapshots --repo "$1" --json 2>/dev/null | jq length 2>/dev/null || echo "unreadable"; }
sound() { "$ckport" verify --repo "$1" --read-data -q >/dev/null 2>&1 && echo sound || echo "NOT SOUND"; }
full_time=$(seconds "$ckport" backup --repo "$repo" --full --store "$work/full.sqlite" -q)
echo "backup --repo (uninterrupted, full: $full_time s)"
killed=0
for i in $(seq "$kills"); do
  before=$(snapshots_in "$repo")
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" backup --repo "$repo" --full --store "$work/full.sqlite" -q)
  [ "$outcome" != killed ] || killed=$((killed + 1))
  after=$(snapshots_in "$repo"); state=$(sound "$repo")
  [ "$state" = sound ] || fail "backup --repo killed at $delay s: the repository is not sound"
  [ "$after" = "$before" ] || [ "$after" = $((before + 1)) ] || fail "backup --repo killed at $delay s: $after snapshots, where there were $before"
  printf "  kill %2d at %6s s (%s): %s, %s snapshots (before: %s)\n" "$i" "$delay" "$outcome" "$state" "$after" "$before"
done
landed "backup --repo" "$killed"
"$ckport" backup --repo "$repo" --store "$work/full.sqlite" -q || fail "a backup after the killed ones failed"
"$ckport" restore --repo "$repo" --store "$work/rr.sqlite" -q
[ "$(records_in "$work/rr.sqlite")" = "$total" ] || fail "the newest snapshot after the kills restores $(records_in "$work/rr.sqlite") records, not $total"

# 6. forget --prune: a chain of nine snapshots, the oldest seven forgotten, so the eighth is
#    folded first (the first becomes its base). Killed at any moment, the repository stays
#    sound, and the snapshots it lists restore as they were: the newest always, to the store's
#    last state.
chain=$work/chain-repo
cp "$work/full.sqlite" "$work/c.sqlite"
"$ckport" repo init "$chain" -q
# Nine snapshots, so that the fold (two passes over the seven that go) lasts long enough for the
# kills to land in it: it takes a few hundredths of a second per increment.
# Each night deletes the tasks whose titles start with one letter (some nights none match).
initials=(- - C W T S P M D R)
for step in 1 2 3 4 5 6 7 8 9; do
  [ "$step" = 1 ] || "$ckport" delete --store "$work/c.sqlite" --type Task --where "title BEGINSWITH '${initials[$step]}'" -q >/dev/null 2>&1 || true
  "$ckport" backup --repo "$chain" --store "$work/c.sqlite" -q
done
newest=$("$ckport" export -q --store "$work/c.sqlite" | sha256sum)
rm -rf "$chain.template" && cp -a "$chain" "$chain.template"
full_time=$(seconds "$ckport" forget --repo "$chain" --keep-last 2 --prune -q)
[ "$(snapshots_in "$chain")" = 2 ] || fail "forget --keep-last 2 left $(snapshots_in "$chain") snapshots"
echo "forget --prune (uninterrupted, one snapshot folded: $full_time s)"
killed=0
for i in $(seq "$kills"); do
  rm -rf "$chain" && cp -a "$chain.template" "$chain"
  delay=$(random_delay "$full_time" "$i")
  outcome=$(kill_at "$delay" "$ckport" forget --repo "$chain" --keep-last 2 --prune -q)
  [ "$outcome" != killed ] || killed=$((killed + 1))
  count=$(snapshots_in "$chain"); state=$(sound "$chain")
  [ "$state" = sound ] || fail "forget killed at $delay s: the repository is not sound"
  rm -f "$work/cr.sqlite"
  "$ckport" restore --repo "$chain" --store "$work/cr.sqlite" -q || fail "forget killed at $delay s: the newest snapshot does not restore"
  [ "$("$ckport" export -q --store "$work/cr.sqlite" | sha256sum)" = "$newest" ] || fail "forget killed at $delay s: the newest snapshot restores another state"
  "$ckport" forget --repo "$chain" --keep-last 2 --prune -q >/dev/null || fail "forget killed at $delay s: the next forget failed"
  [ "$(snapshots_in "$chain")" = 2 ] || fail "forget killed at $delay s: the next forget left $(snapshots_in "$chain") snapshots"
  printf "  kill %2d at %6s s (%s): %s, %s snapshots, the newest restores as it was\n" "$i" "$delay" "$outcome" "$state" "$count"
done
landed "forget --prune" "$killed"

if [ "$failures" -gt 0 ]; then
  echo "crash check: $failures failures" >&2
  exit 1
fi
echo "crash check: every kill left the state before or the state after; the full disk left the store as it was, and no new store; every killed backup and forget left a sound repository"
