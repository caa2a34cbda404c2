#!/bin/sh
# Measures the full-day target of docs/scale.md on one core: ITCH decoding,
# order books, depth 10 and normalization of a generated day with a million
# live orders over 8,000 stocks (BenchmarkNormalizeScale), beside the other
# normalization benchmarks of feed/itch in the same rounds. The test binary
# runs with GOMAXPROCS=1, pinned to one CPU with taskset where there is one.
# Prints each benchmark's runs (ns per ITCH message), median and rate, the
# full size's median against BenchmarkNormalize's, and whether the full
# size's median reached 10 million ITCH messages/s.
#
# Usage: scripts/scale.sh [ROUNDS [MESSAGES]]
#   ROUNDS    rounds of all five benchmarks (default 5)
#   MESSAGES  normalized messages per benchmark run (default 8000000, at
#             least 100000: in shorter runs the one-off allocations of the
#             start show as allocations per message)
# Environment: SCALE_CPU, the CPU to pin to (default: the last one this
# process may run on).
# Exits 2 on bad arguments or a CPU that cannot be used, 1 if a benchmark
# failed, was missing or allocated (allocs/op, the average rounded down:
# feed/itch's TestNormalizeScaleAllocs counts every allocation). A rate
# short of the target is reported, not failed: it moves with the host's load.
# About 5 s a round at the defaults here; `scripts/scale.sh 1 1000000` is a
# smoke test of a few seconds.
set -eu
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; }
fail() {
	echo "scale.sh: $*" >&2
	usage >&2
	exit 2
}
case "${1:-}" in -h | --help | help) usage; exit 0 ;; esac
[ $# -le 2 ] || fail "at most two arguments (ROUNDS and MESSAGES), got $#"
rounds=${1-5}
count=${2-8000000}
for v in "$rounds" "$count"; do
	case "$v" in
	'' | *[!0-9]* | 0* | ??????????*)
		fail "ROUNDS and MESSAGES must be positive whole numbers of at most 9 digits, without leading zeros: got '$v'"
		;;
	esac
done
[ "$count" -ge 100000 ] || fail "MESSAGES must be at least 100000, got $count"

# One CPU: SCALE_CPU, or the last this process may run on.
pinned=""
if command -v taskset >/dev/null 2>&1; then
	if [ -n "${SCALE_CPU:-}" ]; then
		case "$SCALE_CPU" in '' | *[!0-9]*) fail "SCALE_CPU must be one CPU number, got '$SCALE_CPU'" ;; esac
		taskset -c "$SCALE_CPU" true 2>/dev/null || fail "SCALE_CPU=$SCALE_CPU: taskset cannot run a process on that CPU"
		pinned=$SCALE_CPU
	else
		last=$(taskset -pc $$ 2>/dev/null | sed 's/.*[ ,-]//')
		if [ -n "$last" ] && taskset -c "$last" true 2>/dev/null; then
			pinned=$last
		fi
	fi
elif [ -n "${SCALE_CPU:-}" ]; then
	fail "SCALE_CPU is set but taskset is not installed"
fi
if [ -n "$pinned" ]; then
	echo "one core: GOMAXPROCS=1, pinned to CPU $pinned; $rounds round(s) of $count messages"
else
	echo "one core: GOMAXPROCS=1, not pinned (taskset missing or refused); $rounds round(s) of $count messages"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
go test -c -o "$tmp/itch.test" ./feed/itch

run() {
	if [ -n "$pinned" ]; then
		GOMAXPROCS=1 taskset -c "$pinned" "$@"
	else
		GOMAXPROCS=1 "$@"
	fi
}

i=1
while [ "$i" -le "$rounds" ]; do
	# Run in the package's directory, as go test does.
	if ! (cd feed/itch && run "$tmp/itch.test" -test.run '^$' \
		-test.bench '^BenchmarkNormalize(Depth|Scale|ScaleTable2M|ScaleSmall)?$' \
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
	return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
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
	full = med["BenchmarkNormalizeScale"] + 0
	printf "full size (a million live orders, 8,000 stocks, depth 10): %.2f M ITCH messages/s, %.2f times BenchmarkNormalize'"'"'s time; 0 allocs/op\n", 1000 / full, full / med["BenchmarkNormalize"]
	if (full <= 100) print "target (10 M/s on one core): met by the median"
	else print "target (10 M/s on one core): not met by the median in this run"
}' "$tmp/all"
