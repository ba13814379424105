#!/usr/bin/env bash
# Many ckport processes on one store at once: WRITERS processes import batches of records (some
# adding fields to the schema as they go), two more update the same records' different fields
# over and over, READERS processes export the whole store again and again, one process changes
# the schema and one applies a migration (NoteV1 records become NoteV2), all for SECONDS
# seconds. Then it checks that
#   - every batch an import reported as imported is in the store exactly once, and every batch
#     it reported as failed is not there at all (no record lost, none doubled, none half-done);
#   - no update was lost: each shared record holds both updaters' last reported values;
#   - no write failed for a lock it could have waited for;
#   - every export a reader took was one consistent state: each batch wholly in it or wholly
#     out, and every record of the sample in it exactly once (no type missing, none twice,
#     whether the migration had run or not);
#   - the schema and the tables agree (and, on SQLite, the integrity check says ok);
# and prints the counts.
#
#   scripts/load-check.sh                      # 8 writers, 2 readers, 60 seconds
#   scripts/load-check.sh 4 2 10               # WRITERS READERS SECONDS (what CI runs)
#
# With LOAD_POSTGRES=postgresql://USER@HOST:PORT/DATABASE (PGPASSWORD or ~/.pgpass for the
# password), the store is a PostgreSQL store in a namespace of its own (dropped at the end).
# CKPORT=path/to/ckport picks the binary (default: a debug build, built if needed). Needs
# sqlite3 (psql for PostgreSQL) and python3. Work files go to $LOAD_DIR (default: a temporary
# folder, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
writers=${1:-8}
readers=${2:-2}
seconds=${3:-60}
batch=${LOAD_BATCH:-200}
shared=${LOAD_SHARED:-500}
work=${LOAD_DIR:-$(mktemp -d)}
mkdir -p "$work"
tools=(sqlite3 python3)
[ -z "${LOAD_POSTGRES:-}" ] || tools+=(psql)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "load-check: $tool is missing" >&2; exit 1; }
done
if [ -z "${CKPORT:-}" ]; then
  swift build --product ckport >/dev/null
  CKPORT=$(swift build --show-bin-path)/ckport
fi
ckport=$CKPORT
if [ -n "${LOAD_POSTGRES:-}" ]; then
  namespace="load_check_$$"
  store="${LOAD_POSTGRES%%\?*}?schema=$namespace"
  server=${LOAD_POSTGRES%%\?*}
  cleanup() {
    psql -q "$server" -c "DROP SCHEMA IF EXISTS $namespace CASCADE" >/dev/null 2>&1 || true
    [ -n "${LOAD_DIR:-}" ] || rm -rf "$work"
  }
else
  store="$work/load.sqlite"
  cleanup() { [ -n "${LOAD_DIR:-}" ] || rm -rf "$work"; }
fi
trap cleanup EXIT
"$ckport" import samples/notes/schema.ckdb samples/notes/records.jsonl --store "$store" -q
python3 - "$shared" > "$work/shared.jsonl" <<'PY'
import sys
for r in range(int(sys.argv[1])):
    print('{"recordName":"shared-%05d","recordType":"Note","zoneID":{"zoneName":"shared"},"fields":{"title":{"value":"not updated yet"},"pinned":{"value":0}}}' % r)
PY
"$ckport" import "$work/shared.jsonl" --store "$store" -q
deadline=$(( $(date +%s) + seconds ))

# A writer: batches of new Note records in a zone of its own; every fifth batch brings a field
# the schema does not have yet (--allow-new-fields). Logs "ok W B" or "failed W B: message".
writer() {
  local w=$1 b=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    b=$((b + 1))
    local extra="" flags=()
    if [ $((b % 5)) -eq 0 ]; then extra=",\"extra_${w}_${b}\":{\"value\":\"added by writer $w\"}"; flags=(--allow-new-fields); fi
    python3 - "$w" "$b" "$batch" "$extra" > "$work/w$w.jsonl" <<'PY'
import sys
w, b, n, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for r in range(n):
    print('{"recordName":"w%s-b%s-r%d","recordType":"Note","zoneID":{"zoneName":"load-%s"},"fields":{"title":{"value":"writer %s batch %s"}%s}}' % (w, b, r, w, w, b, extra if r == 0 else ""))
PY
    if "$ckport" import "$work/w$w.jsonl" --store "$store" --wait 600 -q "${flags[@]}" 2>"$work/w$w.err"; then
      echo "ok $w $b" >> "$work/writes.log"
    else
      echo "failed $w $b: $(head -c 300 "$work/w$w.err" | tr '\n' ' ')" >> "$work/writes.log"
    fi
  done
}

# An updater: the same SHARED Note records (made before the start) again and again, each round
# giving only its own field (updater 1 the title, updater 2 pinned) in upsert mode. Logs
# "ok U ROUND" or "failed U ROUND: message".
# SQLite's readers never wait; PostgreSQL's wait for a migration's tables (at most --wait).
read_wait=0
[ -z "${LOAD_POSTGRES:-}" ] || read_wait=600
updater() {
  local u=$1 round=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    round=$((round + 1))
    python3 - "$u" "$round" "$shared" > "$work/u$u.jsonl" <<'PY'
import sys
u, round, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# The second updater goes the other way round, so the two meet wherever they are.
order = range(n) if u == "1" else reversed(range(n))
for r in order:
    field = '"title":{"value":"updater 1 round %d"}' % round if u == "1" else '"pinned":{"value":%d}' % round
    print('{"recordName":"shared-%05d","recordType":"Note","zoneID":{"zoneName":"shared"},"fields":{%s}}' % (r, field))
PY
    if "$ckport" import "$work/u$u.jsonl" --store "$store" --mode upsert --wait 600 -q 2>"$work/u$u.err"; then
      echo "ok $u $round" >> "$work/updates.log"
    else
      echo "failed $u $round: $(head -c 300 "$work/u$u.err" | tr '\n' ' ')" >> "$work/updates.log"
    fi
  done
}

# A reader: exports the whole store, then checks that each batch is wholly in the export or
# wholly out, and that every record of the sample is in it exactly once (as NoteV1 or, once
# the migration has run, NoteV2: no type ever missing).
reader() {
  local r=$1 n=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    n=$((n + 1))
    if "$ckport" export --store "$store" --style plain --wait "$read_wait" -o "$work/r$r.jsonl" -q 2>"$work/r$r.err"; then
      python3 - "$work/r$r.jsonl" "$batch" samples/notes/records.jsonl >> "$work/reads-$r.log" <<'PY'
import collections, json, sys
counts = collections.Counter()
names = collections.Counter()
sample = {json.loads(line)["recordName"] for line in open(sys.argv[3], encoding="utf-8")}
total = 0
for line in open(sys.argv[1], encoding="utf-8"):
    record = json.loads(line)
    name = record["recordName"]
    total += 1
    names[(name, record.get("zoneName", ""))] += 1
    if name.startswith("w") and record["recordType"] == "Note":
        counts[name.rsplit("-", 1)[0]] += 1
twice = [key for key, count in names.items() if count > 1]
partial = [key for key, count in counts.items() if count != int(sys.argv[2])]
missing = sorted(sample - {name for name, _ in names})
if twice:
    print("inconsistent: %s twice" % (twice[:3],))
elif partial:
    print("inconsistent: partial batches %s" % partial[:5])
elif missing:
    print("inconsistent: %d records of the sample missing, such as %s" % (len(missing), missing[:3]))
else:
    print("consistent %d" % total)
PY
    else
      echo "failed: $(head -c 300 "$work/r$r.err" | tr '\n' ' ')" >> "$work/reads-$r.log"
    fi
  done
}

# The schema changes once, a third of the way in: the current schema plus a field on Folder.
# A writer may add a field between the export and the import; then the import is refused
# (it would drop a field that holds values) and is tried again.
schema_change() {
  sleep $(( seconds / 3 ))
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    "$ckport" schema export --store "$store" -o "$work/schema.ckdb" -q
    python3 - "$work/schema.ckdb" <<'PY'
import sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
text = text.replace("RECORD TYPE Folder (", "RECORD TYPE Folder (\n        loadCheckLabel STRING,", 1)
open(path, "w", encoding="utf-8").write(text)
PY
    if "$ckport" schema import "$work/schema.ckdb" --store "$store" --wait 600 -q 2>"$work/schema.err"; then
      echo "schema changed (attempt $attempt)" >> "$work/others.log"; return
    fi
    grep -q "would go away" "$work/schema.err" || { echo "schema change failed: $(tr '\n' ' ' < "$work/schema.err")" >> "$work/others.log"; return; }
  done
  echo "schema change refused 10 times" >> "$work/others.log"
}

# The notes migrations, half way in, with their backup.
migration() {
  sleep $(( seconds / 2 ))
  if "$ckport" migrate apply --dir migrations/notes --store "$store" --backup "$work/before.ckbundle" --wait 600 -q 2>"$work/migrate.err"; then
    echo "migration applied" >> "$work/others.log"
  else
    echo "migration failed: $(tr '\n' ' ' < "$work/migrate.err")" >> "$work/others.log"
  fi
}

: > "$work/writes.log"; : > "$work/updates.log"; : > "$work/others.log"
pids=()
for w in $(seq 1 "$writers"); do writer "$w" & pids+=($!); done
for u in 1 2; do updater "$u" & pids+=($!); done
for r in $(seq 1 "$readers"); do reader "$r" & pids+=($!); done
schema_change & pids+=($!)
migration & pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done

"$ckport" export --store "$store" --type Note --style plain -o "$work/final.jsonl" -q
"$ckport" schema export --store "$store" -o "$work/final.ckdb" -q
if [ -n "${LOAD_POSTGRES:-}" ]; then
  # Each table's columns, as "TABLE COLUMN" lines, for the check that schema and tables agree.
  psql -qAt -F ' ' "$server" -c "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = '$namespace'" > "$work/columns.txt"
else
  sqlite3 "$store" "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'" | tr '|' ' ' > "$work/columns.txt"
fi
python3 - "$work" "$batch" "$store" "${LOAD_POSTGRES:+postgresql}" <<'PY'
import collections, glob, json, subprocess, sys
work, batch, store, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] or "sqlite"
problems = []
ok, failed, lock_failures = set(), [], []
for line in open(f"{work}/writes.log"):
    if line.startswith("ok "):
        _, w, b = line.split()
        ok.add(f"w{w}-b{b}")
    else:
        failed.append(line.strip())
        if "another process is still writing" in line or "locked" in line:
            lock_failures.append(line.strip())
counts = collections.Counter()
names = collections.Counter()
pinned, titles = {}, {}
for line in open(f"{work}/final.jsonl", encoding="utf-8"):
    record = json.loads(line)
    name = record["recordName"]
    names[(name, record.get("zoneName", ""))] += 1
    if name.startswith("w"):
        counts[name.rsplit("-", 1)[0]] += 1
    if name.startswith("shared-"):
        titles[name] = record.get("title")
        pinned[name] = record.get("pinned")
doubled = [n for n, c in names.items() if c > 1]
lost = [key for key in ok if counts.get(key, 0) != batch]
stray = [key for key in counts if key not in ok]
# The updaters: each record holds each updater's last value it reported as imported.
last = {"1": 0, "2": 0}
update_failures = []
for line in open(f"{work}/updates.log"):
    if line.startswith("ok "):
        _, u, round = line.split()
        last[u] = max(last[u], int(round))
    else:
        update_failures.append(line.strip())
want_title = f"updater 1 round {last['1']}" if last["1"] else "not updated yet"
lost_updates = [n for n in sorted(titles) if titles[n] != want_title or pinned.get(n) != last["2"]]
# Each reader keeps a log of its own (appends from several processes to one file are not
# guaranteed to stay whole lines on every file system); a reader's checker prints one line
# per export.
reads = [line for path in sorted(glob.glob(f"{work}/reads-*.log")) for line in open(path).read().splitlines() if line.strip()]
consistent = [r for r in reads if r.startswith("consistent")]
bad_reads = [r for r in reads if not r.startswith("consistent")]
if kind == "sqlite":
    integrity = subprocess.run(["sqlite3", store, "PRAGMA integrity_check"], capture_output=True, text=True).stdout.strip()
else:
    integrity = "not checked (SQLite's check)"
types = {}
current = None
for line in open(f"{work}/final.ckdb", encoding="utf-8"):
    line = line.strip()
    if line.startswith("RECORD TYPE "):
        current = line.split()[2]
        types[current] = set()
    elif current and line and not line.startswith(("GRANT", ");", "--")):
        field = line.split()[0].strip('"')
        if not field.startswith("___"):
            types[current].add(field)
tables = collections.defaultdict(set)
for line in open(f"{work}/columns.txt", encoding="utf-8"):
    table, _, column = line.rstrip("\n").partition(" ")
    tables[table].add(column)
mismatched = []
for name, fields in types.items():
    columns = {c for c in tables.get(name, set()) if not c.startswith("___") and not c.endswith(":action")}
    if columns != fields:
        mismatched.append(f"{name}: schema {sorted(fields - columns)} not in table, table {sorted(columns - fields)} not in schema")
others = open(f"{work}/others.log").read().splitlines()
print(f"writes: {len(ok)} batches of {batch} imported, {len(failed)} failed ({len(lock_failures)} for a lock)")
print(f"reads: {len(consistent)} exports, each one consistent state; {len(bad_reads)} not")
print(f"updates: {last['1']} rounds of updater 1 and {last['2']} of updater 2 on {len(titles)} shared records, {len(update_failures)} failed; {len(lost_updates)} records lost an update")
print(f"store ({kind}): {sum(names.values())} Note records, {len(counts)} batches, integrity {integrity}; schema and tables agree: {'yes' if not mismatched else 'no'}")
for line in others:
    print(line)
if lock_failures: problems.append(f"writes failed for a lock: {lock_failures[:3]}")
if failed: problems.append(f"writes failed: {failed[:3]}")
if update_failures: problems.append(f"updates failed: {update_failures[:3]}")
if not last["1"] or not last["2"]: problems.append("an updater never got an update in")
if len(titles) == 0: problems.append("no shared record in the final export")
if lost_updates: problems.append(f"updates lost: {[(n, titles[n], pinned.get(n)) for n in lost_updates[:3]]}, want ({want_title!r}, {last['2']})")
if lost: problems.append(f"batches imported but not wholly in the store: {lost[:5]}")
if stray: problems.append(f"batches in the store that no import reported: {stray[:5]}")
if doubled: problems.append(f"records twice: {doubled[:5]}")
if bad_reads: problems.append(f"reads: {bad_reads[:3]}")
if kind == "sqlite" and integrity != "ok": problems.append(f"integrity_check: {integrity}")
if mismatched: problems.append(f"schema and tables disagree: {mismatched}")
if not any(o.startswith("schema changed") for o in others): problems.append("the schema change did not happen")
if "migration applied" not in others: problems.append("the migration did not apply")
for problem in problems:
    print("load-check: " + problem, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
