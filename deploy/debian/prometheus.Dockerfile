# Prometheus from Debian bookworm's packages (2.42), offering what compose-ha.yaml uses of
# the prom/prometheus image: the server's flags as the command, its data in /prometheus,
# an unprivileged user. For where Docker Hub cannot be reached: compose-ha.debian.yaml
# builds it (docs/deploy.md). BASE_IMAGE: as in postgres.Dockerfile.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends prometheus \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && install -d -o prometheus -g prometheus -m 0755 /prometheus
USER prometheus
WORKDIR /prometheus
VOLUME ["/prometheus"]
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
