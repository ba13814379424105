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
#     beside Python's icalendar package doing the same (scripts/bench_calendar.py).
#
#   scripts/bench.sh              # 1,000,000 records and 100,000 events, plus 100,000 records
#                                 # and 10,000 events for the memory column
#   scripts/bench.sh 200000 20000 # a quicker run
#
# Needs: a Swift toolchain, sqlite3, GNU time (/usr/bin/time), python3 with venv; icalendar
# is installed into a venv ($BENCH_VENV, default ~/.cache/ckport-bench-venv). Work files go
# to $BENCH_DIR (default: a temporary folder, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-1000000}
events=${2:-100000}
small=${BENCH_SMALL:-100000}
small_events=${BENCH_SMALL_EVENTS:-10000}
work=${BENCH_DIR:-$(mktemp -d)}
[ -n "${BENCH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

for tool in sqlite3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install sqlite3 time)" >&2; exit 1; }
done
venv=${BENCH_VENV:-$HOME/.cache/ckport-bench-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import icalendar' 2>/dev/null || "$venv/bin/pip" install -q 'icalendar==7.3.0'
[ -x "$venv/bin/sqlite-utils" ] || "$venv/bin/pip" install -q 'sqlite-utils==4.2.1'
swift build -c release --product ckport >/dev/null
swift build -c release --product ckport-emulator >/dev/null
ckport=$(swift build -c release --show-bin-path)/ckport
emulator_bin=$(swift build -c release --show-bin-path)/ckport-emulator

# run LABEL CMD...: runs the command $repeat times (a store import starts from a fresh
# copy of the empty store each time) and keeps the median time and the largest peak RSS
# in $work/LABEL.time. These machines are shared and noisy; one run alone misleads.
repeat=${BENCH_REPEAT:-3}
run() {
  local label=$1; shift
  : > "$work/$label.runs"
  for _ in $(seq "$repeat"); do
    [ -z "${fresh:-}" ] || cp "$fresh" "${fresh%.empty}"
    /usr/bin/time -f "%e %M" -o "$work/$label.once" "$@" >/dev/null 2>"$work/$label.err" || { cat "$work/$label.err" >&2; exit 1; }
    cat "$work/$label.once" >> "$work/$label.runs"
  done
  sort -n "$work/$label.runs" | awk -v n="$repeat" '{ t[NR] = $1; if ($2 > m) m = $2 } END { print t[int((n + 1) / 2)], m }' > "$work/$label.time"
}
secs() { awk '{print $1}' "$work/$1.time"; }
mb() { awk '{printf "%.0f", $2/1024}' "$work/$1.time"; }
commas() { awk -v n="$1" 'BEGIN { s = sprintf("%.0f", n); out = ""; while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) } print s out }'; }
rate() { commas "$(awk -v n="$2" -v s="$(secs "$1")" 'BEGIN { r = 0; if (s > 0) r = n / s; printf "%.0f", r }')"; }
ratio() { awk -v a="$(secs "$1")" -v b="$(secs "$2")" 'BEGIN { if (b > 0) printf "%.2f", a/b; else printf "n/a" }'; }

measure() {
  local n=$1 tag=$2
  local data="$work/$tag.jsonl" store="$work/$tag.sqlite" ref="$work/$tag-ref.sqlite"
  "$ckport" generate --app family-todo --records "$n" --seed 7 -q -o "$data"
  "$ckport" generate --app family-todo --schema -o "$work/schema.ckdb"
  rm -f "$store" "$ref"
  "$ckport" schema import "$work/schema.ckdb" --store "$store.empty" -q
  fresh="$store.empty" run "$tag-import" "$ckport" import "$data" --store "$store" -q
  run "$tag-export" "$ckport" export --store "$store" -o "$work/$tag-out.jsonl" -q
  # One household: about 1 % of the records at 1,000,000 (a hundred households).
  run "$tag-where" "$ckport" export --store "$store" --type Task --where "householdId == 'household-1'" -o "$work/$tag-where.jsonl" -q
  wc -l < "$work/$tag-where.jsonl" > "$work/$tag-where.count"
  run "$tag-csv-export" "$ckport" export --store "$store" --type Task -o "$work/$tag-tasks-ckport.csv" -q
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
  run "$tag-ref-export" sh -c "sqlite3 -json '$ref' 'SELECT * FROM Task' > '$work/$tag-ref.json' && sync '$work/$tag-ref.json'"
  run "$tag-ref-csv-export" sh -c "sqlite3 -csv '$ref' 'SELECT * FROM Task' > '$work/$tag-ref.csv' && sync '$work/$tag-ref.csv'"
  # Backup bundles, beside a JSONL export piped through gzip -6.
  run "$tag-backup" "$ckport" backup --store "$store" -o "$work/$tag.ckbundle" -q
  run "$tag-ref-backup" sh -c "'$ckport' export --store '$store' -q | gzip -6 > '$work/$tag-ref.jsonl.gz' && sync '$work/$tag-ref.jsonl.gz'"
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
  run "$tag-export" "$ckport" export --store "$store" -o "$work/$tag.ics" -q
  run "$tag-ref-export" "$venv/bin/python" scripts/bench_calendar.py export "$data" "$work/$tag-ref.ics"
  # Importing starts from the family and its users, without the events.
  grep -v '"recordType":"Event' "$data" > "$work/$tag-base.jsonl"
  rm -f "$store-in.empty"
  "$ckport" import "$work/calendar-schema.ckdb" "$work/$tag-base.jsonl" --store "$store-in.empty" -q
  fresh="$store-in.empty" run "$tag-import" "$ckport" import "$work/$tag.ics" --store "$store-in" -q
  : > "$work/$tag-ref-in.sqlite.empty"
  fresh="$work/$tag-ref-in.sqlite.empty" run "$tag-ref-import" "$venv/bin/python" scripts/bench_calendar.py import "$work/$tag-ref.ics" "$work/$tag-ref-in.sqlite"
  [ "$(grep -c '^BEGIN:VEVENT' "$work/$tag.ics")" = "$n" ] || { echo "bench: $tag.ics does not hold $n events" >&2; exit 1; }
  [ "$(sqlite3 "$store-in" 'SELECT count(*) FROM "EventParticipant"')" = "$((3 * n))" ] || { echo "bench: $tag import lost participants" >&2; exit 1; }
  ls -l "$work/$tag.ics" | awk '{print $5}' > "$work/$tag-bytes"
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
measure "$records" big
measure_cloud "$small" small-cloud "$work/small.sqlite"
measure_cloud "$records" big-cloud "$work/big.sqlite"
measure_calendar "$small_events" small-cal
measure_calendar "$events" cal
tasks=$(sqlite3 "$work/big.sqlite" 'SELECT count(*) FROM "Task"')
where=$(cat "$work/big-where.count")

echo
echo "ckport benchmark — $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m), $(sqlite3 --version | awk '{print "sqlite3 " $1}')"
echo "data: family-todo, $(commas "$records") records ($(commas "$tasks") Task), JSONL $(awk '{printf "%.0f MB", $1/1048576}' "$work/big-bytes")"
echo
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "sqlite3 shell, same rows" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import JSONL into an empty store" "$(secs big-import)" "$(rate big-import "$records")" ".import CSV: $(secs big-ref-import) s" "$(ratio big-import big-ref-import)×" "$(mb small-import) / $(mb big-import) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export all to JSONL" "$(secs big-export)" "$(rate big-export "$records")" "-json: $(secs big-ref-export) s" "$(ratio big-export big-ref-export)×" "$(mb small-export) / $(mb big-export) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import CSV (Task) into an empty store" "$(secs big-csv-import)" "$(rate big-csv-import "$tasks")" ".import CSV: $(secs big-ref-import) s" "$(ratio big-csv-import big-ref-import)×" "$(mb small-csv-import) / $(mb big-csv-import) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import Task, flat JSON Lines" "$(secs big-plain-import)" "$(rate big-plain-import "$tasks")" "sqlite-utils: $(secs big-su-json) s" "$(ratio big-plain-import big-su-json)×" "$(mb small-plain-import) / $(mb big-plain-import) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import Task, CSV (as above)" "$(secs big-csv-import)" "$(rate big-csv-import "$tasks")" "sqlite-utils: $(secs big-su-csv) s" "$(ratio big-csv-import big-su-csv)×" "$(mb small-csv-import) / $(mb big-csv-import) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export Task to CSV" "$(secs big-csv-export)" "$(rate big-csv-export "$tasks")" "-csv: $(secs big-ref-csv-export) s" "$(ratio big-csv-export big-ref-csv-export)×" "$(mb small-csv-export) / $(mb big-csv-export) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export --where (indexed, $where rows)" "$(secs big-where)" "$(rate big-where "$where")" "-json WHERE: $(secs big-ref-where) s" "$(ratio big-where big-ref-where)×" "$(mb small-where) / $(mb big-where) MB"
echo
echo "Median of $repeat runs each. ratio = ckport time / reference time on the same rows (lower is better):"
echo "the sqlite3 shell, or sqlite-utils $("$venv/bin/sqlite-utils" --version | awk '{print $3}') (PyPI) inserting the same Task rows."
echo "Exports write a file and sync it, both tools. The shell's .import fills one plain table; ckport"
echo "also validates every record, keeps the change log and builds the schema's indexes (6 on Task)"
echo "in the same transaction."
echo
echo "Backup bundles of the same $(commas "$records") records ($(ls -l "$work/big.ckbundle" | awk '{printf "%.0f MB", $5/1048576}')):"
echo
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "reference, same records" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "backup to a bundle" "$(secs big-backup)" "$(rate big-backup "$records")" "export + gzip -6: $(secs big-ref-backup) s" "$(ratio big-backup big-ref-backup)×" "$(mb small-backup) / $(mb big-backup) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "verify the bundle" "$(secs big-verify)" "$(rate big-verify "$records")" "restore: $(secs big-restore) s" "$(ratio big-verify big-restore)×" "$(mb small-verify) / $(mb big-verify) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "restore into an empty store" "$(secs big-restore)" "$(rate big-restore "$records")" "JSONL import: $(secs big-import) s" "$(ratio big-restore big-import)×" "$(mb small-restore) / $(mb big-restore) MB"
echo
echo "Targets: backup ≤ 1.3× the export piped through gzip -6, restore ≥ 100,000 records/s, verify at"
echo "least twice as fast as restore, memory under 200 MB. restore checks the bundle as it writes,"
echo "in one transaction that commits only when every member has checked out."
echo
echo "A three-step migration of the same $(commas "$tasks") Task records (rename, a type change with a map, setField):"
echo
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "records/s" "sqlite3 shell, same steps" "ratio" "peak RSS $(commas "$small") / $(commas "$records")"
printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "migrate plan (per-record diffs)" "$(secs big-plan)" "$(rate big-plan "$tasks")" "SQL: $(secs big-ref-apply) s" "$(ratio big-plan big-ref-apply)×" "$(mb small-plan) / $(mb big-plan) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "migrate apply (one transaction)" "$(secs big-apply)" "$(rate big-apply "$tasks")" "SQL: $(secs big-ref-apply) s" "$(ratio big-apply big-ref-apply)×" "$(mb small-apply) / $(mb big-apply) MB"
echo
echo "A migration failing on the middle record ($(commas $((tasks / 2))) of $(commas "$tasks")) left the store: $(cat "$work/big-atomic")."
echo "Targets: plan and apply ≥ 100,000 records/s, memory under 200 MB. The SQL updates the rows in"
echo "place without checking or converting anything; apply validates the steps against the schema,"
echo "converts every value in Swift on a second thread, writes the changed columns and keeps the change log."
echo
echo "data: family-calendar, $(commas "$events") events × 3 participants ($(commas $((4 * events))) records), iCalendar $(awk '{printf "%.0f MB", $1/1048576}' "$work/cal-bytes")"
echo
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "operation" "seconds" "events/s" "Python icalendar, same data" "ratio" "peak RSS $(commas "$small_events") / $(commas "$events")"
printf "|%s|%s|%s|%s|%s|%s|\n" "----------------------------------------" "---------:" "-------------:" "------------------------------" "---------:" "--------------:"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "export events to iCalendar" "$(secs cal-export)" "$(rate cal-export "$events")" "$(secs cal-ref-export) s" "$(ratio cal-export cal-ref-export)×" "$(mb small-cal-export) / $(mb cal-export) MB"
printf "| %-38s | %8s | %12s | %-28s | %8s | %13s |\n" "import iCalendar (events + attendees)" "$(secs cal-import)" "$(rate cal-import "$events")" "$(secs cal-ref-import) s" "$(ratio cal-import cal-ref-import)×" "$(mb small-cal-import) / $(mb cal-import) MB"
echo
echo "Targets: export ≥ 50,000 events/s, import ≥ 30,000 events/s. ratio = ckport time / Python time."
echo "Python's export reads the same records from JSON Lines and writes with icalendar's to_ical();"
echo "its import parses with from_ical() and inserts the events and attendees into SQLite. ckport"
echo "exports from its store (attendees looked up per event) and imports through the mapping,"
echo "validating every record, into a store with the schema's indexes."
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
