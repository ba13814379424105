#!/usr/bin/env bash
# Fails when a call that exists on one platform only (Linux's sync_file_range, posix_fadvise,
# Glibc; Darwin's F_NOCACHE, …) is not inside a guard for that platform, in Sources/ and
# Examples/. Shows first that the check finds such calls (its self-test). CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/platform_check.py --self-test
python3 scripts/platform_check.py Sources Examples
