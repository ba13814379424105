#!/usr/bin/env bash
# The README's test command: installs what the suite needs and this machine lacks (see
# scripts/test-env.sh), starts a throwaway PostgreSQL cluster, then runs `swift test` with every
# suite required, the PostgreSQL ones included. Arguments go to swift test:
#
#   scripts/test.sh
#   scripts/test.sh --filter GuideRunTests
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/test-env.sh
swift test "$@"
