#!/bin/busybox sh
# guest-twohost.sh is the two-host run of the Soft-RoCE test VM: /init
# (guest-init.sh) runs it instead of its own tests when the kernel command
# line says
#
#   tchost=ROLE,ADDR_A,ADDR_B    this guest's role (a or b) and both addresses
#   tc2h=COUNT,RATE,MAX_DELAY,LOSS
#   tctimeout=SECONDSs           the guest's time limit
#
# Two guests of the same kernel and initramfs, each with one e1000 NIC
# (eth0); qemu joins the two NICs with -netdev socket over the host's
# 127.0.0.1, nothing else. Each guest puts its address on eth0 and rxe0 on
# eth0. Host A runs the feed handler (--transport rdma, COUNT synthetic
# messages at RATE per second, its embedded NATS server on ADDR_A); host B
# runs two subscribers (--transport rdma --verify --expect COUNT, recovery
# over NATS from ADDR_A), the second with --inject-loss LOSS.
#
# Barrier: the feed handler must not publish before both subscribers have
# joined. A listens on tcp/$BARRIER (on eth0) with a time limit; B, once
# both subscribers logged "subscribed", connects and sends "ready", retrying
# while A does not listen yet. Every wait is bounded, and a guest that gives
# up says why (@error) and powers off.
#
# Report on /dev/ttyS1, as guest-init.sh's (cmd/vmtest parses both):
#
#   @counters start|end SENT RCVD    rxe0 hw_counters sent_pkts, rcvd_pkts
#   @netdev start|end RX RXDROP RXMISSED TX TXDROP BACKLOGDROP
#                                    eth0's packet counts and the input
#                                    backlog's drops (softnet_stat)
#   @e2e NAME RC, @summary NAME JSON, @log NAME LINE
#                                    NAME: feedhandler on A; sub1, sub2 on B
#   @e2etime START END BUDGET        A: guest uptime (s) when the feed
#                                    handler started and ended, its budget
#   @barrier UPTIME                  when A heard B's "ready" (B: sent it)
#   @error TEXT                      a step failed
#
# /init writes @done and powers off when this script returns.
IP=/usr/sbin/ip
OUT=/dev/ttyS1
say() { echo "$*" > $OUT; }
up() { cut -d' ' -f1 /proc/uptime; }
BARRIER=7000   # tcp port on A's eth0
NATS_PORT=4222 # the feed handler's embedded NATS server on A's eth0

oldifs=$IFS
IFS=,
set -- $(sed -n 's/.*tchost=\([^ ]*\).*/\1/p' /proc/cmdline)
ROLE=$1 ADDR_A=$2 ADDR_B=$3
set -- $(sed -n 's/.*tc2h=\([^ ]*\).*/\1/p' /proc/cmdline)
IFS=$oldifs
COUNT=$1 RATE=$2 MAXDELAY=$3 LOSS=$4
LIMIT=$(sed -n 's/.*tctimeout=\([0-9]*\)s.*/\1/p' /proc/cmdline)
[ "${LIMIT:-0}" -ge 60 ] 2>/dev/null || LIMIT=60
case "$ROLE" in
a) ME=$ADDR_A ;;
b) ME=$ADDR_B ;;
*)
	say "@error tchost= names no role a or b"
	exit 0
	;;
esac
if [ -z "$ADDR_A" ] || [ -z "$ADDR_B" ] || [ -z "$COUNT" ] || [ -z "$RATE" ] || [ -z "$MAXDELAY" ] || [ -z "$LOSS" ]; then
	say "@error tchost= or tc2h= incomplete: $(cat /proc/cmdline)"
	exit 0
fi
echo "guest $ROLE: two hosts, $ME on eth0 at $(up)s"

$IP link set lo up
if ! $IP link show eth0 >/dev/null 2>&1; then
	say "@error no eth0 (e1000 module or qemu NIC missing)"
	exit 0
fi
$IP addr add $ME/24 dev eth0
$IP link set eth0 up
if ! rdma link add rxe0 type rxe netdev eth0; then
	say "@error rdma link add rxe0 type rxe netdev eth0 failed"
	exit 0
fi
# The e1000's carrier takes a second or more: rxe0's port is DOWN until then.
PORT=/sys/class/infiniband/rxe0/ports/1
i=0
until grep -q ACTIVE $PORT/state 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ]; then
		say "@error rxe0 port not ACTIVE after 20s: $(cat $PORT/state)"
		exit 0
	fi
	sleep 0.1
done
echo "guest $ROLE: rxe0 $(cat $PORT/state) at $(up)s"
counters() {
	say "@counters $1 $(cat $PORT/hw_counters/sent_pkts) $(cat $PORT/hw_counters/rcvd_pkts)"
	# eth0's packets and drops (sysfs statistics: rx_dropped counts the
	# stack's drops, rx_missed_errors the NIC's, when its receive ring was
	# full) and the input backlog's drops (/proc/net/softnet_stat, second
	# column, hex): where packets that rxe0 did not count were lost.
	st=/sys/class/net/eth0/statistics
	sn=0
	while read -r _ dropped _; do sn=$((sn + 0x$dropped)); done < /proc/net/softnet_stat
	say "@netdev $1 $(cat $st/rx_packets $st/rx_dropped $st/rx_missed_errors $st/tx_packets $st/tx_dropped | tr '\n' ' ')$sn"
}
counters start

# diagnostics: on the console, what says where packets went.
diagnostics() {
	for f in /sys/class/net/eth0/statistics/*; do echo "eth0 $(basename $f) $(cat $f)"; done | grep -v ' 0$'
	for f in $PORT/hw_counters/*; do echo "rxe0 $(basename $f) $(cat $f)"; done
	cat /proc/net/snmp /proc/net/softnet_stat
	dmesg | tail -n 20
}

# report NAME RC: NAME's exit status, summary (stdout) and, when it failed,
# the tail of its log.
report() {
	say "@e2e $1 $2"
	while read -r l; do say "@summary $1 $l"; done < /tmp/$1.out
	if [ "$2" != 0 ]; then
		tail -n 40 /tmp/$1.log | while read -r l; do say "@log $1 $l"; done
	fi
}

if [ "$ROLE" = a ]; then
	# Wait for B's subscribers (B boots alongside, joins and says so).
	WAIT=$((LIMIT / 2))
	echo "guest a: waiting for host b on tcp/$BARRIER (at most ${WAIT}s) at $(up)s"
	timeout $WAIT nc -l -p $BARRIER > /tmp/barrier 2>&1
	if ! grep -q '^ready' /tmp/barrier; then
		say "@error host b did not say ready on tcp/$BARRIER within ${WAIT}s (got: $(head -c 200 /tmp/barrier))"
		exit 0
	fi
	say "@barrier $(up)"
	T0=$(cut -d. -f1 /proc/uptime)
	BUDGET=$((LIMIT - T0 - 25))
	[ $BUDGET -ge 30 ] || BUDGET=30
	echo "guest a: feed handler, $COUNT messages at $RATE/s, budget ${BUDGET}s, at $(up)s"
	timeout -s TERM -k 10 $BUDGET /tests/feedhandler --transport rdma --iface $ME --count "$COUNT" --rate "$RATE" \
		--max-delay "$MAXDELAY" --nats-listen $ME:$NATS_PORT --log-format json --metrics-addr "" --linger 5s \
		> /tmp/feedhandler.out 2> /tmp/feedhandler.log
	rc=$?
	T1=$(cut -d. -f1 /proc/uptime)
	echo "guest a: feed handler exited $rc at $(up)s"
	say "@e2etime $T0 $T1 $BUDGET"
	report feedhandler $rc
	counters end
	diagnostics
	exit 0
fi

# ---- host b: the wire to A first (ARP over the socket network), then the
# subscribers, then the barrier.
i=0
until ping -c1 -W1 $ADDR_A >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 60 ]; then
		say "@error no ping answer from host a ($ADDR_A) over eth0 in 60 tries"
		exit 0
	fi
	sleep 0.2
done
echo "guest b: ping $ADDR_A ok at $(up)s"
T0=$(cut -d. -f1 /proc/uptime)
BUDGET=$((LIMIT - T0 - 25))
[ $BUDGET -ge 30 ] || BUDGET=30
# The subscribers' NATS client keeps retrying until A's feed handler (and
# its embedded server) is up; they wait for the feed longer than the
# default idle timeout. $! is timeout's pid, which passes a kill on.
SUB="timeout -s TERM -k 10 $BUDGET /tests/subscriber --transport rdma --iface $ME --verify --expect $COUNT
	--nats-url nats://$ADDR_A:$NATS_PORT --idle-timeout 30s --log-format json --metrics-addr="
$SUB > /tmp/sub1.out 2> /tmp/sub1.log &
pid_sub1=$!
$SUB --inject-loss "$LOSS" > /tmp/sub2.out 2> /tmp/sub2.log &
pid_sub2=$!
# finish_subs: wait for both subscribers and report them.
finish_subs() {
	wait $pid_sub1
	rc_sub1=$?
	wait $pid_sub2
	rc_sub2=$?
	echo "guest b: subscribers exited $rc_sub1 $rc_sub2 at $(up)s"
	report sub1 $rc_sub1
	report sub2 $rc_sub2
	counters end
	diagnostics
}
# give_up TEXT: the run cannot go on; stop the subscribers and say why.
give_up() {
	say "@error $*"
	kill $pid_sub1 $pid_sub2 2>/dev/null
	finish_subs
	exit 0
}
i=0
while ! { grep -q '"message":"subscribed"' /tmp/sub1.log && grep -q '"message":"subscribed"' /tmp/sub2.log; }; do
	i=$((i + 1))
	if [ $i -gt 600 ]; then
		give_up "the subscribers did not log \"subscribed\" within 60s"
	fi
	sleep 0.1
done
echo "guest b: subscribers joined at $(up)s"
i=0
until echo ready | timeout 5 nc $ADDR_A $BARRIER 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 120 ]; then
		give_up "host a did not take \"ready\" on tcp/$BARRIER in 120 tries"
	fi
	sleep 0.5
done
say "@barrier $(up)"
echo "guest b: told host a ready at $(up)s"
finish_subs
