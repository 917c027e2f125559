#!/bin/sh
# The image's entry point: `gpuradar ARGS` (default `run`), with /etc/gpuradar/config.yaml
# as the configuration when one is mounted there and GPURADAR_CONFIG does not say otherwise.
set -eu
if [ -z "${GPURADAR_CONFIG:-}" ] && [ -f /etc/gpuradar/config.yaml ]; then
  GPURADAR_CONFIG=/etc/gpuradar/config.yaml
  export GPURADAR_CONFIG
fi
exec gpuradar "$@"
