#!/usr/bin/env bash
# What the PostgreSQL store's registry (_ck_record: a row per record name with its change number
# and transaction) costs a bulk load, and what each of its indexes costs, measured with psql's
# \copy alone so that ckport's client is out of the picture:
#
#   scripts/bench-floor/pg_registry.sh URL SCHEMA [ROUNDS [CKPORT SCHEMA_FILE RECORDS_FILE]]
#
# URL is a server (the password in PGPASSWORD), SCHEMA a namespace holding a ckport store that
# an import filled (its type tables and registry are the rows loaded here). Each round loads the
# same rows, in one transaction, into empty copies of the tables (CREATE TABLE … LIKE …
# INCLUDING ALL), once per layout, the layouts alternating; the table gives each layout's median
# and its ratio to the type tables alone, and the CPU time the whole machine spent meanwhile
# (client and server together: on a machine of N cores, no load of C CPU-seconds can take less
# than C / N seconds). Given a ckport binary, its schema and records files (those the store in
# SCHEMA was filled from), each round also imports them into a new namespace, for a row beside.
set -euo pipefail
url=${1:?"usage: pg_registry.sh URL SCHEMA [ROUNDS]"}
source=${2:?"usage: pg_registry.sh URL SCHEMA [ROUNDS]"}
rounds=${3:-3}
ckport=${4:-}
schema_file=${5:-}
records_file=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"; for s in floor_registry floor_ckport; do psql -X -q "$url" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1 || true; done' EXIT
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$url" "$@"; }
types=$(psql_run -At -c "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
  WHERE n.nspname = '$source' AND c.relkind = 'r' AND a.attname = '___recordID' ORDER BY 1")
[ -n "$types" ] || { echo "pg_registry: schema $source holds no record type's table" >&2; exit 1; }
records=0
for type in $types; do
  psql_run -c "\\copy \"$source\".\"$type\" TO '$work/$type.csv' CSV"
  records=$((records + $(wc -l < "$work/$type.csv")))
done
psql_run -c "\\copy \"$source\"._ck_record TO '$work/registry.csv' CSV"
[ "$(wc -l < "$work/registry.csv")" = "$records" ] || { echo "pg_registry: the registry holds $(wc -l < "$work/registry.csv") rows, the tables $records" >&2; exit 1; }

# layout NAME: a script that loads the type tables and, unless NAME is "types", a registry
# whose indexes NAME chooses.
registry="CREATE TABLE floor_registry._ck_record (LIKE \"$source\"._ck_record INCLUDING DEFAULTS, PRIMARY KEY (zone, \"recordName\"))"
layout() {
  local name=$1 file="$work/$1.sql"
  {
    echo "SET client_min_messages = warning; BEGIN; DROP SCHEMA IF EXISTS floor_registry CASCADE; CREATE SCHEMA floor_registry;"
    for type in $types; do
      echo "CREATE TABLE floor_registry.\"$type\" (LIKE \"$source\".\"$type\" INCLUDING ALL);"
      echo "\\copy floor_registry.\"$type\" FROM '$work/$type.csv' CSV"
    done
    case "$name" in
      types) ;;
      registry) echo "$registry; CREATE INDEX ON floor_registry._ck_record (seq); CREATE INDEX ON floor_registry._ck_record (xid);" ;;
      no-xid-index) echo "$registry; CREATE INDEX ON floor_registry._ck_record (seq);" ;;
      key-only) echo "$registry;" ;;
      *) echo "pg_registry: unknown layout $name" >&2; exit 1 ;;
    esac
    [ "$name" = types ] || echo "\\copy floor_registry._ck_record FROM '$work/registry.csv' CSV"
    echo "COMMIT;"
  } > "$file"
}
# CPU-seconds every process of the machine has spent (user, nice, system, interrupts).
busy() { awk '$1 == "cpu" { print ($2 + $3 + $4 + $7 + $8) / 100 }' /proc/stat; }
layouts="types registry no-xid-index key-only"
for name in $layouts; do layout "$name"; done
[ -z "$ckport" ] || layouts="$layouts ckport"
for round in $(seq "$rounds"); do
  for name in $layouts; do
    start=$(date +%s.%N)
    cpu=$(busy)
    if [ "$name" = ckport ]; then
      psql_run -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS floor_ckport CASCADE"
      "$ckport" import "$schema_file" "$records_file" --store "$url?schema=floor_ckport" -q
    else
      psql_run -f "$work/$name.sql"
    fi
    echo "$(echo "$(date +%s.%N) - $start" | bc)" >> "$work/$name.times"
    echo "$(echo "$(busy) - $cpu" | bc)" >> "$work/$name.cpu"
  done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(median "$work/types.times")
echo "\\copy of $records records into the type tables, in one transaction; median of $rounds rounds:"
echo
printf "| %-44s | %8s | %10s | %12s |\n" "layout" "seconds" "vs types" "CPU-seconds"
printf "|%s|%s|%s|%s|\n" "----------------------------------------------" "---------:" "-----------:" "-------------:"
for name in $layouts; do
  case "$name" in
    types) label="type tables alone" ;;
    registry) label="+ registry (key, seq and xid indexes)" ;;
    no-xid-index) label="+ registry without the xid index" ;;
    key-only) label="+ registry with its key alone" ;;
    ckport) label="ckport import of the same records (JSONL)" ;;
  esac
  m=$(median "$work/$name.times")
  printf "| %-44s | %8.2f | %9.2f× | %12.1f |\n" "$label" "$m" "$(echo "$m / $base" | bc -l)" "$(median "$work/$name.cpu")"
done
