#!/bin/busybox sh
# guest-init.sh is /init of the Soft-RoCE test VM (see build-initramfs.sh).
# It loads the RDMA modules, creates a veth pair with the rxe0 Soft-RoCE
# device on veth0, runs every /tests/*.test binary under test2json, then
# (when the host asks) the feed handler and two subscribers end to end, and
# reports on the second serial port (/dev/ttyS1), which the host runner
# (cmd/vmtest) parses. (In the two-host run, tchost= on the kernel command
# line, it runs guest-twohost.sh instead, after loading the modules.)
#
#   @counters before|after|e2e SENT RCVD         rxe0 hw_counters sent_pkts, rcvd_pkts
#   @suite NAME                                  then NAME's go test -json lines
#   @exit NAME RC                                the test binary's exit status
#   @sent NAME N                                 datagrams NAME's tests sent
#   @listdevices NAME RC, @listout NAME LINE    NAME --list-devices (below)
#   @e2e NAME RC, @summary NAME JSON, @log NAME LINE
#                                                the end-to-end run (below)
#   @error TEXT                                  a setup step failed
#   @done
#
# No NIC reaches the VM (qemu -nic none): every packet stays on the veth pair.
/bin/busybox mkdir -p /bb
/bin/busybox --install -s /bb
export PATH=/usr/sbin:/usr/bin:/bb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run

OUT=/dev/ttyS1
stty -F $OUT raw -echo 2>/dev/null
say() { echo "$*" > $OUT; }
finish() { say "@done"; sync; poweroff -f; }
echo "guest: init at $(cut -d' ' -f1 /proc/uptime)s"

for m in $(cat /modules.load); do
	case "$m" in
	# The two-host run's NIC: the largest receive ring (default 256).
	# qemu's e1000 drops a packet (and counts it missed) when it has one
	# queued for a full ring; a larger ring takes the bursts a busy
	# guest leaves queued.
	*/e1000.ko) opts="RxDescriptors=4096" ;;
	*) opts="" ;;
	esac
	insmod "$m" $opts || say "@error insmod $m"
done

# The two-host run (tchost= on the command line) is guest-twohost.sh's.
if grep -q 'tchost=' /proc/cmdline; then
	sh /twohost.sh
	finish
fi

# Debian's busybox runs its own applets before PATH; its ip lacks veth.
IP=/usr/sbin/ip
ADDR=192.0.2.1   # TEST-NET-1: never routed anywhere
$IP link set lo up
$IP link add veth0 type veth peer name veth1
$IP addr add $ADDR/24 dev veth0
$IP link set veth0 up
$IP link set veth1 up
if ! rdma link add rxe0 type rxe netdev veth0; then
	say "@error rdma link add rxe0 type rxe netdev veth0 failed"
	finish
fi
PORT=/sys/class/infiniband/rxe0/ports/1
i=0
until grep -q ACTIVE $PORT/state 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ]; then
		say "@error rxe0 port not ACTIVE: $(cat $PORT/state)"
		finish
	fi
	sleep 0.1
done
rdma link show
echo "guest: rxe0 $(cat $PORT/state) at $(cut -d' ' -f1 /proc/uptime)s"

counters() { say "@counters $1 $(cat $PORT/hw_counters/sent_pkts) $(cat $PORT/hw_counters/rcvd_pkts)"; }
counters before

export TICKCAST_REQUIRE=rdma
export TICKCAST_RDMA_IFACE=$ADDR TICKCAST_RDMA_DEVICE=rxe0 TICKCAST_RDMA_MTU=1024 TICKCAST_RDMA_NETDEV=veth0
TIMEOUT=$(sed -n 's/.*tctimeout=\([0-9a-z]*\).*/\1/p' /proc/cmdline)
RUN=$(sed -n 's/.*tcrun=\([^ ]*\).*/\1/p' /proc/cmdline)   # vmtest -run
for t in /tests/*.test; do
	name=$(basename "$t" .test)
	say "@suite $name"
	TICKCAST_RDMA_SENT_FILE=/tmp/sent.$name \
		/tests/test2json -t -p "$name" "$t" -test.v=test2json -test.count=1 -test.timeout="${TIMEOUT:-240s}" ${RUN:+-test.run="$RUN"} > $OUT 2>&1
	say "@exit $name $?"
	say "@sent $name $(cat /tmp/sent.$name 2>/dev/null || echo -1)"
done
counters after

# ---- --list-devices of both commands, on rxe0 with --iface the veth0
# address (cmd/vmtest checks the lines):
#
#   @listdevices NAME RC         NAME --list-devices exited RC
#   @listout NAME LINE           a line of its output
for n in feedhandler subscriber; do
	if [ -x /tests/$n ]; then
		/tests/$n --list-devices --iface $ADDR > /tmp/list.$n 2>&1
		say "@listdevices $n $?"
		while IFS= read -r l; do say "@listout $n $l"; done < /tmp/list.$n
	fi
done

# ---- end to end: the real feed handler and two verifying subscribers over
# rxe0, recovery over the feed handler's embedded NATS server on 127.0.0.1
# (lo is up, see above). The host asks for it on the kernel command line:
#
#   tce2e=COUNT,RATE,MAX_DELAY,LOSS,DURATION
#
# COUNT messages at RATE per second, or (COUNT 0) as many as the feed
# handler publishes in DURATION; MAX_DELAY is the feed handler's --max-delay
# (under TCG its 50us default sends one message per packet); LOSS is the
# second subscriber's --inject-loss, so that recovery has something to fill
# (the first subscriber takes the feed as it comes).
#
#   @e2e NAME RC                 NAME (sub1, sub2, feedhandler) exited RC
#   @summary NAME JSON           NAME's summary line (its stdout)
#   @log NAME LINE               a line of NAME's log (stderr), when it failed
#   @e2etime START END BUDGET    guest uptime (s) when the run started and
#                                ended, and the seconds it was allowed
#   @rdmadev NAME LINE           NAME's log line about the RDMA device behind
#                                --iface (its NUMA node and thread placement)
#
# The run has a budget: what is left of the guest's time limit less a
# margin for the report. At the end of the budget every process still
# running gets SIGTERM, which makes it print its summary (how far it got),
# and SIGKILL 10 s later.
E2E=$(sed -n 's/.*tce2e=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$E2E" ] && { [ ! -x /tests/feedhandler ] || [ ! -x /tests/subscriber ]; }; then
	say "@error end to end: /tests/feedhandler or /tests/subscriber is missing"
elif [ -n "$E2E" ]; then
	oldifs=$IFS
	IFS=,
	set -- $E2E
	IFS=$oldifs
	COUNT=$1 RATE=$2 MAXDELAY=${3:-50us} LOSS=${4:-0} DURATION=${5:-0s}
	LIMIT=${TIMEOUT%s}
	[ "${LIMIT:-0}" -ge 60 ] 2>/dev/null || LIMIT=60
	T0=$(cut -d. -f1 /proc/uptime)
	BUDGET=$((LIMIT - T0 - 25))
	[ $BUDGET -ge 30 ] || BUDGET=30
	if [ "$COUNT" = 0 ]; then
		FHSIZE="--count 0 --duration $DURATION"
		EXPECT=""
	else
		FHSIZE="--count $COUNT"
		EXPECT="--expect $COUNT"
	fi
	echo "guest: end to end, ${FHSIZE#--} at $RATE/s, budget ${BUDGET}s, at $(cut -d' ' -f1 /proc/uptime)s"
	# The subscribers start first (their NATS client keeps retrying until
	# the feed handler's embedded server is up) and wait for the feed
	# longer than the default idle timeout.
	sub() {
		timeout -s TERM -k 10 $BUDGET /tests/subscriber --transport rdma --iface $ADDR --verify $EXPECT \
			--idle-timeout 30s --log-format json --metrics-addr "" "$@"
	}
	sub > /tmp/sub1.out 2> /tmp/sub1.log &
	pid_sub1=$!
	# sub2 receives in direct mode (no receive loop: its handler's
	# goroutine polls the completion queues and sleeps in one epoll_wait
	# over the four completion channels); sub1 in the default, blocking.
	sub --inject-loss "$LOSS" --mode direct > /tmp/sub2.out 2> /tmp/sub2.log &
	pid_sub2=$!
	i=0
	while ! { grep -q '"message":"subscribed"' /tmp/sub1.log && grep -q '"message":"subscribed"' /tmp/sub2.log; }; do
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			say "@error end to end: the subscribers did not log \"subscribed\" within 60s"
			break
		fi
		sleep 0.1
	done
	echo "guest: subscribers joined at $(cut -d' ' -f1 /proc/uptime)s"
	LEFT=$((BUDGET - $(cut -d. -f1 /proc/uptime) + T0))
	[ $LEFT -ge 5 ] || LEFT=5
	timeout -s TERM -k 10 $LEFT /tests/feedhandler --transport rdma --iface $ADDR $FHSIZE --rate "$RATE" \
		--max-delay "$MAXDELAY" --log-format json --metrics-addr "" --linger 3s \
		> /tmp/feedhandler.out 2> /tmp/feedhandler.log
	rc_feedhandler=$?
	echo "guest: feed handler exited $rc_feedhandler at $(cut -d' ' -f1 /proc/uptime)s"
	wait $pid_sub1
	rc_sub1=$?
	wait $pid_sub2
	rc_sub2=$?
	T1=$(cut -d. -f1 /proc/uptime)
	echo "guest: subscribers exited $rc_sub1 $rc_sub2 at $(cut -d' ' -f1 /proc/uptime)s"
	say "@e2etime $T0 $T1 $BUDGET"
	for n in sub1 sub2 feedhandler; do
		eval "rc=\$rc_$n"
		say "@e2e $n $rc"
		while read -r l; do say "@summary $n $l"; done < /tmp/$n.out
		if [ "$rc" != 0 ]; then
			tail -n 40 /tmp/$n.log | while read -r l; do say "@log $n $l"; done
		fi
	done
	# The line each program logged about the RDMA device behind --iface.
	for n in sub1 sub2 feedhandler; do
		say "@rdmadev $n $(grep -m1 '"rdma_device"' /tmp/$n.log)"
	done
	counters e2e
fi
# ---- device removal (ud/rdma's removal reproducer, in a fresh process:
# librdmacm holds a device context per device and process, so a process
# that used rxe0 before would hold it). It runs after everything that counts
# on rxe0's hw_counters, which start again from zero when rxe0 is added
# back. rxe0 is there again afterwards, whatever happened.
#
# A second device, rxe1 on veth1, exists while it runs: librdmacm closes a
# removed device's context (which rdma link delete waits for) only when it
# can still list some other device. With rxe0 alone the removal would block
# until the process exits (docs/operations.md). rxe1 goes afterwards.
#
#   @removal LINE                a line of its output (and the library's log)
#   @removalrc RC                its exit status
if [ -x /tests/ud_rdma.test ]; then
	rdma link add rxe1 type rxe netdev veth1 || say "@error rdma link add rxe1 type rxe netdev veth1 failed"
	TICKCAST_RDMA_REMOVAL=rxe0,veth0 timeout -s KILL 90 /tests/ud_rdma.test > /tmp/removal.out 2>&1
	rc=$?
	while IFS= read -r l; do say "@removal $l"; done < /tmp/removal.out
	say "@removalrc $rc"
	rdma link delete rxe1 || say "@error rdma link delete rxe1 failed"
	[ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev veth0 || say "@error rdma link add rxe0 after the removal test failed"
	i=0
	until grep -q ACTIVE $PORT/state 2>/dev/null || [ $i -gt 100 ]; do i=$((i + 1)); sleep 0.1; done
fi
# ---- faults end to end (vmtest -faults): the feed handler and one verifying
# subscriber over rxe0, recovery over the feed handler's embedded NATS
# server on lo, while the link under rxe0 flaps (ip link set veth0 down,
# 1 s, up) and then rxe0 is removed and added back (rdma link delete; 1 s;
# rdma link add). rxe1 on veth1 exists meanwhile, so that librdmacm can let
# the removed device go (see the removal reproducer above). The host asks
# for it on the kernel command line:
#
#   tcfaults=COUNT,RATE           COUNT messages at RATE per second
#
#   @fstep STEP UPTIME [RC]       a fault step, when it was done (guest
#                                 uptime, s) and its exit status
#   @frc NAME RC                  NAME (fsub, ffh) exited RC
#   @fsummary NAME JSON           NAME's summary line
#   @flog NAME LINE               NAME's log lines about RDMA events and
#                                 rebuilds
#   @ftail NAME LINE              NAME's last 40 log lines, if it failed
FAULTS=$(sed -n 's/.*tcfaults=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$FAULTS" ]; then
	oldifs=$IFS
	IFS=,
	set -- $FAULTS
	IFS=$oldifs
	FCOUNT=$1 FRATE=$2
	now() { echo "$(cut -d' ' -f1 /proc/uptime) $(date -u +%H:%M:%S)"; }
	waitport() {
		i=0
		until grep -q ACTIVE $PORT/state 2>/dev/null || [ $i -gt 150 ]; do i=$((i + 1)); sleep 0.1; done
	}
	echo "guest: faults end to end, $FCOUNT messages at $FRATE/s, at $(now)s"
	rdma link add rxe1 type rxe netdev veth1 || say "@error faults: rdma link add rxe1 type rxe netdev veth1 failed"
	timeout -s TERM -k 10 120 /tests/subscriber --transport rdma --iface $ADDR --verify --expect "$FCOUNT" \
		--idle-timeout 30s --log-format json --metrics-addr "" > /tmp/fsub.out 2> /tmp/fsub.log &
	pid_fsub=$!
	i=0
	until grep -q '"message":"subscribed"' /tmp/fsub.log || [ $i -gt 600 ]; do i=$((i + 1)); sleep 0.1; done
	timeout -s TERM -k 10 120 /tests/feedhandler --transport rdma --iface $ADDR --count "$FCOUNT" --rate "$FRATE" \
		--max-delay 1ms --log-format json --metrics-addr "" --linger 5s > /tmp/ffh.out 2> /tmp/ffh.log &
	pid_ffh=$!
	sleep 4
	say "@fstep link-down $(now)"
	$IP link set veth0 down
	sleep 1
	$IP link set veth0 up
	rc=$?
	say "@fstep link-up $(now) $rc"
	waitport
	say "@fstep port-active $(now)"
	sleep 4
	say "@fstep delete $(now)"
	timeout -s KILL 20 rdma link delete rxe0
	rc=$?
	say "@fstep deleted $(now) $rc"
	sleep 1
	rdma link add rxe0 type rxe netdev veth0
	rc=$?
	say "@fstep added $(now) $rc"
	waitport
	say "@fstep port-active $(now)"
	wait $pid_ffh
	rc_ffh=$?
	wait $pid_fsub
	rc_fsub=$?
	for n in fsub ffh; do
		eval "rc=\$rc_$n"
		say "@frc $n $rc"
		while read -r l; do say "@fsummary $n $l"; done < /tmp/$n.out
		grep -E '"message":"rdma (event|endpoint)' /tmp/$n.log | while read -r l; do say "@flog $n $l"; done
		if [ "$rc" != 0 ]; then
			grep -m 3 -B 30 -A 5 '"verification failed"' /tmp/$n.log | while read -r l; do say "@ftail $n $l"; done
			tail -n 40 /tmp/$n.log | while read -r l; do say "@ftail $n $l"; done
		fi
	done
	rdma link delete rxe1 || say "@error faults: rdma link delete rxe1 failed"
fi
# ---- probes (vmtest -probe), after the end-to-end run: where the guest's
# time goes. Each probe runs
# the feed handler for PROBE seconds in one configuration and reports its
# summary and the CPU it used:
#
#   @probe NAME U0 S0 U1 S1 JSON...  CPU clock ticks (user, system) of the
#                                    children before and after, and summaries
#   @clocksource NAME                the guest kernel's clock source
PROBE=$(sed -n 's/.*tcprobe=\([0-9]*\).*/\1/p' /proc/cmdline)
say "@clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
if [ -n "$PROBE" ] && [ -x /tests/feedhandler ]; then
	cpu() { # user and system clock ticks of the children waited for so far
		set -- $(cut -d')' -f2 /proc/$$/stat)
		echo "${14} ${15}"
	}
	for cfg in "unpaced --rate 0" "paced15k --rate 15000" "paced15k-spin --rate 15000 --pace-spin -1ns" "unpaced-nolive --rate 0 --nats-live=false"; do
		set -- $cfg
		before=$(cpu)
		name=$1
		shift
		/tests/feedhandler --transport rdma --iface $ADDR --count 0 --duration ${PROBE}s --max-delay 1ms \
			--log-format json --metrics-addr "" --linger 0s "$@" > /tmp/probe.out 2> /tmp/probe.log
		after=$(cpu)
		say "@probe $name $before $after $(cat /tmp/probe.out)"
	done
	# The same feed with one subscriber taking it (blocking mode).
	timeout -s TERM 60 /tests/subscriber --transport rdma --iface $ADDR --idle-timeout 20s --log-format json \
		--metrics-addr "" > /tmp/psub.out 2> /tmp/psub.log &
	psub=$!
	i=0
	until grep -q '"message":"subscribed"' /tmp/psub.log || [ $i -gt 300 ]; do i=$((i + 1)); sleep 0.1; done
	before=$(cpu)
	/tests/feedhandler --transport rdma --iface $ADDR --count 0 --duration ${PROBE}s --max-delay 1ms \
		--log-format json --metrics-addr "" --linger 0s --rate 0 > /tmp/probe.out 2> /tmp/probe.log
	wait $psub
	after=$(cpu)
	say "@probe unpaced+subscriber $before $after $(cat /tmp/probe.out) $(cat /tmp/psub.out)"
fi

dmesg | grep -iE 'rxe|rdma|infiniband' | tail -n 10
finish
