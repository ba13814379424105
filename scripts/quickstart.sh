#!/usr/bin/env bash
# ckport end to end on the bundled sample apps, with the embedded SQLite store:
# for each app, import its schema and records, query them, export them as JSON Lines and as
# CSV, and prove each export imports into a fresh store that exports back byte for byte; for
# the apps with a calendar, export iCalendar, check it, and import it back without a change;
# back each app up to a bundle, verify it and restore it into a fresh store. Then CloudKit, on
# the emulator: sign in, pull the notes app's container, pull again (nothing new), push the store
# into the production environment, pull that back and compare; cloud status at the end. With a
# PostgreSQL server in CKPORT_TEST_POSTGRES, a second pass does the same on PostgreSQL stores.
# Work goes to ./quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "building ckport (debug; the first build takes a few minutes: SwiftPM compiles its dependencies)…"
set +e
{ swift build --product ckport && swift build --product ckport-emulator; } 2>&1 | grep -E "^(Building|Build complete)|error:"
built=${PIPESTATUS[0]}
set -e
[ "$built" -eq 0 ] || { echo "quickstart: the build failed" >&2; exit 1; }
ckport() { "$(swift build --show-bin-path)/ckport" "$@"; }
out=quickstart
rm -rf "$out"
mkdir -p "$out"

# The independent RFC 5545 checker beside the project, when it is set up
# (../shared/conformance/setup.sh).
checker=../shared/conformance/ical_check.py
checker_python=${ICAL_CHECK_VENV:-$HOME/.cache/ical-check-venv}/bin/python
check_ics() {
  if [ -f "$checker" ] && [ -x "$checker_python" ]; then
    "$checker_python" "$checker" --quiet "$1" >"$1.check" 2>&1 || { cat "$1.check" >&2; exit 1; }
    echo "iCalendar: $1 passes the RFC 5545 checker and its peers (icalendar, libical)"
  elif [ "${CKPORT_CONFORMANCE:-}" = required ]; then
    echo "iCalendar: the RFC 5545 checker is required but not set up" >&2
    exit 1
  else
    echo "iCalendar: $1 written (the RFC 5545 checker is not set up here)"
  fi
}

query() {
  case $1 in
    family-todo) echo "Task|status == 'next' AND householdId == 'household-1'|dueDate" ;;
    family-calendar) echo "Event|familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false|startDate" ;;
    relationship-checkin) echo "DailyEntry|recordName BEGINSWITH 'DailyEntry_2026-01-0' AND eveningMood >= 1|date" ;;
    screen-time-rewards) echo "PointsLedgerEntry|type IN ['redemption', 'adjustment']|timestamp" ;;
    notes) echo "Note|tags CONTAINS 'trip'|title" ;;
  esac
}

for app in family-todo family-calendar relationship-checkin screen-time-rewards notes; do
  store="$out/$app.sqlite"
  echo "== $app"
  ckport import "samples/$app/schema.ckdb" "samples/$app/records.jsonl" --store "$store" 2>&1 | grep -E "^imported|^change token"
  IFS='|' read -r type predicate sort <<<"$(query "$app")"
  matches=$(ckport export --store "$store" --type "$type" --where "$predicate" --sort "$sort" -q | wc -l)
  # The same question asked of the sample's file by Python: the counts must agree, and not be 0.
  expected=$(python3 scripts/sample_query.py "$app" "samples/$app/records.jsonl")
  [ "$matches" -gt 0 ] && [ "$matches" -eq "$expected" ] || { echo "query: ckport found $matches, the sample holds $expected" >&2; exit 1; }
  echo "query: $type where $predicate → $matches records (as many as Python counts in the sample)"
  # Who shares what with whom: the shares the family apps keep, with their participants.
  if [ "$app" = family-todo ] || [ "$app" = family-calendar ]; then
    ckport shares --store "$store" | head -9
    shared=$(ckport shares --store "$store" --json | grep -o '"participants":\[{' | wc -l)
    if [ "$shared" -lt 2 ]; then
      echo "shares: expected a share with participants per family, found $shared" >&2
      exit 1
    fi
  fi
  ckport export --store "$store" -o "$out/$app.jsonl" -q
  # Every round trip below compares with this export: it must hold the sample's records.
  [ "$(wc -l < "$out/$app.jsonl")" -gt 0 ] && [ "$(wc -l < "$out/$app.jsonl")" -eq "$(grep -c . "samples/$app/records.jsonl")" ] \
    || { echo "export: $out/$app.jsonl does not hold the sample's $(grep -c . "samples/$app/records.jsonl") records" >&2; exit 1; }
  ckport import "samples/$app/schema.ckdb" "$out/$app.jsonl" --store "$out/$app-copy.sqlite" -q
  ckport export --store "$out/$app-copy.sqlite" -o "$out/$app-copy.jsonl" -q
  if cmp -s "$out/$app.jsonl" "$out/$app-copy.jsonl"; then
    echo "round trip: store → JSONL → new store → JSONL is byte-identical"
  else
    echo "round trip: the second export differs from the first" >&2
    exit 1
  fi
  ckport export --store "$store" -o "$out/$app-csv/" --system -q
  ckport schema import "samples/$app/schema.ckdb" --store "$out/$app-from-csv.sqlite" -q
  for sheet in "$out/$app-csv"/*.csv; do
    ckport import "$sheet" --type "$(basename "$sheet" .csv)" --store "$out/$app-from-csv.sqlite" -q
  done
  ckport export --store "$out/$app-from-csv.sqlite" -o "$out/$app-from-csv.jsonl" -q
  if cmp -s "$out/$app.jsonl" "$out/$app-from-csv.jsonl"; then
    echo "round trip: store → CSV ($(ls "$out/$app-csv" | wc -l) files) → new store gives back the same records"
  else
    echo "round trip: the records that came back from CSV differ" >&2
    exit 1
  fi
  ckport backup --store "$store" -o "$out/$app.ckbundle" -q
  ckport verify "$out/$app.ckbundle" -q
  ckport restore "$out/$app.ckbundle" --store "$out/$app-restored.sqlite" -q
  ckport export --store "$out/$app-restored.sqlite" -o "$out/$app-restored.jsonl" -q
  if cmp -s "$out/$app.jsonl" "$out/$app-restored.jsonl" && gzip -t "$out/$app.ckbundle" && tar -tzf "$out/$app.ckbundle" >/dev/null; then
    echo "round trip: store → bundle ($(tar -tzf "$out/$app.ckbundle" | wc -l) members, tar and gzip accept it) → new store gives back the same records"
  else
    echo "round trip: the bundle did not restore the same records" >&2
    exit 1
  fi
  if [ -f "samples/$app/calendar.yaml" ]; then
    ckport export --store "$store" -o "$out/$app.ics" --include-deleted -q
    check_ics "$out/$app.ics"
    ckport import "$out/$app.ics" --store "$store" -q
    ckport export --store "$store" -o "$out/$app-after-ics.jsonl" -q
    if cmp -s "$out/$app.jsonl" "$out/$app-after-ics.jsonl"; then
      echo "round trip: store → iCalendar ($(grep -cE '^BEGIN:V(EVENT|TODO|JOURNAL)' "$out/$app.ics") components) → the same store changes nothing"
    else
      echo "round trip: importing the iCalendar export changed records" >&2
      exit 1
    fi
  fi
  if [ -d "migrations/$app" ]; then
    cp "$out/$app-restored.sqlite" "$out/$app-migrated.sqlite"
    ckport migrate plan --dir "migrations/$app" --store "$out/$app-migrated.sqlite" -q > "$out/$app-plan.txt"
    ckport migrate apply --dir "migrations/$app" --store "$out/$app-migrated.sqlite" --no-backup -q
    ckport export --store "$out/$app-migrated.sqlite" -o "$out/$app-migrated.jsonl" -q
    if cmp -s "$out/$app-migrated.jsonl" "migrations/$app/expected/records.jsonl"; then
      echo "migrate: plan, then apply migrations/$app ($(ls migrations/$app/0*.yaml | wc -l) files) → the records in migrations/$app/expected"
    else
      echo "migrate: migrations/$app did not leave the expected records" >&2
      exit 1
    fi
  fi
done

# The same apps on a PostgreSQL store, when a server is given (CKPORT_TEST_POSTGRES, a store URL
# with its password in PGPASSWORD, as .ci/run sets after scripts/postgres-cluster.sh start): every
# answer must be the SQLite store's, byte for byte.
if [ -n "${CKPORT_TEST_POSTGRES:-}" ]; then
  echo "== PostgreSQL (${CKPORT_TEST_POSTGRES})"
  run=qs$$
  for app in family-todo family-calendar relationship-checkin screen-time-rewards notes; do
    pg="${CKPORT_TEST_POSTGRES}?schema=${run}_${app//-/_}"
    ckport import "samples/$app/schema.ckdb" "samples/$app/records.jsonl" --store "$pg" -q
    IFS='|' read -r type predicate sort <<<"$(query "$app")"
    if cmp -s <(ckport export --store "$pg" --type "$type" --where "$predicate" --sort "$sort" -q) \
              <(ckport export --store "$out/$app.sqlite" --type "$type" --where "$predicate" --sort "$sort" -q) \
       && cmp -s <(ckport export --store "$pg" -q) "$out/$app.jsonl"; then
      echo "$app: import, the query and the export on PostgreSQL give SQLite's bytes"
    else
      echo "$app: PostgreSQL's answers differ from SQLite's" >&2
      exit 1
    fi
    ckport backup --store "$pg" -o "$out/$app-pg.ckbundle" -q
    ckport restore "$out/$app-pg.ckbundle" --store "$out/$app-from-pg.sqlite" -q
    ckport copy --from "$pg" --to "$out/$app-copied-from-pg.sqlite" -q
    if cmp -s <(ckport export --store "$out/$app-from-pg.sqlite" -q) "$out/$app.jsonl" \
       && cmp -s <(ckport export --store "$out/$app-copied-from-pg.sqlite" -q) "$out/$app.jsonl"; then
      echo "$app: PostgreSQL → bundle → SQLite and ckport copy PostgreSQL → SQLite give back the same records"
    else
      echo "$app: the records that came back from PostgreSQL differ" >&2
      exit 1
    fi
    if [ -f "samples/$app/calendar.yaml" ]; then
      # DTSTAMP is the time of the export unless given: the same for both.
      ckport export --store "$pg" -o "$out/$app-pg.ics" --include-deleted --dtstamp 2026-01-01T00:00:00Z -q
      ckport export --store "$out/$app.sqlite" -o "$out/$app-sqlite.ics" --include-deleted --dtstamp 2026-01-01T00:00:00Z -q
      check_ics "$out/$app-pg.ics"
      cmp -s "$out/$app-pg.ics" "$out/$app-sqlite.ics" || { echo "$app: the iCalendar export from PostgreSQL differs from SQLite's" >&2; exit 1; }
      echo "$app: the iCalendar export from PostgreSQL is SQLite's, byte for byte"
    fi
    if [ -d "migrations/$app" ]; then
      ckport migrate apply --dir "migrations/$app" --store "$pg" --no-backup -q
      cmp -s <(ckport export --store "$pg" -q) "migrations/$app/expected/records.jsonl" \
        || { echo "$app: migrations/$app on PostgreSQL did not leave the expected records" >&2; exit 1; }
      echo "$app: migrations/$app applied on PostgreSQL → the records in migrations/$app/expected"
    fi
  done
  ckport stats --store "${CKPORT_TEST_POSTGRES}?schema=${run}_family_calendar" | head -3
fi

echo "== CloudKit (ckport-emulator on 127.0.0.1: the notes app's container)"
cloud="$out/cloud"
mkdir -p "$cloud"
echo "api-$RANDOM$RANDOM" > "$cloud/api.txt"
echo "the-app-user-$RANDOM" > "$cloud/app-user.txt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$(swift build --show-bin-path)/ckport-emulator" --container iCloud.com.example.Notes --page-size 25 \
  --api-token-file "$cloud/api.txt" --web-auth-token-file "$cloud/app-user.txt" \
  --load samples/notes/records.jsonl --sign-in-callback "http://127.0.0.1:$port/callback" >"$cloud/emulator.out" 2>&1 &
emulator=$!
trap 'kill $emulator 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q " on http" "$cloud/emulator.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/.* on //p' "$cloud/emulator.out")
[ -n "$url" ] || { cat "$cloud/emulator.out" >&2; exit 1; }
c=(--base-url "$url" --container iCloud.com.example.Notes --api-token-file "$cloud/api.txt" --web-auth-token-file "$cloud/web.txt")
# cloud login prints where to sign in (its own page, which hands the browser this sign-in's
# state and sends it on to CloudKit); curl plays the browser, cookies and all.
ckport cloud login "${c[@]}" --port "$port" --timeout 30 2>"$cloud/login.out" &
login=$!
for _ in $(seq 50); do grep -q "/start?state=" "$cloud/login.out" 2>/dev/null && break; sleep 0.1; done
curl -fsSL -b "$cloud/cookies" -c "$cloud/cookies" "$(grep -o 'http://[^ ]*/start?state=[0-9a-f]*' "$cloud/login.out")" >/dev/null
wait $login || { cat "$cloud/login.out" >&2; exit 1; }
tail -1 "$cloud/login.out"
ckport schema import samples/notes/schema.ckdb --store "$cloud/notes.sqlite" -q
ckport pull "${c[@]}" --store "$cloud/notes.sqlite" 2>&1 | grep -E "^Notes:|^pulled"
again=$(ckport pull "${c[@]}" --store "$cloud/notes.sqlite" 2>&1 | grep -E "^Notes:")
echo "$again"
[ "$again" = "Notes: 0 records saved, 0 deleted, in 1 page (change feed)" ] || { echo "pull: the second pull fetched something" >&2; exit 1; }
system='s/"recordChangeTag":"[^"]*",//; s/"created":{[^}]*},"modified":{[^}]*},//'
if cmp -s <(ckport export --store "$cloud/notes.sqlite" -q | sed "$system") <(sed "$system" "$out/notes.jsonl"); then
  echo "pull: the store holds the container's records, field for field (CloudKit keeps its own change tags)"
else
  echo "pull: the pulled records differ from the sample's" >&2
  exit 1
fi
if [ -n "${CKPORT_TEST_POSTGRES:-}" ]; then
  pgcloud="${CKPORT_TEST_POSTGRES}?schema=${run}_cloud"
  ckport schema import samples/notes/schema.ckdb --store "$pgcloud" -q
  ckport pull "${c[@]}" --store "$pgcloud" -q
  ckport pull "${c[@]}" --store "$pgcloud" 2>&1 | grep -E "^Notes:"
  if cmp -s <(ckport export --store "$pgcloud" -q) <(ckport export --store "$cloud/notes.sqlite" -q); then
    echo "pull into PostgreSQL: the same records, change tags and all, as the SQLite store pulled"
  else
    echo "pull into PostgreSQL: the records differ from the SQLite store's" >&2
    exit 1
  fi
fi
# Four notes name an asset the sample keeps only the checksum and size of: CloudKit takes an
# asset only with the receipt of its bytes' upload, so those four stay home, each in the rejects
# file with why, and push exits with status 3.
set +e
ckport push "${c[@]}" --environment production --store "$cloud/notes.sqlite" --rejects "$cloud/not-sent.jsonl" 2>"$cloud/push.out"
pushed=$?
set -e
grep -E "^created|^pushed" "$cloud/push.out"
if [ "$pushed" -ne 3 ] || [ "$(grep -c '"NOT_SENT: the store holds no bytes of asset attachment' "$cloud/not-sent.jsonl")" -ne 4 ] \
   || [ "$(wc -l < "$cloud/not-sent.jsonl")" -ne 4 ]; then
  cat "$cloud/push.out" >&2
  echo "push: expected every note but the four with an asset to go" >&2
  exit 1
fi
echo "push: 4 records not sent (their asset bytes are not in the store), each in $cloud/not-sent.jsonl"
ckport schema import samples/notes/schema.ckdb --store "$cloud/production.sqlite" -q
ckport pull "${c[@]}" --environment production --store "$cloud/production.sqlite" -q
grep -o '"record":{"recordName":"[^"]*"' "$cloud/not-sent.jsonl" | sed 's/^"record"://; s/$/,/' > "$cloud/not-sent.names"
ckport export --store "$cloud/notes.sqlite" -q | grep -v -F -f "$cloud/not-sent.names" | sed "$system" > "$cloud/sent.jsonl"
ckport export --store "$cloud/production.sqlite" -q | sed "$system" > "$cloud/production.jsonl"
if [ "$(wc -l < "$cloud/production.jsonl")" -eq 56 ] && cmp -s "$cloud/sent.jsonl" "$cloud/production.jsonl"; then
  echo "push: development → store → production → a new store gives the same 56 records"
else
  echo "push: the records pulled back from production differ" >&2
  exit 1
fi
ckport cloud status --store "$cloud/notes.sqlite"

echo
ckport stats --store "$out/family-calendar.sqlite"
