#!/bin/sh
# Make `docker build -f deploy/Dockerfile .` possible on this machine, then print the Python
# base image to build from (`--build-arg PYTHON_IMAGE=$(sh deploy/image-base.sh)`):
#
# 1. a Docker engine that answers: when none does and we are root, Debian's `docker.io` is
#    installed if `dockerd` is missing, and `dockerd` is started in the background (log in
#    /var/log/gpuradar-dockerd.log);
# 2. the base image: $PYTHON_IMAGE (python:3.11-slim-bookworm) when it is present or can be
#    pulled; otherwise local/python:3.11-bookworm, the same Debian release with Debian's
#    Python 3.11, made once with debootstrap from the Debian mirror this machine's apt
#    sources name, and reused afterwards. It trusts what the machine trusts (its extra CA
#    certificates) and uses its apt sources, so apt and pip work inside builds here.
#
# Progress goes to stderr; stdout is only the image name. Used by `make image` and by
# tests/project/test_image.py (which `.ci/run` runs).
set -eu

PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim-bookworm}
LOCAL_IMAGE=${GPURADAR_LOCAL_BASE_IMAGE:-local/python:3.11-bookworm}
SUITE=bookworm

say() { echo "image-base: $*" >&2; }
die() { say "error: $*"; exit 1; }
as_root() { [ "$(id -u)" = 0 ] || die "$1 (run this as root, or do it by hand)"; }

# -- 1. the engine -----------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null 2>&1; then
    as_root "no Docker engine: install Debian's docker.io"
    say "installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends docker.io >&2 ||
      { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends docker.io >&2; }
  fi
  if ! [ -S /var/run/docker.sock ] || ! docker info >/dev/null 2>&1; then
    as_root "the Docker engine is not running: start dockerd"
    say "starting dockerd (log: /var/log/gpuradar-dockerd.log)"
    setsid dockerd >>/var/log/gpuradar-dockerd.log 2>&1 < /dev/null &
  fi
  i=0
  until docker info >/dev/null 2>&1; do
    i=$((i + 1))
    [ "$i" -le 60 ] || die "dockerd did not answer within 60 s; see /var/log/gpuradar-dockerd.log"
    sleep 1
  done
fi

# -- 2. the base image -------------------------------------------------------------------------
have() { docker image inspect "$1" >/dev/null 2>&1; }
if have "$PYTHON_IMAGE"; then echo "$PYTHON_IMAGE"; exit 0; fi
if have "$LOCAL_IMAGE"; then echo "$LOCAL_IMAGE"; exit 0; fi
say "pulling $PYTHON_IMAGE"
if docker pull -q "$PYTHON_IMAGE" >&2 2>/dev/null; then echo "$PYTHON_IMAGE"; exit 0; fi

say "$PYTHON_IMAGE cannot be pulled; making $LOCAL_IMAGE with debootstrap (about a minute)"
as_root "debootstrap needs root"
# The mirror of this machine's Debian sources: deb822 (URIs:) or one-line (deb URL suite ...).
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
           awk '$1 == "deb" && $2 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}')
fi
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d}"
command -v debootstrap >/dev/null 2>&1 || {
  say "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
}

work=$(mktemp -d /var/tmp/gpuradar-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
say "debootstrap $SUITE from $mirror"
debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
  "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap $SUITE from $mirror failed"; }

# apt inside builds uses this machine's sources; TLS trusts what this machine trusts.
rm -f "$rootfs/etc/apt/sources.list"
mkdir -p "$rootfs/etc/apt/sources.list.d"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && cp "$f" "$rootfs$f"
done
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 ||
    die "update-ca-certificates failed in the base image"
fi
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$rootfs/etc/pip.conf"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

tar --numeric-owner -C "$rootfs" -c . |
  docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$LOCAL_IMAGE" >/dev/null
say "made $LOCAL_IMAGE"
echo "$LOCAL_IMAGE"
