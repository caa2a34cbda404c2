# tickcast's two programs in one image: /usr/local/bin/feedhandler and
# /usr/local/bin/subscriber (docker-compose.yml runs one of them per service).
#
#   docker build -t tickcast .                      # pure Go, CGO disabled
#   docker build -t tickcast:rdma --build-arg RDMA=true .
#
# RDMA=true builds with -tags rdma (cgo, linked against libibverbs and
# librdmacm) and installs the verbs libraries and providers in the runtime
# image; the container then needs the host's RDMA devices (/dev/infiniband)
# to use --transport rdma. The builder is the bookworm variant of the Go
# image so that a cgo binary links against the same glibc as the runtime.
# deploy/compose_test.go checks that the Go version here is go.mod's.

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

FROM debian:bookworm-slim
ARG RDMA=false
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates \
	&& if [ "$RDMA" = true ]; then \
		apt-get install -y --no-install-recommends libibverbs1 librdmacm1 ibverbs-providers; \
	fi \
	&& rm -rf /var/lib/apt/lists/* \
	&& groupadd --system --gid 10001 tickcast \
	&& useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin tickcast
COPY --from=build /out/feedhandler /out/subscriber /usr/local/bin/
USER 10001:10001
# Prometheus metrics: feed handler, subscriber (with --metrics-addr 0.0.0.0:PORT).
EXPOSE 9464 9465
CMD ["feedhandler", "--help"]
