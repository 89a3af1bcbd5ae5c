# pxeperf in a container: run it with the host's network (DHCP is broadcast):
#   docker build -t pxeperf .
#   docker run --rm --network host --cap-add NET_ADMIN --cap-add NET_RAW \
#     --cap-add NET_BIND_SERVICE -v /srv/images:/images -v /var/lib/pxeperf:/data \
#     pxeperf serve --root /images --data /data --iface eth0
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
WORKDIR /var/lib/pxeperf
ENTRYPOINT ["/usr/local/bin/pxeperf"]
CMD ["serve"]
