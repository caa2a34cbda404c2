#!/usr/bin/env bash
# run.sh - run tickcast's RDMA tests on real verbs in a Soft-RoCE VM.
#
#   bash test/softroce/run.sh [-v] [vmtest flags] [package ...]
#
# Checks the host's Debian packages, then runs cmd/vmtest, which builds the
# rdma-tagged test binaries and the rdma-tagged feedhandler and subscriber,
# packs them with Debian's kernel and the rdma_rxe modules into an
# initramfs, boots it under qemu (TCG, no network device) and checks the
# results and rxe0's packet counters. After the tests the guest runs the
# programs end to end: two subscribers --transport rdma --verify, the feed
# handler --transport rdma publishing 1,000,000 synthetic messages, recovery
# over its embedded NATS server; both subscribers must get every message in
# order. About 2 minutes in all. Nothing needs root except installing
# packages.
#
# vmtest flags (go run ./test/softroce/cmd/vmtest -h lists them all):
#   -v                 print every test's output
#   -timeout 5m        limit for the whole VM run
#   -e2e-count N       messages end to end (default 1000000; 0: no end-to-end run)
#   -e2e-rate R        the feed handler's --rate (default 15000)
#   -e2e-max-delay D   the feed handler's --max-delay (default 1ms)
#   -e2e-loss P        the second subscriber's --inject-loss (default 0.001)
#   -extra BIN,...     more host binaries for the guest's /tests
# The packages default to ./ud/rdma.
#
# Missing packages: in CI (CI set, or TICKCAST_REQUIRE naming softroce) they
# are installed with apt-get when running as root, otherwise the script
# prints them and fails. Elsewhere it prints them and skips (exit 0).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE/../.."

PKGS="qemu-system-x86 busybox-static cpio kmod xz-utils iproute2 libibverbs-dev librdmacm-dev ibverbs-providers"
required=false
case ",${TICKCAST_REQUIRE:-}," in *,softroce,*) required=true ;; esac
[ -n "${CI:-}" ] && required=true

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
command -v go >/dev/null || { echo "run.sh: go is not on PATH" >&2; exit 1; }
if [ -n "$missing" ]; then
	if $required && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "run.sh: apt-get install$missing"
		apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
	elif $required; then
		echo "run.sh: FAIL: missing Debian packages:$missing" >&2
		echo "run.sh: install them with: sudo apt-get install$missing" >&2
		exit 1
	else
		echo "run.sh: SKIP: the Soft-RoCE VM tests need Debian packages that are not installed:$missing"
		echo "run.sh: install them with: sudo apt-get install$missing"
		echo "run.sh: (set TICKCAST_REQUIRE=softroce to make this a failure)"
		exit 0
	fi
fi
for tool in apt-get apt-cache dpkg; do
	command -v $tool >/dev/null || { echo "run.sh: $tool not found: the harness fetches Debian's kernel with apt" >&2; exit 1; }
done
exec go run ./test/softroce/cmd/vmtest "$@"
