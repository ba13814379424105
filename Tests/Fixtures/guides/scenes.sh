# What a reader has before they run a guide's example: the scenes GuideRunTests sets up, one
# shell function each (scene_NAME for `<!-- example: NAME -->`), run in an empty folder with
# ckport on PATH and the package's folder in $GUIDE_REPO. They make files with ckport itself
# from the sample apps, or write small ones here; none of them is a fixture of the tests.

# The package's samples and migrations, as the guides name them from the package's folder.
scene_repo() {
  ln -s "$GUIDE_REPO/samples" samples
  ln -s "$GUIDE_REPO/migrations" migrations
}

# A sample app's schema and records in a store (default ./ckport.sqlite).
store_of() {
  ckport import "samples/$1/schema.ckdb" "samples/$1/records.jsonl" --store "${2:-ckport.sqlite}" -q
}

scene_family_todo() { scene_repo; store_of family-todo; }
scene_family_calendar() { scene_repo; store_of family-calendar; }

# One store holding the family apps' records: the to-dos, the calendar and the couple's
# check-ins (their schemas together; the share type they have in common once).
scene_families() {
  scene_repo
  python3 - samples/family-todo/schema.ckdb samples/family-calendar/schema.ckdb samples/relationship-checkin/schema.ckdb > families.ckdb <<'PY'
import re, sys
out, seen = ["DEFINE SCHEMA", ""], set()
texts = [open(path).read() for path in sys.argv[1:]]
for text in texts:
    for role in re.findall(r"^    CREATE ROLE .*;\n", text, re.M):
        if role not in seen:
            seen.add(role)
            out.append(role)
for text in texts:
    for block in re.findall(r"^    RECORD TYPE .*?^    \);\n", text, re.S | re.M):
        name = block.split("(", 1)[0].split()[2]
        if name not in seen:
            seen.add(name)
            out.append(block)
print("\n".join(out))
PY
  ckport schema import families.ckdb -q
  for app in family-todo family-calendar relationship-checkin; do ckport import "samples/$app/records.jsonl" -q; done
}

# The quick start's stores, as scripts/quickstart.sh leaves them.
scene_quickstart() {
  scene_repo
  mkdir quickstart
  for app in family-todo family-calendar relationship-checkin screen-time-rewards notes; do
    store_of "$app" "quickstart/$app.sqlite"
  done
}

# A family's calendar store and last night's backup of it.
scene_calendar_backup() {
  scene_family_calendar
  ckport backup -o family.ckbundle -q
}

# Photos whose files sit in a folder, named by the records' localPath.
scene_photos() {
  mkdir -p "$HOME/Exports/photos"
  printf 'not really a JPEG, but bytes all the same\n' > "$HOME/Exports/photos/kitchen.jpg"
  cat > photos.ckdb <<'CKDB'
DEFINE SCHEMA

    RECORD TYPE Photo (
        "___recordID" REFERENCE QUERYABLE,
        caption       STRING,
        image         ASSET,
        GRANT WRITE TO "_creator",
        GRANT CREATE TO "_icloud",
        GRANT READ TO "_world"
    );
CKDB
  ckport schema import photos.ckdb -q
  size=$(wc -c < "$HOME/Exports/photos/kitchen.jpg")
  printf '{"recordName":"photo-1","recordType":"Photo","fields":{"caption":{"value":"The kitchen","type":"STRING"},"image":{"value":{"fileChecksum":"AQ","size":%s,"localPath":"kitchen.jpg"},"type":"ASSETID"}}}\n' "$size" > photos.jsonl
}

# The stores `ckport serve` is shown on, and a PostgreSQL store in the namespace `family`.
scene_browsing() {
  scene_repo
  store_of family-calendar family.sqlite
  store_of notes notes.sqlite
  postgres_namespace family
  store_of family-calendar "$GUIDE_POSTGRES?schema=family"
}

# The namespace NAME on the test server, empty.
postgres_namespace() {
  [ -n "$GUIDE_POSTGRES" ] || { echo "scenes: the PostgreSQL examples need CKPORT_TEST_POSTGRES" >&2; return 1; }
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$GUIDE_POSTGRES" -c "DROP SCHEMA IF EXISTS $1 CASCADE"
}

scene_postgresql() {
  scene_repo
  store_of family-calendar family.sqlite
  postgres_namespace family
}

# The family calendar's store, and the to-dos' store as chores.sqlite.
scene_calendars() {
  scene_family_calendar
  store_of family-todo chores.sqlite
}

# The family calendar's store, and the package's tests (RFC 6321's RELAX NG schema and the
# script that sets extension properties aside).
scene_xcal() {
  scene_family_calendar
  ln -s "$GUIDE_REPO/Tests" Tests
}

# Two calendars from other apps: the family's, named "The Parkers", and a work calendar.
scene_archive() {
  printf '%s\r\n' "BEGIN:VCALENDAR" "VERSION:2.0" "PRODID:-//Example//Family//EN" "X-WR-CALNAME:The Parkers" \
    "BEGIN:VEVENT" "UID:picnic-2026@example.org" "DTSTAMP:20260301T080000Z" "DTSTART:20260614T110000Z" \
    "DTEND:20260614T150000Z" "SUMMARY:Picnic at the lake" "END:VEVENT" "END:VCALENDAR" > family.ics
  printf '%s\r\n' "BEGIN:VCALENDAR" "VERSION:2.0" "PRODID:-//Google Inc//Google Calendar 70.9054//EN" "X-WR-CALNAME:Work" \
    "BEGIN:VEVENT" "UID:swim@google.com" "DTSTAMP:20260301T080000Z" "DTSTART:20260302T060000Z" "DTEND:20260302T070000Z" \
    "RRULE:FREQ=WEEKLY;BYDAY=MO" "SUMMARY:Swimming before work" "END:VEVENT" "END:VCALENDAR" > work.ics
}

# A CloudKit container, iCloud.com.example.App, served by ckport-emulator; the tokens that
# sign in are in api.txt and web.txt, its URL in $GUIDE_CLOUDKIT. ARGS go to the emulator.
start_container() {
  (umask 077; echo api-1 > api.txt; echo web-1 > web.txt)
  ckport-emulator --container iCloud.com.example.App --api-token-file api.txt --web-auth-token-file web.txt "$@" > emulator.out 2>&1 &
  for _ in $(seq 100); do grep -q 'http://' emulator.out && break; sleep 0.1; done
  GUIDE_CLOUDKIT=$(grep -o 'http://[^ ]*' emulator.out | head -1)
  [ -n "$GUIDE_CLOUDKIT" ] || { cat emulator.out >&2; return 1; }
  export GUIDE_CLOUDKIT
}

# A production container holding the notes app's records, and an empty store for the nightly
# pull in ./srv/backups.
scene_cloudkit_nightly() {
  scene_repo
  start_container --environment production --schema samples/notes/schema.ckdb --load samples/notes/records.jsonl
  mkdir -p srv/backups
  ckport schema import samples/notes/schema.ckdb --store srv/backups/app.sqlite -q
}

# A store of the family to-do app's records, and an empty development container to push
# them to.
scene_cloudkit_push() {
  scene_repo
  store_of family-todo
  start_container --schema samples/family-todo/schema.ckdb
}

# The schema production runs: the Core Data model's first version, as it was deployed.
scene_coredata() {
  scene_repo
  ckport schema from-coredata samples/coredata/FamilyTodo.xcdatamodeld --version "FamilyTodo 1" -o production.ckdb
}

# Records as CloudKit's records/query answers them (export.json) and a JSON Lines file.
scene_import_files() {
  scene_repo
  ckport import samples/family-todo/schema.ckdb samples/family-todo/records.jsonl --store source.sqlite -q
  ckport export --store source.sqlite --type Task -o tasks.jsonl -q
  head -n 20 tasks.jsonl > entries.jsonl
  { printf '{"records":['; head -n 20 tasks.jsonl | paste -sd, -; printf ']}\n'; } > export.json
}

# A store of the family apps, and two spreadsheets made by hand: chores and check-ins.
scene_spreadsheets() {
  scene_families
  printf 'Chore,Due,Who\r\nEmpty the dishwasher,2026-03-02,Sam\r\nWater the plants,2026-03-04,Ada\r\n' > Chores.csv
  printf 'date,authorUserRecordID,eveningMood\r\n2026-03-01,_a1,4\r\n2026-03-02,_a1,5\r\n' > checkins.csv
}

# A schema file, and an empty store.
scene_schema_file() {
  cp "$GUIDE_REPO/samples/family-todo/schema.ckdb" schema.ckdb
}
