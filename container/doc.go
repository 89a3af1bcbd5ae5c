// Package container holds the tests of pxeperf's container image (the
// repository's Dockerfile) and of the deployment examples in contrib/
// (compose.yaml, kubernetes/daemonset.yaml): the image is built with podman
// from host-made parts, run with the host's network inside a test namespace,
// and real clients boot from it (udhcpc + tftp-hpa + curl, a QEMU SeaBIOS
// guest with its iPXE ROM). It has no code of its own.
package container
