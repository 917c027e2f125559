# PostgreSQL 15 from Debian bookworm's packages, offering what compose-ha.yaml uses of the
# postgres:15-bookworm image: POSTGRES_DB/USER/PASSWORD, scripts run once from
# /docker-entrypoint-initdb.d, PGDATA /var/lib/postgresql/data, the server's binaries
# (postgres, pg_basebackup, pg_isready) on PATH, the user postgres. For where Docker Hub
# cannot be reached: compose-ha.debian.yaml builds it (docs/deploy.md).
#
# The base is any Debian bookworm image with apt: the gpuradar image's
# (python:3.11-slim-bookworm, or deploy/image-base.sh's local one, whose apt sources are
# this machine's), so one build argument serves every image of the stack.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
# postgresql-common would create a cluster of its own at install time: the entry point
# creates the one this image serves, in PGDATA, on the first start.
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-common \
 && sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' \
      /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
 && install -d -o postgres -g postgres -m 3777 /var/run/postgresql \
 && install -d -m 0755 /docker-entrypoint-initdb.d
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
# SIGINT: PostgreSQL's fast shutdown (on SIGTERM it would wait for every client to leave)
STOPSIGNAL SIGINT
ENTRYPOINT ["/bin/sh", "/usr/local/bin/postgres-entrypoint"]
CMD ["postgres"]
