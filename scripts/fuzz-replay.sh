#!/usr/bin/env bash
# Replays every file of Fuzz/corpus through its fuzz target once (the targets built without
# libFuzzer, Sources/ckport-fuzz): each input that once crashed a reader, and every seed, must
# read without a crash now. CI runs this; scripts/fuzz.sh TARGET SECONDS searches for new ones.
#
#   scripts/fuzz-replay.sh
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product ckport-fuzz >/dev/null
fuzz="$(swift build --show-bin-path)/ckport-fuzz"
total=0
for folder in Fuzz/corpus/*/; do
  target=$(basename "$folder")
  files=$(find "$folder" -maxdepth 1 -type f | wc -l)
  [ "$files" -gt 0 ] || { echo "fuzz-replay: $folder holds no input" >&2; exit 1; }
  # A crash ends the replay with the signal's status, which fails this script.
  out=$(CKPORT_FUZZ_TARGET="$target" "$fuzz" "$folder")
  [ "$out" = "ckport-fuzz: $target: $files inputs replayed" ] || { echo "fuzz-replay: $target: $out (expected $files inputs)" >&2; exit 1; }
  echo "$out"
  total=$((total + files))
done
echo "fuzz-replay: $total corpus files replayed through their targets, none crashed"
