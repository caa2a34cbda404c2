#!/bin/bash
# stages.sh - where a message's time goes: runs the feed handler and one
# subscriber as separate processes (4 channels, loopback multicast, recovery
# off) at 10k and 100k msg/s for 3 s each, under `perf stat`, in several
# configurations interleaved over ROUNDS rounds, and prints per configuration
# and rate the medians of the subscriber's latency, its stage split
# (stage_* keys), the Go scheduler's latency, context switches per packet and
# CPU per message of both processes. docs/bench.md ("Where the time goes")
# shows a run.
#
#   scripts/stages.sh [ROUNDS] [BASELINE_REV]
#
# BASELINE_REV (default: none) adds the configurations "before" (the
# revision's feed handler and subscriber) and "before-split" (its feed
# handler, this tree's subscriber in blocking mode). Needs perf (Debian
# package linux-perf) and python3. Nothing leaves the host: groups
# 239.77.x.1, interface 127.0.0.1, TTL 0; every run is bounded by its count.
set -eu
ROUNDS=${1:-3}
BASE=${2:-}
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "stages.sh: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/new" "$W/base"
go build -o "$W/new/" ./cmd/feedhandler ./cmd/subscriber
CFGS="newfh-blocking:new:new:blocking after-direct:new:new:direct after-direct-spin:new:new:direct-spin"
if [ -n "$BASE" ]; then
	mkdir -p "$W/src"
	git archive "$BASE" | tar -x -C "$W/src"
	(cd "$W/src" && go build -o "$W/base/" ./cmd/feedhandler ./cmd/subscriber)
	CFGS="before:base:base:blocking before-split:base:new:blocking $CFGS"
fi
OUT=$W/runs.jsonl
port=42000
for round in $(seq 1 "$ROUNDS"); do
	for rate in 10000 100000; do
		for cfg in $CFGS; do
			IFS=: read -r name fh sub mode <<<"$cfg"
			port=$((port + 1))
			g="239.77.$((RANDOM % 200)).1:$port"
			count=$((rate * 3))
			perf stat -x, -e task-clock,context-switches -o "$W/sub.perf" timeout 60 "$W/$sub/subscriber" --group "$g" \
				--mode "$mode" --expect $count --recovery=false --metrics-addr "" --log-format json --cpu -1 \
				>"$W/sub.json" 2>"$W/sub.log" &
			sp=$!
			for _ in $(seq 50); do grep -q subscribed "$W/sub.log" && break; sleep 0.1; done
			perf stat -x, -e task-clock,context-switches -o "$W/fh.perf" timeout 60 "$W/$fh/feedhandler" --group "$g" \
				--count $count --rate $rate --linger 0s --nats-listen 127.0.0.1:0 --metrics-addr "" --log-format json \
				>"$W/fh.json" 2>"$W/fh.log"
			wait $sp || true
			python3 - "$name" "$rate" "$round" "$W" >>"$OUT" <<'PY'
import json, sys
name, rate, rnd, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = json.load(open(w + '/sub.json')); f = json.load(open(w + '/fh.json'))
def perf(p):
    d = {}
    for l in open(p):
        x = l.strip().split(',')
        if len(x) > 3 and x[0] not in ('', '<not counted>'):
            d[x[2]] = float(x[0])
    return d
sp, fp = perf(w + '/sub.perf'), perf(w + '/fh.perf')
n = max(1, s['received'])
print(json.dumps(dict(name=name, rate=rate, round=rnd, missing=s.get('missing'),
    p50=s['latency_p50_us'], p99=s['latency_p99_us'],
    fh=s.get('stage_tick_to_send_p50_us'), wire=s.get('stage_send_to_receive_p50_us'),
    release=s.get('stage_receive_to_release_p50_us'), sched=s.get('sched_latency_p50_us'),
    sub_switches_per_pkt=sp.get('context-switches', 0) / max(1, s['packets']),
    sub_cpu_us_msg=sp.get('task-clock', 0) * 1e3 / n,
    fh_cpu_us_msg=fp.get('task-clock', 0) * 1e3 / max(1, f['messages']),
    msgs_per_pkt=f['messages'] / max(1, f['packets']))))
PY
		done
	done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = ['p50', 'p99', 'fh', 'wire', 'release', 'sched', 'sub_switches_per_pkt', 'sub_cpu_us_msg', 'fh_cpu_us_msg', 'msgs_per_pkt']
g = defaultdict(list)
for r in rows:
    g[(r['rate'], r['name'])].append(r)
print('%-7s %-18s ' % ('rate', 'configuration') + ' '.join('%9s' % k[:9] for k in keys) + '  missing')
for (rate, name), rs in sorted(g.items()):
    vals = []
    for k in keys:
        v = [r[k] for r in rs if r.get(k) is not None]
        vals.append('%9.3g' % statistics.median(v) if v else '%9s' % '-')
    print('%-7d %-18s ' % (rate, name) + ' '.join(vals) + '  %d' % sum(r['missing'] or 0 for r in rs))
PY
