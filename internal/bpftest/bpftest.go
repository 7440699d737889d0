//go:build linux

// Package bpftest runs a test's own process inside a fresh cgroup2 child,
// so a cgroup program attached there sees only the test's connects, and
// gives it loopback servers that say which of them a connect reached.
package bpftest

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RequireRoot fails (never skips) a test that needs bpf(): the dataplane's
// tests are part of the suite, run as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("this test loads BPF programs and must run as root (make test runs as root in CI)")
	}
}

// cgroup2Root finds a cgroup2 mount, mounting one under a temporary
// directory when the machine has none.
func cgroup2Root(tb testing.TB) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	dir := tb.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		tb.Fatalf("no cgroup2 mount, and mounting one at %s: %v", dir, err)
	}
	tb.Cleanup(func() { _ = unix.Unmount(dir, 0) })
	return dir
}

// current is this process's cgroup2 path, relative to the mount.
func current(tb testing.TB) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return "/"
}

// Cgroup makes a child cgroup, moves this process into it and returns
// its path; cleanup moves the process back and removes it.
func Cgroup(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	root := cgroup2Root(tb)
	home := filepath.Join(root, current(tb))
	dir := filepath.Join(home, fmt.Sprintf("setpoint-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatalf("making a child cgroup: %v", err)
	}
	pid := []byte(fmt.Sprint(os.Getpid()))
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
		_ = os.Remove(dir)
		tb.Fatalf("moving the test into %s: %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(home, "cgroup.procs"), pid, 0); err != nil {
			tb.Errorf("moving the test back to %s: %v", home, err)
		}
		if err := os.Remove(dir); err != nil {
			tb.Errorf("removing cgroup %s: %v", dir, err)
		}
	})
	return dir
}

// Servers listens on n loopback ports and accepts (and closes) whatever
// connects, so connect storms never fill a backlog.
func Servers(tb testing.TB, n int) []netip.AddrPort {
	tb.Helper()
	out := make([]netip.AddrPort, n)
	var wg sync.WaitGroup
	// Registered first, so it runs after the listeners close.
	tb.Cleanup(wg.Wait)
	for i := range out {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = l.Addr().(*net.TCPAddr).AddrPort()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		tb.Cleanup(func() { l.Close() })
	}
	return out
}

// Connect connects a TCP socket to to and says which address it reached
// (the peer after any rewrite); it closes with RST (SO_LINGER 0) so a
// storm leaves no TIME_WAIT behind. A refused connect returns its errno.
func Connect(to netip.AddrPort) (netip.AddrPort, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}); err != nil {
		return netip.AddrPort{}, err
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return netip.AddrPort{}, err
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("peer %T", sa)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)), nil
}

// BPFFS mounts a fresh bpffs for the test's pins; unmounting it at the
// end releases whatever is still pinned there.
func BPFFS(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	dir := tb.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		tb.Fatalf("mounting bpffs at %s: %v", dir, err)
	}
	tb.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}
