#!/usr/bin/env bash
# A throwaway CalDAV server for the tests and the benchmark, on 127.0.0.1: Radicale (with a
# user and password) or Xandikos (no authentication of its own), both from PyPI, in the venv
# $CKPORT_TEST_VENV (default ~/.cache/ckport-test-venv).
#
#   scripts/caldav-server.sh start radicale DIR   start it with its data in DIR on a free port and
#                                                 print its URL; the user is in DIR/user, the
#                                                 password in DIR/password
#   scripts/caldav-server.sh start xandikos DIR   the same; its principal is /user/, its calendar
#                                                 home /user/calendars/
#   scripts/caldav-server.sh stop DIR             stop it (DIR can then be removed)
set -euo pipefail

command=${1:-}
case $command in
start) server=${2:-}; dir=${3:-} ;;
stop) dir=${2:-} ;;
*) echo "usage: $0 start radicale|xandikos DIR | stop DIR" >&2; exit 2 ;;
esac
[ -n "$dir" ] || { echo "usage: $0 start radicale|xandikos DIR | stop DIR" >&2; exit 2; }
venv=${CKPORT_TEST_VENV:-${HOME:-/root}/.cache/ckport-test-venv}

if [ "$command" = stop ]; then
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
  exit 0
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# The versions the tests were written against (Radicale 3.9.0, Xandikos 0.4.10), and the
# clients that read back what ckport publishes (caldav 3.6.0, vdirsyncer 0.21.0).
[ -x "$venv/bin/radicale" ] && [ -x "$venv/bin/xandikos" ] && [ -x "$venv/bin/vdirsyncer" ] \
  && "$venv/bin/python" -c 'import caldav' 2>/dev/null \
  || "$venv/bin/pip" install -q 'radicale==3.9.0' 'xandikos==0.4.10' 'caldav==3.6.0' 'vdirsyncer==0.21.0'
mkdir -p "$dir"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
case $server in
radicale)
  echo family > "$dir/user"
  python3 -c 'import secrets; print(secrets.token_urlsafe(18))' > "$dir/password"
  chmod 600 "$dir/password"
  printf 'family:%s\n' "$(cat "$dir/password")" > "$dir/users"
  cat > "$dir/config" <<EOF
[server]
hosts = 127.0.0.1:$port
[auth]
type = htpasswd
htpasswd_filename = $dir/users
htpasswd_encryption = plain
delay = 0
[rights]
type = owner_only
[storage]
filesystem_folder = $dir/collections
[logging]
level = warning
EOF
  setsid "$venv/bin/radicale" --config "$dir/config" > "$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  ;;
xandikos)
  setsid "$venv/bin/xandikos" serve -d "$dir/data" --defaults -l 127.0.0.1 -p "$port" \
    --no-detect-systemd > "$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  ;;
*) echo "usage: $0 start radicale|xandikos DIR" >&2; exit 2 ;;
esac
url="http://127.0.0.1:$port/"
for _ in $(seq 100); do
  if curl -s -o /dev/null -m 2 "$url"; then echo "$url"; exit 0; fi
  kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
  sleep 0.1
done
echo "error: $server did not start:" >&2
cat "$dir/log" >&2
exit 1
