# pxeperf's image: a static binary, Debian's iPXE files and a non-root user on
# an empty base (FROM scratch). Only the build stage needs a base image:
#
#   With Docker Hub (the default builder, golang:1.26-bookworm, compiles the
#   binary for each --platform and installs Debian's ipxe package):
#     docker build -t pxeperf .
#     docker buildx build --platform linux/amd64,linux/arm64 -t pxeperf .
#
#   Without Docker Hub (only the Debian mirror and the Go module proxy): the
#   builder is made from the host (contrib/container/local-base.sh: its shell,
#   /usr/lib/ipxe and CA certificates, plus /usr/local/go with WITH_GO=1), and
#   the binary is either built on the host and passed in dist/ (PREBUILT=dist:
#   dist/pxeperf-linux-$TARGETARCH) or compiled in the builder (WITH_GO=1, no
#   PREBUILT). CI and the README's "In a container" run exactly:
#     CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -o dist/pxeperf-linux-amd64 ./cmd/pxeperf
#     contrib/container/local-base.sh | podman import - localhost/pxeperf-builder
#     podman build --format docker --build-arg BUILDER=localhost/pxeperf-builder \
#       --build-arg PREBUILT=dist -t pxeperf .
#   (--format docker: the OCI format has no HEALTHCHECK.)
#
# Either way the final stage is the same: /usr/local/bin/pxeperf, /usr/lib/ipxe,
# /etc/ssl/certs/ca-certificates.crt, /etc/passwd with pxeperf (10001), the
# volumes /images and /data owned by it.
#
# Run it with the host's network (DHCP is broadcast) and the three
# capabilities serve needs: NET_BIND_SERVICE (ports 67, 69, 80), NET_RAW
# (SO_BINDTODEVICE of the DHCP socket), NET_ADMIN (the neighbour entry that
# lets a DHCP answer reach a client without an address yet, socket buffers):
#   podman run -d --name pxeperf --network host --cap-add NET_BIND_SERVICE \
#     --cap-add NET_RAW --cap-add NET_ADMIN -v /srv/pxeperf/images:/images \
#     -v /var/lib/pxeperf:/data pxeperf serve --iface eth0
# (the label io.github.pxeperf.capabilities lists them; contrib/'s compose.yaml
# and kubernetes/daemonset.yaml add exactly these, checked by container/'s test).
# See README.md "In a container" for Docker and Kubernetes.
ARG BUILDER=docker.io/library/golang:1.26-bookworm

FROM --platform=$BUILDPLATFORM ${BUILDER} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# PREBUILT: a folder of the build context holding pxeperf-$TARGETOS-$TARGETARCH
# (static, CGO_ENABLED=0); empty: compile here with the builder's go.
ARG PREBUILT=
ARG VERSION=
WORKDIR /src
COPY . .
RUN if [ -n "$PREBUILT" ]; then cp "$PREBUILT/pxeperf-$TARGETOS-$TARGETARCH" /pxeperf; \
    else CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w${VERSION:+ -X main.version=$VERSION}" -o /pxeperf ./cmd/pxeperf; fi
# The final stage's tree in /out: the binary, Debian's ipxe files (installed
# here unless the builder has them), CA certificates, the users, the volumes.
RUN set -e; \
    mkdir -p /out/usr/local/bin /out/usr/lib/ipxe /out/etc/ssl/certs /out/images /out/data /out/tmp; \
    cp /pxeperf /out/usr/local/bin/pxeperf; \
    if [ ! -e /usr/lib/ipxe/undionly.kpxe ] || [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update && apt-get install -y --no-install-recommends ipxe ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi; \
    cp -r /usr/lib/ipxe/. /out/usr/lib/ipxe/; \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/; \
    echo 'root:x:0:0:root:/:/sbin/nologin' > /out/etc/passwd; \
    echo 'pxeperf:x:10001:10001:pxeperf:/data:/sbin/nologin' >> /out/etc/passwd; \
    printf 'root:x:0:\npxeperf:x:10001:\n' > /out/etc/group; \
    chown 10001:10001 /out/images /out/data; chmod 1777 /out/tmp

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/pxeperf/pxeperf
LABEL org.opencontainers.image.title="pxeperf" \
      org.opencontainers.image.description="Network-boot server (DHCP/proxyDHCP, TFTP, HTTP) that measures every fetch" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      io.github.pxeperf.capabilities="NET_BIND_SERVICE NET_RAW NET_ADMIN"
COPY --from=build /out/ /
# The served root and the state (leases, records, cache) outlive the container.
VOLUME ["/images", "/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 67/udp 69/udp 80/tcp 4011/udp
# /healthz of the running serve (HTTP on :80 unless the config moves it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/pxeperf", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pxeperf"]
CMD ["serve", "--root", "/images", "--data", "/data"]
