# The runtime stage of ../../Dockerfile, fed programs built on the host
# (CGO_ENABLED=0 go build ./cmd/feedhandler ./cmd/subscriber) and the
# host's CA certificates instead of the Go builder stage's: for machines
# where the Go image cannot be pulled (CI). deploy/engine_test.go builds it
# from a context holding those three files; deploy/compose_test.go checks
# that its lines after FROM are the runtime stage's, sources aside.
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY feedhandler subscriber /usr/local/bin/
USER 10001:10001
# Prometheus metrics and /healthz: feed handler, subscriber.
EXPOSE 9464 9465
CMD ["feedhandler", "--help"]
