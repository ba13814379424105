#!/usr/bin/env bash
# Looks for memory leaks and memory errors in ckport's readers with Valgrind's memcheck:
#
#   scripts/leak-check.sh TARGET [MAX_INPUTS]    # TARGET: schema, json, csv, ics, bundle or where
#   scripts/leak-check.sh all [MAX_INPUTS]
#
# Replays every input of the target's corpus — the seeds in Fuzz/corpus/TARGET and, when
# scripts/fuzz.sh has run, the inputs the fuzzer found in .build-fuzz/corpus/TARGET (up to
# MAX_INPUTS of them, default all) — through the plain build of Sources/ckport-fuzz under
# memcheck. Any block definitely lost, or any invalid read or write, fails the check.
#
# This stands in for LeakSanitizer, which needs ptrace and so often cannot run in a container.
# Before the real targets it runs a canary target that leaks on purpose, and fails unless
# memcheck reports that leak: a checker that cannot see a leak proves nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?"usage: scripts/leak-check.sh TARGET [MAX_INPUTS] (TARGET: schema, json, csv, tsv, ics, xcal, plist, bundle, where, expression, migration, mapping, template, cloudkit-page, xml, coredata or all)"}
limit=${2:-0}
command -v valgrind >/dev/null || { echo "leak-check: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
case "$target" in all) targets="schema json csv tsv ics xcal plist bundle where expression migration mapping template cloudkit-page xml coredata" ;;
  schema|json|csv|tsv|ics|xcal|plist|bundle|where|expression|migration|mapping|template|cloudkit-page|xml|coredata) targets=$target ;;
  *) echo "leak-check: unknown target $target" >&2; exit 1 ;;
esac
swift build -c release --product ckport-fuzz >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Swift writes DWARF 5, which older Valgrind releases cannot read; the symbol table is enough.
strip --strip-debug -o "$work/ckport-fuzz" "$(swift build -c release --show-bin-path)/ckport-fuzz"

memcheck() { # TARGET LOG INPUT... → memcheck's exit status (9 on any leak or error)
  local name=$1 log=$2
  shift 2
  CKPORT_FUZZ_TARGET=$name valgrind --quiet --leak-check=full --show-leak-kinds=definite \
    --errors-for-leak-kinds=definite --error-exitcode=9 "$work/ckport-fuzz" "$@" >"$log" 2>&1
}

echo "x" > "$work/canary-input"
if memcheck leak-canary "$work/canary.log" "$work/canary-input"; then
  echo "leak-check: memcheck did not see the canary's leak, so it cannot vouch for anything" >&2
  exit 1
fi
grep -q "definitely lost" "$work/canary.log" || { cat "$work/canary.log" >&2; exit 1; }
echo "leak-check: canary leak seen, as it should be"

failed=0
for name in $targets; do
  inputs="$work/$name-inputs"
  mkdir -p "$inputs"
  count=0
  for folder in "Fuzz/corpus/$name" ".build-fuzz/corpus/$name"; do
    [ -d "$folder" ] || continue
    for file in "$folder"/*; do
      [ -f "$file" ] || continue
      if [ "$limit" -gt 0 ] && [ "$count" -ge "$limit" ]; then break; fi
      count=$((count + 1))
      ln -s "$PWD/$file" "$inputs/$count"
    done
  done
  log=".build/leak-check-$name.log"
  start=$(date +%s)
  if memcheck "$name" "$log" "$inputs"; then
    echo "leak-check: $name: $count inputs, no leak, no memory error ($(( $(date +%s) - start )) s)"
  else
    echo "leak-check: $name: FAILED — see $log" >&2
    grep -E "definitely lost|Invalid (read|write)|uninitialised" "$log" | head -n 5 >&2 || true
    failed=1
  fi
done
exit "$failed"
