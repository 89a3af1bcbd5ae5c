#!/bin/sh
# Fetches what e2e/linux_linux_test.go boots, without installing anything:
# Debian's current amd64 kernel (the package linux-image-amd64 points at) and
# busybox-static, unpacked with dpkg -x into $PXEPERF_E2E_KERNEL_DIR
# (default /tmp/pxeperf-e2e-kernel). Runs again in a second when it is there.
set -eu
dir=${PXEPERF_E2E_KERNEL_DIR:-/tmp/pxeperf-e2e-kernel}
if ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1 && [ -x "$dir/bin/busybox" ]; then
	exit 0
fi
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
if [ -z "$pkg" ]; then
	echo "linux_setup.sh: apt-cache knows no linux-image-amd64 (run apt-get update)" >&2
	exit 1
fi
mkdir -p "$dir"
cd "$dir"
apt-get download "$pkg" busybox-static
for deb in ./*.deb; do
	dpkg -x "$deb" .
done
rm -f ./*.deb
echo "linux_setup.sh: $pkg and busybox-static unpacked in $dir"
