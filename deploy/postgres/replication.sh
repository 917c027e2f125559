#!/bin/sh
# Run once by the postgres image when it initialises its data directory
# (/docker-entrypoint-initdb.d): a role the streaming replica of compose-ha.yaml connects
# as, and the pg_hba.conf line that lets it (a `host all ...` line does not cover
# replication connections).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -c "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '${REPLICATION_PASSWORD:-replicator}'"
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
