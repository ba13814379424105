#!/usr/bin/env bash
# Runs one libFuzzer target for a while:
#
#   scripts/fuzz.sh TARGET [SECONDS]      # TARGET: schema, json, bundle, where, xml, coredata, or a format ckport reads (csv, tsv, ics, xcal, plist)
#   scripts/fuzz.sh all 600               # each target in turn
#
# Builds Sources/ckport-fuzz with the fuzzer and address sanitizers into .build-fuzz/, starts
# from the seeds committed in Fuzz/corpus/TARGET (inputs the fuzzer finds go to
# .build-fuzz/corpus/TARGET, not into the repository) and writes a crashing, hanging or leaking
# input to Fuzz/findings/. Replay one with the plain build:
#
#   swift run ckport-fuzz Fuzz/findings/FILE     # with CKPORT_FUZZ_TARGET=TARGET
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?"usage: scripts/fuzz.sh TARGET [SECONDS] (TARGET: schema, json, csv, tsv, ics, xcal, plist, bundle, where, expression, migration, mapping, template, cloudkit-page, xml, coredata or all)"}
seconds=${2:-60}
if [ "$target" = all ]; then
  for one in schema json csv tsv ics xcal plist bundle where expression migration mapping template cloudkit-page xml coredata; do "$0" "$one" "$seconds"; done
  exit 0
fi
case "$target" in schema|json|csv|tsv|ics|xcal|plist|bundle|where|expression|migration|mapping|template|cloudkit-page|xml|coredata) ;; *) echo "fuzz: unknown target $target" >&2; exit 1 ;; esac
# The flags go to every Swift module, so that the readers themselves report coverage.
swift build -c release --product ckport-fuzz --sanitize fuzzer --sanitize address --scratch-path .build-fuzz \
  -Xswiftc -DFUZZING -Xswiftc -sanitize=fuzzer,address >/dev/null
binary=$(swift build -c release --scratch-path .build-fuzz --show-bin-path)/ckport-fuzz
mkdir -p ".build-fuzz/corpus/$target" Fuzz/findings
echo "fuzz: $target for $seconds s"
# symbolize=0: the symbolizer can hang in a sandbox; the stack's addresses are enough to replay.
# Leak checking needs ptrace, which containers often forbid: FUZZ_DETECT_LEAKS=1 turns it on.
log=".build-fuzz/$target.log"
status=0
CKPORT_FUZZ_TARGET=$target ASAN_OPTIONS="symbolize=0:detect_leaks=${FUZZ_DETECT_LEAKS:-0}" \
  "$binary" ".build-fuzz/corpus/$target" "Fuzz/corpus/$target" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
  -artifact_prefix="Fuzz/findings/$target-" -print_final_stats=1 > "$log" 2>&1 || status=$?
grep -E "^(#[0-9]+ +DONE|Done|stat::(number_of_executed_units|new_units_added|peak_rss_mb))|ERROR|SUMMARY|Test unit written" "$log" | tail -n 8
exit "$status"
