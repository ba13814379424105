#!/usr/bin/env bash
# Writes docs/cli.md, the help of every ckport command, from the command tree itself. The test
# "command-line reference" fails until the committed file matches what the commands say.
set -euo pipefail
cd "$(dirname "$0")/.."
CKPORT_WRITE_REFERENCE=1 swift test --filter ReferenceTests.referenceIsCurrent >/dev/null
echo "wrote docs/cli.md"
