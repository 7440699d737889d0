#!/usr/bin/env bash
# What the test suite's real nodes and planes may leave on the machine, by
# the names they use (kubetest-*, kt*): after `make test` there must be
# none. Prints each kind found and exits 1 if any is.
set -uo pipefail
found=0
say() { echo "left behind: $*"; found=1; }

for d in /sys/fs/cgroup/*/kubetest-* /sys/fs/cgroup/unified/kubetest-*; do
	[ -e "$d" ] && say "cgroup $d"
done
while read -r mp; do
	say "mount $mp"
done < <(awk '{print $5}' /proc/self/mountinfo | grep -E '/kubetest-[0-9]+/' || true)
while read -r l; do
	say "network link $l"
done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^kt[0-9a-f]{8}' || true)
for f in /var/lib/cni/results/kubetest-kt*; do
	[ -e "$f" ] && say "CNI result $f"
done
for l in /var/log/containers/*.log; do
	[ -L "$l" ] && case "$(readlink "$l")" in /tmp/kubetest-*) say "log link $l" ;; esac
done
while read -r p; do
	say "process $p"
done < <(pgrep -af '/tmp/kubetest-[0-9]+/' | grep -v -e pgrep -e leftovers || true)
if [ "$found" = 0 ]; then
	echo "nothing left behind: no kubetest cgroup, mount, bridge, CNI result, log link or process"
fi
exit "$found"
