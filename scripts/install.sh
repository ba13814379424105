#!/usr/bin/env bash
# Builds ckport and ckport-emulator (CloudKit Web Services on loopback, for trying pull and
# push offline) in release mode and puts them on PATH.
#
#   scripts/install.sh                 # into ~/.local/bin (no root needed)
#   scripts/install.sh /usr/local      # into /usr/local/bin (may need sudo)
#
# A release build takes a few minutes the first time (SwiftPM prints its progress); a debug
# build (plain `swift build`) is 4–5 times slower at run time, so use this one for real data.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-$HOME/.local}
# CKPORT_INSTALL_FROM=DIR installs the programs built in DIR instead of building them (the
# test of this script installs the ones built for the tests).
if [ -n "${CKPORT_INSTALL_FROM:-}" ]; then
  bin=$CKPORT_INSTALL_FROM
else
  echo "building ckport (release; the first build takes a few minutes)…"
  swift build -c release --product ckport
  swift build -c release --product ckport-emulator
  bin="$(swift build -c release --show-bin-path)"
fi
mkdir -p "$prefix/bin"
for program in ckport ckport-emulator; do
  install -m 0755 "$bin/$program" "$prefix/bin/$program"
  echo "installed $prefix/bin/$program"
done
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: $prefix/bin is not on PATH; add it, e.g. export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
"$prefix/bin/ckport" --version
