#!/usr/bin/env bash
# A throwaway moto S3 server (moto's emulation of AWS, from PyPI) for the tests: a second S3
# implementation beside SeaweedFS, for the edges where servers differ (ranges, listings of
# uploads, the answers of a multipart upload), on 127.0.0.1.
#
#   scripts/moto.sh start DIR   start it on a free port and print its endpoint's URL
#   scripts/moto.sh stop DIR    stop it (DIR can then be removed)
#
# moto accepts any key and does not check signatures (SeaweedFS does that); its key is in
# DIR/credentials as SeaweedFS's is. moto comes from PyPI (moto[server], in the venv
# $CKPORT_TEST_VENV, default ~/.cache/ckport-test-venv).
set -euo pipefail

command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
venv=${CKPORT_TEST_VENV:-${HOME:-/root}/.cache/ckport-test-venv}

case $command in
  start)
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    [ -x "$venv/bin/moto_server" ] || "$venv/bin/pip" install -q 'moto[server]==5.2.1'
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    umask 077
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "moto-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
      "$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" > "$dir/credentials"
    (
      for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
      done
      exec setsid "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" > "$dir/moto.log" 2>&1 < /dev/null &
      echo $! > "$dir/pid"
    )
    for _ in $(seq 1 150); do
      status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
      [ "$status" = 200 ] && break
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || { cat "$dir/moto.log" >&2; exit 1; }
      sleep 0.2
    done
    if [ "$status" != 200 ]; then
      echo "$0: moto did not answer ($status)" >&2
      tail -20 "$dir/moto.log" >&2
      "$0" stop "$dir"
      exit 1
    fi
    echo "http://127.0.0.1:$port"
    ;;
  stop)
    [ -f "$dir/pid" ] || exit 0
    pid=$(cat "$dir/pid")
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$pid" 2>/dev/null || true
    rm -f "$dir/pid"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
