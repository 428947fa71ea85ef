#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster on 127.0.0.1 for the tests of
# persistence/postgres, and prints the DSN to use:
#
#   eval "$(bash .ci/postgres.sh)"     # sets AGENTSTATE_TEST_POSTGRES
#
# It also writes that export line to $AGENTSTATE_PG_DIR/env. Idempotent: a
# second run reuses the cluster (starting it if it is down) and prints the same
# line. `bash .ci/postgres.sh stop` stops the cluster.
#
# What it does: installs Debian's `postgresql` package when no server binaries
# are found (apt-get; sudo when not root), creates a cluster with initdb in
# $AGENTSTATE_PG_DIR (default /tmp/agentstate-pg) owned by the `postgres` user
# when run as root (initdb refuses root) or by the caller otherwise, starts it
# with pg_ctl on 127.0.0.1:$AGENTSTATE_PG_PORT (default 55432; no other
# address, the socket in the data directory), and creates the role and
# database `agentstate` (password `agentstate`, CREATEDB so that each test run
# can make its own database).
#
# The cluster is for tests only: fsync is off so that the suite's many small
# DDL transactions are fast on a shared machine. The store's own durability
# comes from the server it is given; production servers keep fsync on.
#
# Everything but the final export line goes to stderr.
set -euo pipefail

DIR="${AGENTSTATE_PG_DIR:-/tmp/agentstate-pg}"
PORT="${AGENTSTATE_PG_PORT:-55432}"
DATA="$DIR/data"
LOG="$DIR/server.log"
ROLE=agentstate
PASSWORD=agentstate
DB=agentstate

log() { echo "postgres.sh: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 && SUDO="sudo"
fi

# pgbin prints the bin directory of the newest installed server, if any.
pgbin() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
    echo "$d"
  fi
}

BIN="$(pgbin)"
if [ -z "$BIN" ]; then
  log "installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  # The package's own cluster (port 5432) is not used; its start may fail in a
  # container without an init system, which does not matter here.
  $SUDO apt-get install -y -qq postgresql >&2 ||
    { $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq postgresql >&2; }
  BIN="$(pgbin)"
  [ -n "$BIN" ] || { log "no PostgreSQL server binaries after installing"; exit 1; }
fi

# as_owner runs a command as the cluster's owner.
if [ "$(id -u)" -eq 0 ]; then
  OWNER=postgres
  id -u "$OWNER" >/dev/null 2>&1 || { log "user $OWNER is missing (the postgresql package creates it)"; exit 1; }
  as_owner() { runuser -u "$OWNER" -- "$@"; }
else
  OWNER="$(id -un)"
  as_owner() { "$@"; }
fi

if [ "${1:-}" = "stop" ]; then
  if [ -f "$DATA/PG_VERSION" ]; then
    as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
  fi
  exit 0
fi

mkdir -p "$DIR"
if [ "$(id -u)" -eq 0 ]; then
  chown "$OWNER" "$DIR"
fi
chmod 0700 "$DIR"

if [ ! -f "$DATA/PG_VERSION" ]; then
  log "initdb $DATA ($("$BIN/postgres" --version))"
  rm -rf "$DATA"
  # Local (socket) connections trust the owner, TCP needs the password.
  as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
  cat >>"$DATA/postgresql.conf" <<EOF

# agentstate test cluster (.ci/postgres.sh)
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
max_connections = 200
shared_buffers = 64MB
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
fi

if ! as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  log "starting the cluster on 127.0.0.1:$PORT"
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >&2 || { tail -20 "$LOG" >&2; exit 1; }
fi

psql_owner() { as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }

if [ "$(psql_owner -d postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != "1" ]; then
  psql_owner -d postgres -c "CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASSWORD'" >&2
fi
if [ "$(psql_owner -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != "1" ]; then
  psql_owner -d postgres -c "CREATE DATABASE $DB OWNER $ROLE" >&2
fi

# Test runs drop their own database; one that was killed cannot. What is left
# of such runs goes now; a database still in use (a run in progress) stays.
for old in $(psql_owner -d postgres -tAc "SELECT datname FROM pg_database WHERE datname LIKE 'agentstate\_test\_%'"); do
  psql_owner -d postgres -c "DROP DATABASE IF EXISTS \"$old\"" >/dev/null 2>&1 || true
done

DSN="postgres://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DB?sslmode=disable"
LINE="export AGENTSTATE_TEST_POSTGRES='$DSN'"
echo "$LINE" >"$DIR/env"
chmod 0644 "$DIR/env"
log "ready: $DSN"
echo "$LINE"
