#!/usr/bin/env bash
# Checks ckport's outputs with readers ckport did not write: Python's json, csv, plistlib,
# tarfile and hashlib (scripts/peer_check.py), gzip and tar, sqlite3's integrity check,
# xmllint (well-formed XML; xCal against RFC 6321's RELAX NG schema), Python's icalendar and the
# RFC 5545 checker in ../shared/conformance when it is set up.
#
#   scripts/peer-check.sh
#
# Every sample app is imported, exported as JSON, JSON Lines, CSV and a property list, backed
# up, and (for the calendar apps) exported as iCalendar and xCal; each output goes through its
# peer.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v sqlite3 >/dev/null || { echo "peer-check: sqlite3 is missing (apt-get install sqlite3)" >&2; exit 1; }
command -v xmllint >/dev/null || { echo "peer-check: xmllint is missing (apt-get install libxml2-utils)" >&2; exit 1; }
xcal=Tests/FormatsTests/Fixtures/xcal
swift build --product ckport >/dev/null
ckport() { "$(swift build --show-bin-path)/ckport" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checker=../shared/conformance/ical_check.py
# The same variables as the tests, the quick start and ../shared/conformance/setup.sh:
# ICAL_CHECK_VENV (the checker's venv) and CKPORT_CONFORMANCE=required (a missing checker fails).
checker_python=${ICAL_CHECK_VENV:-$HOME/.cache/ical-check-venv}/bin/python

for app in family-todo family-calendar relationship-checkin screen-time-rewards notes; do
  echo "== $app"
  store="$work/$app.sqlite"
  ckport import "samples/$app/schema.ckdb" "samples/$app/records.jsonl" --store "$store" -q
  [ "$(sqlite3 "$store" 'PRAGMA integrity_check')" = ok ] || { echo "peer-check: $store fails sqlite3's integrity check" >&2; exit 1; }
  echo "sqlite3: $store: integrity_check ok"
  # The records the sample holds, counted by Python from the sample's file (not from the store
  # ckport filled): the store, and every export, must hold exactly these, and there must be some.
  count=$(python3 -c 'import json, sys; print(sum(1 for line in open(sys.argv[1], encoding="utf-8") if line.strip() and not json.loads(line).get("deleted")))' "samples/$app/records.jsonl")
  stored=$(sqlite3 "$store" 'SELECT count(*) FROM _ck_record WHERE deleted = 0')
  [ "$count" -gt 0 ] && [ "$stored" = "$count" ] || { echo "peer-check: $store holds $stored records, the sample $count" >&2; exit 1; }
  ckport export --store "$store" -o "$work/$app.jsonl" -q
  ckport export --store "$store" -o "$work/$app.json" -q
  python3 -m json.tool "$work/$app.json" > /dev/null
  python3 scripts/peer_check.py json "$work/$app.json" "$count"
  python3 scripts/peer_check.py jsonl "$work/$app.jsonl" "$count"
  ckport export --store "$store" -o "$work/$app-csv/" -q
  for sheet in "$work/$app-csv"/*.csv; do
    python3 scripts/peer_check.py csv "$sheet" "$work/$app.jsonl" "$(basename "$sheet" .csv)"
  done
  # A property list holds the types without a field named like a system key (as --style plain).
  type_args=()
  for type in $(python3 scripts/peer_check.py plist-types "$work/$app.jsonl"); do type_args+=(--type "$type"); done
  ckport export --store "$store" "${type_args[@]}" -o "$work/$app.plist" -q
  xmllint --noout "$work/$app.plist"
  python3 scripts/peer_check.py plist "$work/$app.plist" "$work/$app.jsonl"
  ckport backup --store "$store" -o "$work/$app.ckbundle" -q
  gzip -t "$work/$app.ckbundle"
  tar -tzf "$work/$app.ckbundle" > /dev/null
  python3 scripts/peer_check.py bundle "$work/$app.ckbundle" "$count"
  if [ -f "samples/$app/calendar.yaml" ]; then
    ckport export --store "$store" -o "$work/$app.ics" -q --dtstamp 2026-01-01T00:00:00Z
    ckport export --store "$store" -o "$work/$app.xcal" -q --dtstamp 2026-01-01T00:00:00Z
    python3 "$xcal/xcal_extensions.py" "$work/$app.xcal" "$work/$app.core.xml" > /dev/null
    xmllint --noout --relaxng "$xcal/icalendar-2.0.rng" "$work/$app.core.xml"
    python3 "$xcal/xcal_to_ics.py" "$work/$app.xcal" "$work/$app.xcal.ics"
    if [ -f "$checker" ] && [ -x "$checker_python" ]; then
      "$checker_python" "$checker" "$work/$app.ics" > "$work/$app.ics.report" || { cat "$work/$app.ics.report" >&2; exit 1; }
      echo "iCalendar (own rules, icalendar, libical): $(grep -m1 "^== " "$work/$app.ics.report")"
      "$checker_python" Tests/FormatsTests/Fixtures/compare_calendars.py --xcal "$work/$app.ics" "$work/$app.xcal.ics"
    elif [ "${CKPORT_CONFORMANCE:-}" = required ]; then
      echo "peer-check: the RFC 5545 checker is required (CKPORT_CONFORMANCE=required) but not set up at $checker_python" >&2
      exit 1
    else
      echo "iCalendar: the checker in ../shared/conformance is not set up; skipped"
    fi
  fi
done
echo "peer check: every output read back by tools ckport did not write"
