#!/usr/bin/env bash
# Many ckport processes on one store at once: WRITERS processes import batches of records (some
# adding fields to the schema as they go), READERS processes export again and again, one
# process changes the schema and one applies a migration, all for SECONDS seconds. Then it
# checks that
#   - every batch an import reported as imported is in the store exactly once, and every batch
#     it reported as failed is not there at all (no record lost, none doubled, none half-done);
#   - no write failed for a lock it could have waited for;
#   - every export a reader took was one consistent state: each batch wholly in it or wholly out;
#   - the schema and the tables agree, and SQLite's integrity check says ok;
# and prints the counts.
#
#   scripts/load-check.sh                      # 8 writers, 2 readers, 60 seconds
#   scripts/load-check.sh 4 2 10               # WRITERS READERS SECONDS (what CI runs)
#
# CKPORT=path/to/ckport picks the binary (default: a debug build, built if needed). Needs
# sqlite3 and python3. Work files go to $LOAD_DIR (default: a temporary folder, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
writers=${1:-8}
readers=${2:-2}
seconds=${3:-60}
batch=${LOAD_BATCH:-200}
work=${LOAD_DIR:-$(mktemp -d)}
[ -n "${LOAD_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
for tool in sqlite3 python3; do
  command -v "$tool" >/dev/null || { echo "load-check: $tool is missing" >&2; exit 1; }
done
if [ -z "${CKPORT:-}" ]; then
  swift build --product ckport >/dev/null
  CKPORT=$(swift build --show-bin-path)/ckport
fi
ckport=$CKPORT
store="$work/load.sqlite"
"$ckport" import samples/notes/schema.ckdb samples/notes/records.jsonl --store "$store" -q
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

# A reader: exports every Note, then checks that each batch is wholly in the export or wholly out.
reader() {
  local r=$1 n=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    n=$((n + 1))
    if "$ckport" export --store "$store" --type Note --style plain --wait 0 -o "$work/r$r.jsonl" -q 2>"$work/r$r.err"; then
      python3 - "$work/r$r.jsonl" "$batch" >> "$work/reads-$r.log" <<'PY'
import collections, json, sys
counts = collections.Counter()
names = set()
total = 0
for line in open(sys.argv[1], encoding="utf-8"):
    name = json.loads(line)["recordName"]
    total += 1
    if name in names:
        print("inconsistent: %s twice" % name)
    names.add(name)
    if name.startswith("w"):
        counts[name.rsplit("-", 1)[0]] += 1
partial = [key for key, count in counts.items() if count != int(sys.argv[2])]
print(("inconsistent: partial batches %s" % partial[:5]) if partial else "consistent %d" % total)
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

: > "$work/writes.log"; : > "$work/others.log"
pids=()
for w in $(seq 1 "$writers"); do writer "$w" & pids+=($!); done
for r in $(seq 1 "$readers"); do reader "$r" & pids+=($!); done
schema_change & pids+=($!)
migration & pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done

"$ckport" export --store "$store" --type Note --style plain -o "$work/final.jsonl" -q
python3 - "$work" "$batch" "$store" <<'PY'
import collections, glob, json, subprocess, sys
work, batch, store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
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
for line in open(f"{work}/final.jsonl", encoding="utf-8"):
    name = json.loads(line)["recordName"]
    names[name] += 1
    if name.startswith("w"):
        counts[name.rsplit("-", 1)[0]] += 1
doubled = [n for n, c in names.items() if c > 1]
lost = [key for key in ok if counts.get(key, 0) != batch]
stray = [key for key in counts if key not in ok]
# Each reader keeps a log of its own (appends from several processes to one file are not
# guaranteed to stay whole lines on every file system); a reader's checker prints one line
# per export.
reads = [line for path in sorted(glob.glob(f"{work}/reads-*.log")) for line in open(path).read().splitlines() if line.strip()]
consistent = [r for r in reads if r.startswith("consistent")]
bad_reads = [r for r in reads if not r.startswith("consistent")]
integrity = subprocess.run(["sqlite3", store, "PRAGMA integrity_check"], capture_output=True, text=True).stdout.strip()
schema_text = subprocess.run(["sqlite3", store, "SELECT value FROM _ck_meta WHERE key = 'schema'"], capture_output=True, text=True).stdout
types = {}
current = None
for line in schema_text.splitlines():
    line = line.strip()
    if line.startswith("RECORD TYPE "):
        current = line.split()[2]
        types[current] = set()
    elif current and line and not line.startswith(("GRANT", ");", "--")):
        field = line.split()[0].strip('"')
        if not field.startswith("___"):
            types[current].add(field)
mismatched = []
for name, fields in types.items():
    columns = subprocess.run(["sqlite3", store, f"SELECT name FROM pragma_table_info('{name}')"], capture_output=True, text=True).stdout.split()
    columns = {c for c in columns if not c.startswith("___") and not c.endswith(":action")}
    if columns != fields:
        mismatched.append(f"{name}: schema {sorted(fields - columns)} not in table, table {sorted(columns - fields)} not in schema")
others = open(f"{work}/others.log").read().splitlines()
print(f"writes: {len(ok)} batches of {batch} imported, {len(failed)} failed ({len(lock_failures)} for a lock)")
print(f"reads: {len(consistent)} exports, each one consistent state; {len(bad_reads)} not")
print(f"store: {sum(names.values())} Note records, {len(counts)} batches, integrity {integrity}; schema and tables agree: {'yes' if not mismatched else 'no'}")
for line in others:
    print(line)
if lock_failures: problems.append(f"writes failed for a lock: {lock_failures[:3]}")
if failed: problems.append(f"writes failed: {failed[:3]}")
if lost: problems.append(f"batches imported but not wholly in the store: {lost[:5]}")
if stray: problems.append(f"batches in the store that no import reported: {stray[:5]}")
if doubled: problems.append(f"records twice: {doubled[:5]}")
if bad_reads: problems.append(f"reads: {bad_reads[:3]}")
if integrity != "ok": problems.append(f"integrity_check: {integrity}")
if mismatched: problems.append(f"schema and tables disagree: {mismatched}")
if not any(o.startswith("schema changed") for o in others): problems.append("the schema change did not happen")
if "migration applied" not in others: problems.append("the migration did not apply")
for problem in problems:
    print("load-check: " + problem, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
