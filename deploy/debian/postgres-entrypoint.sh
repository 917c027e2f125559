#!/bin/sh
# The entry point of deploy/debian's postgres image: the part of the postgres:15 image's
# interface compose-ha.yaml relies on, written for Debian's PostgreSQL 15.
#
# `postgres ...` as root: the data directory is made the postgres user's, and the rest runs
# as that user. On the first start (an empty PGDATA) the cluster is created: superuser
# POSTGRES_USER (default postgres) with POSTGRES_PASSWORD, database POSTGRES_DB (default
# the user's name), password (scram-sha-256) logins from any address, listening on every
# interface; then the scripts in /docker-entrypoint-initdb.d (*.sh run with sh, *.sql fed
# to psql) run once against a server reachable only through its socket, so nobody
# connects before they are done. Any other command (the replica's `bash -c ...`) is run
# as given.
set -eu

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
if [ "$(id -u)" = 0 ]; then
  chown postgres:postgres "$PGDATA"
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups -- /bin/sh "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is not set; the cluster would accept" \
         "password logins with no password: refusing to create it" >&2
    exit 1
  fi
  export POSTGRES_USER="${POSTGRES_USER:-postgres}"
  export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"

  # The scripts' server listens on a socket of its own: a health check (pg_isready on the
  # usual socket) passes only once the real server is up.
  PGHOST=$(mktemp -d)
  export PGHOST
  pg_ctl --wait --silent -o "-c listen_addresses='' -c unix_socket_directories='$PGHOST'" start
  if [ "$POSTGRES_DB" != postgres ]; then
    # (psql expands :"db", quoted as an identifier, in its input, not in -c)
    echo 'CREATE DATABASE :"db"' | psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" \
      --dbname=postgres --quiet --set=db="$POSTGRES_DB"
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sh)  echo "postgres-entrypoint: running $f"; sh "$f" ;;
      *.sql) echo "postgres-entrypoint: running $f"
             psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" \
               --quiet -f "$f" ;;
      *)     [ ! -e "$f" ] || echo "postgres-entrypoint: ignoring $f" ;;
    esac
  done
  pg_ctl --wait --silent -m fast stop
  rmdir "$PGHOST"
  unset PGHOST
  echo "postgres-entrypoint: cluster created in $PGDATA"
fi
exec "$@"
