#!/bin/sh
# Regenerates BENCHMARKS.md at the repository root: the full tickbench latency
# run (every peer at 10k, 50k and 100k msg/s with 1 and 4 channels, 5 rounds,
# the floor's rate search, ping-pong with sockperf, fan-out), about 15-20
# minutes on 2 cores. Plots and .hgrm files go to bench-out/ (not committed).
#
# Usage: scripts/benchmarks.sh [extra tickbench flags]
#   scripts/benchmarks.sh --quick    # a placeholder from the smoke test, under a minute
set -eu
cd "$(dirname "$0")/.."
go run ./cmd/tickbench --outdir bench-out --markdown BENCHMARKS.md "$@"
echo "wrote BENCHMARKS.md (plots and histograms in bench-out/)" >&2
