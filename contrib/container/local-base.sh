#!/bin/sh
# Write to stdout a tarball of a build-stage base made from this host, for
# machines that cannot pull docker.io/library/golang (only a Debian mirror
# and the Go module proxy): a shell and the few tools the Dockerfile's RUN
# uses (with their libraries), Debian's /usr/lib/ipxe (package ipxe) and CA
# certificates (ca-certificates); with WITH_GO=1 also /usr/local/go, so the
# build stage can compile (otherwise pass a host-built binary: PREBUILT=dist).
#   contrib/container/local-base.sh | podman import - localhost/pxeperf-builder
#   podman build --format docker --build-arg BUILDER=localhost/pxeperf-builder \
#     --build-arg PREBUILT=dist -t pxeperf .
set -eu
for f in /usr/lib/ipxe/undionly.kpxe /etc/ssl/certs/ca-certificates.crt; do
  [ -e "$f" ] || { echo "local-base.sh: $f missing (apt-get install ipxe ca-certificates)" >&2; exit 1; }
done
tools="/bin/sh /usr/bin/cp /usr/bin/mkdir /usr/bin/chown /usr/bin/chmod /usr/bin/printf /usr/bin/rm /usr/bin/env"
libs=$(ldd $tools 2>/dev/null | grep -o '/[^ ]*\.so[^ ]*' | sort -u)
# The files of Debian's ipxe package only (not ipxe-qemu's, also in
# /usr/lib/ipxe), as the golang:1.26-bookworm builder installs them.
ipxe=$(dpkg -L ipxe | while read -r f; do case $f in /usr/lib/ipxe/*) [ -f "$f" ] && echo "$f";; esac; done)
paths="$tools $libs $ipxe /etc/ssl/certs/ca-certificates.crt"
if [ "${WITH_GO:-0}" = 1 ]; then
  [ -x /usr/local/go/bin/go ] || { echo "local-base.sh: WITH_GO=1 but no /usr/local/go" >&2; exit 1; }
  paths="$paths /usr/local/go"
fi
# -h: store what symlinks (/bin -> usr/bin, libraries) point at, as files.
# shellcheck disable=SC2086
exec tar -C / -ch --owner=0 --group=0 $(echo $paths | sed 's|^/||; s| /| |g')
