#!/usr/bin/env bash
# Writes samples/<app>/schema.ckdb, records.jsonl and (for the apps with a calendar side)
# calendar.yaml from ckport's seeded generator.
# The tests check that the committed samples equal this output, so run it after changing
# a generator or a sample schema.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product ckport >/dev/null
bin=$(swift build --show-bin-path)/ckport
while read -r app records; do
  mkdir -p "samples/$app"
  "$bin" generate --app "$app" --schema -o "samples/$app/schema.ckdb"
  "$bin" generate --app "$app" --records "$records" --seed 1 -o "samples/$app/records.jsonl"
  if "$bin" generate --app "$app" --mapping -o "samples/$app/calendar.yaml" 2>/dev/null; then :; else rm -f "samples/$app/calendar.yaml"; fi
  echo "samples/$app: $records records"
done <<'APPS'
family-todo 80
family-calendar 120
relationship-checkin 61
screen-time-rewards 90
notes 60
APPS
