# What a reader has before they run a guide's example, as GuideRunTests sets it up in an empty
# folder with ckport on PATH and the package's folder in $GUIDE_REPO.
#
# A scene a guide names (`<!-- example: NAME -->`) is the guide's own: the shell block below a
# `<!-- scene: NAME -->` comment in that guide, which shows the reader how to make every file
# the examples use. It runs after `machine_NAME` here when there is one (what stands for the
# reader's machine: a CloudKit container, a PostgreSQL server, the package's folder), else
# after scene_repo. The reader's machine alone is `scene_NAME` here (repo, quickstart).

# The package's samples and migrations, as the guides name them from the package's folder.
scene_repo() {
  ln -s "$GUIDE_REPO/samples" samples
  ln -s "$GUIDE_REPO/migrations" migrations
}

# The quick start's stores, as scripts/quickstart.sh leaves them.
scene_quickstart() {
  scene_repo
  mkdir quickstart
  for app in family-todo family-calendar relationship-checkin screen-time-rewards notes; do
    ckport import "samples/$app/schema.ckdb" "samples/$app/records.jsonl" --store "quickstart/$app.sqlite" -q
  done
}

# For the checks below a block (`<!-- check: … -->`): how many records an export with these
# options selects, and the distinct values of a jq path among them, sorted and joined by commas.
n() { ckport export -q "$@" | wc -l | tr -d ' '; }
vals() { local path=$1; shift; ckport export -q "$@" | jq -r "$path" | sort -u | paste -sd, -; }

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

# The production container the nightly job pulls: the notes app's records.
machine_cloudkit_nightly() {
  scene_repo
  start_container --environment production --schema samples/notes/schema.ckdb --load samples/notes/records.jsonl
}

# An empty development container to push a store to.
machine_cloudkit_push() {
  scene_repo
  start_container --schema samples/family-todo/schema.ckdb
}

# The namespace NAME on the test server, empty.
postgres_namespace() {
  [ -n "$GUIDE_POSTGRES" ] || { echo "scenes: the PostgreSQL examples need CKPORT_TEST_POSTGRES" >&2; return 1; }
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$GUIDE_POSTGRES" -c "DROP SCHEMA IF EXISTS $1 CASCADE"
}

# The reader's CalDAV account (Radicale here: CKPORT_TEST_RADICALE, started by the README's test
# command), a calendar name of this run's own, and a school calendar in the account with two
# events for the pull example.
machine_caldav() {
  scene_repo
  [ -n "${CKPORT_TEST_RADICALE:-}" ] && [ -n "${CKPORT_TEST_RADICALE_DIR:-}" ] \
    || { echo "scenes: the CalDAV examples need CKPORT_TEST_RADICALE and CKPORT_TEST_RADICALE_DIR (scripts/caldav-server.sh)" >&2; return 1; }
  GUIDE_CALDAV_NAME="family-$(date +%s)-$RANDOM"
  GUIDE_CALDAV_USER=$(cat "$CKPORT_TEST_RADICALE_DIR/user")
  local school="$CKPORT_TEST_RADICALE$GUIDE_CALDAV_USER/$GUIDE_CALDAV_NAME-school/"
  local auth="$GUIDE_CALDAV_USER:$(cat "$CKPORT_TEST_RADICALE_DIR/password")"
  curl -sf -u "$auth" -X MKCALENDAR "$school" > /dev/null
  for event in "swim@school.example|Swimming gala|20260312T140000Z|20260312T160000Z" \
      "evening@school.example|Parents' evening|20260320T170000Z|20260320T190000Z"; do
    IFS='|' read -r uid summary start end <<< "$event"
    printf 'BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//School//EN\r\nBEGIN:VEVENT\r\nUID:%s\r\nDTSTAMP:20260301T080000Z\r\nDTSTART:%s\r\nDTEND:%s\r\nSUMMARY:%s\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n' \
      "$uid" "$start" "$end" "$summary" \
      | curl -sf -u "$auth" -X PUT -H 'Content-Type: text/calendar' --data-binary @- "$school$uid.ics" > /dev/null
  done
}

# The reader's S3-compatible server (SeaweedFS here: CKPORT_TEST_S3, started by the README's
# test command), their key as the profile `backups` of ~/.aws/credentials, and a bucket name of
# this run's own.
machine_s3() {
  scene_repo
  [ -n "${CKPORT_TEST_S3:-}" ] && [ -n "${CKPORT_TEST_S3_DIR:-}" ] \
    || { echo "scenes: the S3 examples need CKPORT_TEST_S3 and CKPORT_TEST_S3_DIR (scripts/seaweedfs.sh)" >&2; return 1; }
  mkdir -p "$HOME/.aws"
  { echo "[backups]"
    sed -n 's/^AWS_ACCESS_KEY_ID=/aws_access_key_id = /p; s/^AWS_SECRET_ACCESS_KEY=/aws_secret_access_key = /p' \
      "$CKPORT_TEST_S3_DIR/credentials"; } > "$HOME/.aws/credentials"
  chmod 600 "$HOME/.aws/credentials"
  GUIDE_S3_BUCKET="guide-$(date +%s)-$RANDOM"
}

# The reader's PostgreSQL server, with nothing yet in the namespace `family`.
machine_postgresql() { scene_repo; postgres_namespace family; }
machine_browsing() { scene_repo; postgres_namespace family; }

# The package's folder, whose Tests hold RFC 6321's RELAX NG schema and the script that sets
# extension properties aside.
machine_xcal() {
  scene_repo
  ln -s "$GUIDE_REPO/Tests" Tests
}
