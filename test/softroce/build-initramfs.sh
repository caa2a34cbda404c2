#!/usr/bin/env bash
# build-initramfs.sh WORK BIN...
#
# Builds the Soft-RoCE test VM's boot files in WORK:
#   WORK/vmlinuz            Debian's kernel (the version linux-image-amd64
#                           depends on), unpacked from its .deb, never installed
#   WORK/initramfs.cpio.gz  busybox, iproute2 (ip, rdma), the libibverbs rxe
#                           provider, the kernel modules rdma_rxe and rdma_ucm
#                           need (dependency order from depmod's modules.dep) and e1000
#                           (the two-host run's NIC), guest-init.sh as /init,
#                           guest-twohost.sh as /twohost.sh, and every BIN under
#                           /tests with the shared libraries it links (ldd closure)
#
# The kernel .deb is cached in WORK/debs. The host must be Debian bookworm
# (or match it): the guest userland is the host's own binaries.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$1"; shift
ROOT="$WORK/rootfs"
mkdir -p "$WORK/debs"

# ---- kernel: resolve linux-image-6.1.0-NN-amd64 (NN changes over time)
kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
KPKG="$(kpkg)"
[ -n "$KPKG" ] || { echo "build-initramfs: cannot resolve the kernel package (apt-cache depends linux-image-amd64)" >&2; exit 1; }
KVER="${KPKG#linux-image-}"
KDIR="$WORK/kernel-$KVER"
if [ ! -f "$KDIR/boot/vmlinuz-$KVER" ]; then
	if ! ls "$WORK/debs/${KPKG}"_*.deb >/dev/null 2>&1; then
		echo "build-initramfs: apt-get download $KPKG"
		( cd "$WORK/debs" && apt-get download -q "$KPKG" )
	fi
	rm -rf "$KDIR"; mkdir -p "$KDIR"
	dpkg -x "$(ls "$WORK/debs/${KPKG}"_*.deb | head -1)" "$KDIR"
fi
cp "$KDIR/boot/vmlinuz-$KVER" "$WORK/vmlinuz"
echo "$KPKG" > "$WORK/kernel.txt"

# ---- root file system (merged /usr, as Debian)
rm -rf "$ROOT"
mkdir -p "$ROOT"/{usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,usr/lib64,etc/libibverbs.d,proc,sys,dev,tmp,run,tests}
ln -s usr/bin "$ROOT/bin"; ln -s usr/sbin "$ROOT/sbin"; ln -s usr/lib "$ROOT/lib"; ln -s usr/lib64 "$ROOT/lib64"

# add FILE [DEST]: copy an executable or library and its ldd closure.
add() {
	local src="$1" dst="${2:-$1}"
	mkdir -p "$ROOT$(dirname "$dst")"
	cp -L "$src" "$ROOT$dst"
	local lib
	# Static binaries make ldd fail and list nothing; that is fine.
	for lib in $(ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' || true); do
		[ -e "$ROOT$lib" ] || { mkdir -p "$ROOT$(dirname "$lib")"; cp -L "$lib" "$ROOT$lib"; }
	done
}
add /usr/bin/busybox
add /usr/sbin/ip          # iproute2: busybox's ip has no veth
add /usr/bin/rdma         # iproute2: rdma link add
# libibverbs dlopens the provider named by /etc/libibverbs.d/rxe.driver;
# ldd of the test binaries does not show it.
add /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cp /etc/libibverbs.d/rxe.driver "$ROOT/etc/libibverbs.d/"
printf '127.0.0.1 localhost\n' > "$ROOT/etc/hosts"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
for b in "$@"; do add "$b" "/tests/$(basename "$b")"; done

# ---- kernel modules, in load order
MODDIR="$KDIR/lib/modules/$KVER"
# The .deb ships no modules.dep (its postinst runs depmod): make one.
[ -s "$MODDIR/modules.dep" ] || depmod -b "$KDIR" "$KVER"
declare -A seen=()
order=()
# visit MOD: modules.dep lists a module's dependencies; load them first.
visit() {
	local path="$1" deps d
	[ -n "${seen[$path]:-}" ] && return
	seen[$path]=1
	deps="$(awk -v m="$path:" '$1 == m { $1 = ""; print; exit }' "$MODDIR/modules.dep")"
	for d in $deps; do visit "$d"; done
	order+=("$path")
}
modpath() { # the modules.dep path of module NAME
	local p
	p="$(grep -oE "^[^:]*/$1\.ko(\.xz|\.zst)?:" "$MODDIR/modules.dep" | head -1)"
	[ -n "$p" ] || { echo "build-initramfs: module $1 not in $KPKG" >&2; exit 1; }
	echo "${p%:}"
}
# crc32_generic is not a modules.dep dependency of rdma_rxe, but adding an
# rxe link fails (ENOENT, "failed to init crc32 algorithm") without it.
# veth: the single VM's link; e1000: the two-host run's NIC.
for m in crc32_generic rdma_rxe rdma_ucm veth e1000; do visit "$(modpath "$m")"; done
: > "$ROOT/modules.load"
for p in "${order[@]}"; do
	dst="$ROOT/lib/modules/$KVER/$p"
	mkdir -p "$(dirname "$dst")"
	cp "$MODDIR/$p" "$dst"
	# busybox insmod cannot read compressed modules.
	case "$p" in
	*.xz) xz -d "$dst"; p="${p%.xz}" ;;
	*.zst) zstd -q -d --rm "$dst"; p="${p%.zst}" ;;
	esac
	echo "/lib/modules/$KVER/$p" >> "$ROOT/modules.load"
done

install -m 0755 "$HERE/guest-init.sh" "$ROOT/init"
install -m 0755 "$HERE/guest-twohost.sh" "$ROOT/twohost.sh"
( cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1 > "$WORK/initramfs.cpio.gz" )
echo "build-initramfs: $KPKG, $(wc -l < "$ROOT/modules.load") modules, $# test binaries, initramfs $(du -h "$WORK/initramfs.cpio.gz" | cut -f1)"
