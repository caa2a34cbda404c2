#!/bin/sh
# Measures the full-day target of docs/scale.md on one core: ITCH decoding,
# order books, depth 10 and normalization of a generated day with a million
# live orders over 8,000 stocks (BenchmarkNormalizeScale), beside the other
# normalization benchmarks of feed/itch in the same rounds. The test binary
# runs with GOMAXPROCS=1, pinned to one CPU with taskset where there is one.
# Prints each benchmark's runs (ns per ITCH message), median and rate, the
# full size's median against BenchmarkNormalize's, and whether the median
# reached 10 million ITCH messages/s. Exits 1 if a benchmark failed, was
# missing or allocated; a rate short of the target is reported, not failed
# (the rate depends on the host's load).
#
# Usage: scripts/scale.sh [ROUNDS [MESSAGES]]
#   ROUNDS    rounds of all five benchmarks (default 5)
#   MESSAGES  normalized messages per benchmark run (default 8000000)
#   SCALE_CPU the CPU to pin to (default: the last one)
# About 5 s a round at the defaults here. `scripts/scale.sh 1 1000000`
# is a smoke test of a few seconds.
set -eu
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^$/p' "$0" | sed -n '/^#/s/^# \{0,1\}//p' >&2; }
case "${1:-}" in -h | --help | help) usage; exit 0 ;; esac
rounds=${1:-5}
count=${2:-8000000}
for v in "$rounds" "$count"; do
	case "$v" in
	'' | *[!0-9]* | 0*)
		echo "scale.sh: ROUNDS and MESSAGES must be positive whole numbers, got '$v'" >&2
		usage
		exit 2
		;;
	esac
done
[ $# -le 2 ] || { echo "scale.sh: at most two arguments, got $#" >&2; usage; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/itch.test" ./feed/itch

cpu=${SCALE_CPU:-$(($(nproc) - 1))}
pin=""
if command -v taskset >/dev/null 2>&1; then
	pin="taskset -c $cpu"
	echo "one core: GOMAXPROCS=1, pinned to CPU $cpu; $rounds round(s) of $count messages"
else
	echo "one core: GOMAXPROCS=1, not pinned (taskset not found); $rounds round(s) of $count messages"
fi

i=1
while [ "$i" -le "$rounds" ]; do
	# Run in the package's directory, as go test does.
	if ! (cd feed/itch && GOMAXPROCS=1 $pin "$tmp/itch.test" -test.run '^$' \
		-test.bench 'Normalize(Depth|Scale|ScaleTable2M|ScaleSmall)?$' \
		-test.benchtime "${count}x" -test.benchmem) >"$tmp/round" 2>&1; then
		cat "$tmp/round" >&2
		echo "scale.sh: round $i failed" >&2
		exit 1
	fi
	grep '^Benchmark' "$tmp/round" >>"$tmp/all" || true
	i=$((i + 1))
done

awk -v rounds="$rounds" '
function median(name,    n, i, j, v, a) {
	n = split(runs[name], a, " ")
	for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > v + 0; j--) a[j + 1] = a[j]; a[j + 1] = v }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	name = $1; sub(/-[0-9]+$/, "", name)
	ns = ""; allocs = ""
	for (i = 2; i <= NF; i++) {
		if ($i == "itch_ns/msg") ns = $(i - 1)
		if ($i == "allocs/op") allocs = $(i - 1)
	}
	if (ns == "" || allocs == "") { print "scale.sh: cannot read: " $0 > "/dev/stderr"; bad = 1; next }
	runs[name] = runs[name] " " ns; count[name]++
	if (allocs + 0 > 0) { print "scale.sh: " name " allocated " allocs " times an op" > "/dev/stderr"; bad = 1 }
}
END {
	split("BenchmarkNormalize BenchmarkNormalizeDepth BenchmarkNormalizeScale BenchmarkNormalizeScaleTable2M BenchmarkNormalizeScaleSmall", names, " ")
	printf "%-32s %-8s %-8s %s\n", "benchmark", "median", "M/s", "ns per ITCH message, each round"
	for (k = 1; k <= 5; k++) {
		n = names[k]
		if (count[n] != rounds) { print "scale.sh: " n ": " count[n] + 0 " runs of " rounds > "/dev/stderr"; bad = 1; continue }
		med[n] = median(n)
		printf "%-32s %-8.1f %-8.2f%s\n", n, med[n], 1000 / med[n], runs[n]
	}
	if (bad) exit 1
	full = med["BenchmarkNormalizeScale"]
	printf "full size (a million live orders, 8,000 stocks, depth 10): %.2f M ITCH messages/s, %.2f times BenchmarkNormalize'"'"'s time; 0 allocs/op\n", 1000 / full, full / med["BenchmarkNormalize"]
	if (full <= 100) print "target (10 M/s on one core): met by the median"
	else print "target (10 M/s on one core): not met by the median in this run"
}' "$tmp/all"
