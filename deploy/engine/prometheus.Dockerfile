# Prometheus for deploy/engine_test.go, where prom/prometheus cannot be
# pulled: Debian's package's binary, which is dynamically linked, with the
# loader and the libraries ldd lists for it (the test copies them into the
# context under their own paths, in rootfs/).
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/bin/prometheus"]
