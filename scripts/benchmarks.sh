#!/bin/sh
# Regenerates BENCHMARKS.md at the repository root: the full tickbench latency
# run (every peer, tickcast with the embedded and with an external NATS server,
# at 10k, 50k and 100k msg/s with 1 and 4 channels, 5 rounds, the floor's rate
# search, ping-pong with sockperf, fan-out), about 20-25 minutes on 2 cores.
# Plots and .hgrm files go to bench-out/ (not committed).
#
# Usage: scripts/benchmarks.sh [extra tickbench flags]
#   scripts/benchmarks.sh --quick    # a placeholder from the smoke test, under a minute
#   scripts/benchmarks.sh --tail     # the tail preset instead: 30 s runs, about 70 minutes
#   scripts/benchmarks.sh --tail --duration 10s --rounds 3   # a shorter tail run, about 15 minutes
set -eu
cd "$(dirname "$0")/.."
go run ./cmd/tickbench --outdir bench-out --markdown BENCHMARKS.md "$@"
echo "wrote BENCHMARKS.md (plots and histograms in bench-out/)" >&2
