#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests and the benchmark.
#
#   scripts/postgres-cluster.sh start DIR   initdb into DIR, start the server on 127.0.0.1 (a free
#                                           port; its Unix socket in DIR), create the role and
#                                           database `ckport`, and print the store URL
#   scripts/postgres-cluster.sh restart DIR stop it (every session ended at once) and start it again
#   scripts/postgres-cluster.sh stop DIR    stop it (DIR can then be removed)
#
# The server also takes TLS, with a certificate for localhost and 127.0.0.1 signed by an
# authority of its own (DIR/ca.crt), and has a second role, ckport_tls (the same password),
# that may connect over TLS only: what the tests of sslmode and sslrootcert need.
#
# The cluster runs without fsync (it is thrown away); CKPORT_PG_DURABLE=1 keeps fsync on, as the
# benchmark does. The role's password is written to DIR/password; pass it as PGPASSWORD (ckport never takes a
# password on its command line). PostgreSQL refuses to run as root: as root, the cluster runs
# as the system user ckport-pg, created when missing.
set -euo pipefail

command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { echo "usage: $0 start|restart|stop DIR" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "$0: PostgreSQL's server is not installed (Debian: apt-get install postgresql)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u ckport-pg -- "$@"; else "$@"; fi
}

# Runs pg_ctl to start the server with none of the caller's descriptors beyond 0-2: the
# server outlives this script, and a pipe or socket of the caller's it kept open would never
# close (a caller that waits for that, as Foundation's Process does, would wait for ever).
server_ctl() {
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
    done
    as_owner "$bin/pg_ctl" "$@"
  )
}

case $command in
  start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" -eq 0 ]; then
      id ckport-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ckport-pg
      chown ckport-pg "$dir"
    fi
    # The cluster's own password: random, readable by whoever started it.
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$password" > "$dir/password"
    chmod 600 "$dir/password"
    cp "$dir/password" "$dir/.initdb-password"
    [ "$(id -u)" -ne 0 ] || chown ckport-pg "$dir/.initdb-password"
    as_owner "$bin/initdb" -D "$dir/data" -U ckport --pwfile="$dir/.initdb-password" --auth=scram-sha-256 \
      -E UTF8 --locale=C.UTF-8 > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/.initdb-password"
    # An authority and a server certificate it signs (localhost, 127.0.0.1), for TLS.
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=ckport test authority" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$dir/server.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
      -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
    chmod 600 "$dir/server.key"
    [ "$(id -u)" -ne 0 ] || chown ckport-pg "$dir/server.key" "$dir/server.crt"
    # ckport_tls over TLS only (the first matching line wins).
    { printf 'hostnossl all ckport_tls 127.0.0.1/32 reject\nhostssl all ckport_tls 127.0.0.1/32 scram-sha-256\n'; cat "$dir/data/pg_hba.conf"; } > "$dir/pg_hba.conf"
    cp "$dir/pg_hba.conf" "$dir/data/pg_hba.conf"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fsync=off
    [ "${CKPORT_PG_DURABLE:-}" != 1 ] || fsync=on
    server_ctl -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=$fsync -c max_connections=64 -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" start > /dev/null \
      || { cat "$dir/data/server.log" >&2; exit 1; }
    PGPASSWORD=$password psql -q -h 127.0.0.1 -p "$port" -U ckport -d postgres -c "CREATE DATABASE ckport" > /dev/null
    PGPASSWORD=$password psql -q -h 127.0.0.1 -p "$port" -U ckport -d ckport \
      -c "CREATE ROLE ckport_tls LOGIN PASSWORD '$password'" -c "GRANT CREATE ON DATABASE ckport TO ckport_tls" > /dev/null
    echo "postgresql://ckport@127.0.0.1:$port/ckport"
    ;;
  restart)
    # Fast: the server ends every session at once (their transactions roll back), as a
    # restart for maintenance would; it comes back on the same port.
    server_ctl -D "$dir/data" -l "$dir/data/server.log" -m fast -w -t 60 restart > /dev/null \
      || { cat "$dir/data/server.log" >&2; exit 1; }
    ;;
  stop)
    [ -d "$dir/data" ] || exit 0
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop > /dev/null
    ;;
  *)
    echo "usage: $0 start|restart|stop DIR" >&2
    exit 2
    ;;
esac
