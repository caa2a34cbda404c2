# tickcast's two programs in one image: /usr/local/bin/feedhandler and
# /usr/local/bin/subscriber (docker-compose.yml runs one of them per service).
#
#   docker build -t tickcast .                                        # scratch, pure Go
#   docker build -t tickcast:rdma --target rdma --build-arg RDMA=true .
#
# The default image is the last stage, runtime: FROM scratch, holding the
# two static programs (CGO disabled), the CA certificates (for NATS over
# TLS) and nothing else, run as user 10001. With no shell in it,
# healthchecks run the programs themselves (--health URL).
#
# The RDMA variant (--target rdma, RDMA=true) builds with -tags rdma (cgo,
# linked against libibverbs and librdmacm) and keeps a Debian base with the
# verbs libraries and providers; it needs a registry to pull that base, and
# the container needs the host's RDMA devices (/dev/infiniband) to use
# --transport rdma. The builder is the bookworm variant of the Go image so
# that a cgo binary links against the same glibc as that runtime.
#
# deploy/compose_test.go checks that the Go version here is go.mod's, and
# that deploy/engine/prebuilt.Dockerfile, which CI uses where the Go image
# cannot be pulled, has this runtime stage.

FROM golang:1.26-bookworm AS build
ARG RDMA=false
RUN if [ "$RDMA" = true ]; then \
		apt-get update \
		&& apt-get install -y --no-install-recommends libibverbs-dev librdmacm-dev \
		&& rm -rf /var/lib/apt/lists/*; \
	fi
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN if [ "$RDMA" = true ]; then cgo=1 tags=rdma; else cgo=0 tags=; fi \
	&& CGO_ENABLED=$cgo go build -trimpath -buildvcs=false -tags "$tags" -ldflags "-s -w" \
		-o /out/ ./cmd/feedhandler ./cmd/subscriber

FROM debian:bookworm-slim AS rdma
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates libibverbs1 librdmacm1 ibverbs-providers \
	&& rm -rf /var/lib/apt/lists/* \
	&& groupadd --system --gid 10001 tickcast \
	&& useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin tickcast
COPY --from=build /out/feedhandler /out/subscriber /usr/local/bin/
USER 10001:10001
EXPOSE 9464 9465
CMD ["feedhandler", "--help"]

FROM scratch AS runtime
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/feedhandler /out/subscriber /usr/local/bin/
USER 10001:10001
# Prometheus metrics and /healthz: feed handler, subscriber.
EXPOSE 9464 9465
CMD ["feedhandler", "--help"]
