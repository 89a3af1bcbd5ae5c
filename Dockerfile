# pxeperf in a container: run it with the host's network (DHCP is broadcast):
#   docker build -t pxeperf .
#   docker run -d --name pxeperf --network host --cap-add NET_ADMIN --cap-add NET_RAW \
#     --cap-add NET_BIND_SERVICE -v /srv/pxeperf/images:/images -v /var/lib/pxeperf:/data \
#     pxeperf serve --root /images --data /data --iface eth0
#   docker exec pxeperf pxeperf report --data /data
# A config file mounted at /etc/pxeperf/pxeperf.yaml is read by every command.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /pxeperf ./cmd/pxeperf

FROM debian:bookworm-slim
# Debian's iPXE binaries (undionly.kpxe, ipxe.efi, snponly.efi) are served
# where the image root lacks them.
RUN apt-get update && apt-get install -y --no-install-recommends ipxe && rm -rf /var/lib/apt/lists/*
COPY --from=build /pxeperf /usr/local/bin/pxeperf
# The served root and the state (leases, records, cache) outlive the container.
RUN mkdir -p /images /data
VOLUME ["/images", "/data"]
WORKDIR /data
EXPOSE 67/udp 69/udp 80/tcp 4011/udp
# /healthz of the running serve (HTTP on :80 unless the config moves it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/pxeperf", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pxeperf"]
CMD ["serve", "--root", "/images", "--data", "/data"]
