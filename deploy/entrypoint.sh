#!/bin/sh
# The image's entry point: `gpuradar ARGS` (default `run`), with /etc/gpuradar/config.yaml
# as the configuration when one is mounted there and GPURADAR_CONFIG does not say otherwise.
# The HEALTHCHECK goes through it too (`gpuradar-entrypoint healthcheck`), so both read the
# same configuration.
set -eu
if [ -z "${GPURADAR_CONFIG:-}" ] && [ -f /etc/gpuradar/config.yaml ]; then
  GPURADAR_CONFIG=/etc/gpuradar/config.yaml
  export GPURADAR_CONFIG
fi
# The health check runs as a separate process and cannot see this command line: a metrics
# port or address given here is invisible to it and the container would never be healthy.
if [ "${1:-}" = run ]; then
  for arg in "$@"; do
    case $arg in
      --metrics-port|--metrics-port=*|--metrics-address|--metrics-address=*)
        echo "gpuradar-entrypoint: warning: the container's health check does not see" \
             "$arg; set GPURADAR_METRICS_PORT / GPURADAR_METRICS_ADDRESS (or metrics: in" \
             "the config file) instead" >&2
        break ;;
    esac
  done
fi
exec gpuradar "$@"
