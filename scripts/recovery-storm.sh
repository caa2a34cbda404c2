#!/bin/bash
# Shared-loss recovery benchmark (docs/recovery.md, "Recovery without storms"):
# SUBS subscribers join the feed before its first packet and lose the same
# datagrams (the same --inject-loss and --inject-seed: the injector's choice
# for the k-th datagram depends on the seed and k only), so every loss is seen
# by all of them and each asks recovery for the same ranges. The feed handler
# publishes COUNT messages at RATE msg/s on 4 channels and lingers 3 s. NATS
# runs as a server process of its own (nats-server, built from the module's
# dependency), started first, so that every subscriber is connected before the
# first packet (a feed handler's embedded server would start with the feed).
#
# Prints one JSON object: the CPU time (user + system seconds) of the feed
# handler and of the NATS server (whose share is the fan-out of replies and
# repairs, a repair reaching every subscriber), the retransmit requests it
# received against the answers it sent (inline replies and repairs) and the
# requests it suppressed, and over the subscribers: missing (sum and max),
# injected drops (min and max, equal when every subscriber lost the same
# datagrams), recovery latency p99 (max and median of the subscribers' own
# p99) and max. Raw outputs stay in the printed directory.
#
# Usage: scripts/recovery-storm.sh [--bin DIR] [--subs N] [--rate R] [--count C] [--loss P] [--seed S] [--sub-args ARGS]
#   --bin DIR        use DIR/feedhandler and DIR/subscriber (default: build this tree)
#   --sub-args ARGS  more settings for every subscriber, split at spaces: for
#                    example "--recovery-inline" (the protocol before repairs)
#                    or "--recovery-backoff=-1" (repairs without back-off)
# Not part of the test run: 20 subscriber processes want the machine's cores
# for the few seconds of the run.
set -euo pipefail
export FH_OUT FH_LOG FH_TIME
cd "$(dirname "$0")/.."

BIN="" SUBS=20 RATE=20000 COUNT=60000 LOSS=0.01 SEED=5 SUBARGS=""
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN=$2 ;;
	--subs) SUBS=$2 ;;
	--rate) RATE=$2 ;;
	--count) COUNT=$2 ;;
	--loss) LOSS=$2 ;;
	--seed) SEED=$2 ;;
	--sub-args) SUBARGS=$2 ;;
	*) echo "usage: $0 [--bin DIR] [--subs N] [--rate R] [--count C] [--loss P] [--seed S] [--sub-args ARGS]" >&2; exit 2 ;;
	esac
	shift 2
done

OUT=$(mktemp -d /tmp/recovery-storm.XXXXXX)
FH_OUT=$OUT/fh.json FH_LOG=$OUT/fh.log FH_TIME=$OUT/fh.time
if [ -z "$BIN" ]; then
	BIN=$OUT/bin
	go build -o "$BIN/" ./cmd/feedhandler ./cmd/subscriber
fi
go build -o "$OUT/nats-server" github.com/nats-io/nats-server/v2

# A group and a NATS port of this run's own, so that other runs on the host
# do not interfere.
GROUP=239.77.$((100 + RANDOM % 100)).$((1 + RANDOM % 200)):$((32000 + RANDOM % 20000))
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

pids=()
NATS_PID=""
cleanup() {
	for p in "${pids[@]}" $NATS_PID; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

"$OUT/nats-server" -a 127.0.0.1 -p "$PORT" >"$OUT/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 1 100); do
	(echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
	sleep 0.1
done

for i in $(seq 1 "$SUBS"); do
	"$BIN/subscriber" --group "$GROUP" --nats-url "nats://127.0.0.1:$PORT" --verify --expect "$COUNT" \
		--inject-loss "$LOSS" --inject-seed "$SEED" --metrics-addr "" --log-format json --idle-timeout 30s $SUBARGS \
		>"$OUT/sub$i.json" 2>"$OUT/sub$i.log" &
	pids+=($!)
done
for i in $(seq 1 "$SUBS"); do
	for _ in $(seq 1 300); do
		grep -q '"subscribed"' "$OUT/sub$i.log" && break
		sleep 0.1
	done
	grep -q '"subscribed"' "$OUT/sub$i.log" || { echo "subscriber $i did not subscribe: $OUT/sub$i.log" >&2; exit 1; }
done

# The feed handler runs in a shell of its own, whose only child it is, so
# that the shell's "times" is its CPU time alone (this shell's children
# include the subscribers).
start=$(date +%s.%N)
bash -c '"$@" >"$FH_OUT" 2>"$FH_LOG"; times >"$FH_TIME"' _ \
	"$BIN/feedhandler" --group "$GROUP" --nats-url "nats://127.0.0.1:$PORT" --count "$COUNT" --rate "$RATE" \
	--pace-spin 1us --linger 3s --metrics-addr "" --log-format json
real=$(echo "$(date +%s.%N) - $start" | bc)
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()
# The NATS server's CPU time, from /proc (clock ticks), before it stops.
read -r nats_user nats_sys < <(awk -v t="$(getconf CLK_TCK)" '{ print $14 / t, $15 / t }' "/proc/$NATS_PID/stat")
kill "$NATS_PID"
wait "$NATS_PID" 2>/dev/null || true
NATS_PID=""

# "times" prints the shell's own, then its children's user and system
# time, in minutes and seconds: 0m1.234s 0m0.567s.
read -r user sys < <(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); printf "%s ", a[1] * 60 + a[2] } print "" }' "$OUT/fh.time")
tail -n 1 "$OUT/fh.json" >"$OUT/fh.summary.json"
cat "$OUT"/sub*.json | grep '^{' | jq -s --slurpfile fh "$OUT/fh.summary.json" \
	--arg out "$OUT" --arg subargs "$SUBARGS" --argjson subs "$SUBS" --argjson rate "$RATE" --argjson count "$COUNT" --argjson loss "$LOSS" \
	--argjson real "$real" --argjson user "$user" --argjson sys "$sys" --argjson nuser "$nats_user" --argjson nsys "$nats_sys" '
	def median: sort | .[(length / 2 | floor)];
	($fh[0]) as $f |
	{
		subscribers: length, sub_args: $subargs, rate: $rate, count: $count, loss: $loss, outdir: $out,
		fh_wall_s: $real, fh_cpu_user_s: $user, fh_cpu_sys_s: $sys, fh_cpu_s: ($user + $sys),
		nats_cpu_s: ($nuser + $nsys), server_cpu_s: ($user + $sys + $nuser + $nsys),
		requests_received: $f.retransmit_requests,
		answers_sent: ($f.retransmit_answers // ($f.retransmit_requests - ([$f.recovery_rejected[]?] | add // 0))),
		requests_suppressed: ($f.requests_suppressed // 0),
		repairs: ($f.repairs // 0),
		retransmitted_messages: $f.retransmitted,
		missing_sum: (map(.missing) | add), missing_max: (map(.missing) | max),
		ok_all: (map(.ok) | all),
		dropped_datagrams_min: (map(.injected_dropped_datagrams) | min), dropped_datagrams_max: (map(.injected_dropped_datagrams) | max),
		gaps_min: (map(.gaps) | min), gaps_max: (map(.gaps) | max),
		recovered_sum: (map(.recovered) | add),
		heard_sum: (map(.recovery_heard // 0) | add), backed_off_sum: (map(.recovery_backed_off // 0) | add),
		recovery_p99_us_max: (map(.recovery_p99_us // null) | if any(. == null) then null else max end),
		recovery_p99_us_median: (map(.recovery_p99_us // null) | if any(. == null) then null else median end),
		recovery_mean_us_median: (map(.recovery_mean_us) | median),
		recovery_max_us_max: (map(.recovery_max_us) | max)
	}'
