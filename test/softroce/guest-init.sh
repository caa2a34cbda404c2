#!/bin/busybox sh
# guest-init.sh is /init of the Soft-RoCE test VM (see build-initramfs.sh).
# It loads the RDMA modules, creates a veth pair with the rxe0 Soft-RoCE
# device on veth0, runs every /tests/*.test binary under test2json, and
# reports on the second serial port (/dev/ttyS1), which the host runner
# (cmd/vmtest) parses:
#
#   @counters before|after SENT_PKTS RCVD_PKTS   rxe0 hw_counters
#   @suite NAME                                  then NAME's go test -json lines
#   @exit NAME RC                                the test binary's exit status
#   @sent NAME N                                 datagrams NAME's tests sent
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
	insmod "$m" || say "@error insmod $m"
done

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
for t in /tests/*.test; do
	name=$(basename "$t" .test)
	say "@suite $name"
	TICKCAST_RDMA_SENT_FILE=/tmp/sent.$name \
		/tests/test2json -t -p "$name" "$t" -test.v=test2json -test.count=1 -test.timeout="${TIMEOUT:-240s}" > $OUT 2>&1
	say "@exit $name $?"
	say "@sent $name $(cat /tmp/sent.$name 2>/dev/null || echo -1)"
done
counters after
dmesg | grep -iE 'rxe|rdma|infiniband' | tail -n 10
finish
