# NATS for deploy/engine_test.go, where the nats image cannot be pulled:
# nats-server built on the host from the module tickcast already uses
# (CGO_ENABLED=0 go build github.com/nats-io/nats-server/v2), in a scratch
# image, as the official image is.
FROM scratch
COPY nats-server /nats-server
ENTRYPOINT ["/nats-server"]
