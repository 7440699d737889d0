// Package cgroupfs finds this process's memory cgroup, on cgroup v1 or v2,
// from /proc/self/cgroup and /proc/self/mountinfo: the CUE child's bound
// (cue/isolate) is made under it, and the Go memory limit (memlimit) read
// from it.
package cgroupfs

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is where this process's memory cgroup is: per version, its
// directory and the mount point above it (the top of the hierarchy the
// process sees), "" when that version has no memory controller mounted for
// it.
type Memory struct {
	V1, V1Mount string
	V2, V2Mount string
}

// Find reads own (/proc/self/cgroup) and mountinfo (/proc/self/mountinfo).
// A mount whose root is not above the process's cgroup (another
// namespace's view) is skipped.
func Find(own, mountinfo string) Memory {
	var path1, path2 string
	have2 := false
	for _, line := range strings.Split(own, "\n") {
		// hierarchy-id:controllers:path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			path2, have2 = f[2], true
			continue
		}
		if hasWord(strings.ReplaceAll(f[1], ",", " "), "memory") {
			path1 = f[2]
		}
	}
	var m Memory
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		left, right, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		root, mnt := unescape(lf[3]), unescape(lf[4])
		switch {
		case rf[0] == "cgroup2" && have2 && m.V2 == "":
			if rel, ok := within(path2, root); ok {
				m.V2, m.V2Mount = filepath.Join(mnt, rel), mnt
			}
		case rf[0] == "cgroup" && path1 != "" && m.V1 == "" && hasWord(strings.ReplaceAll(rf[2], ",", " "), "memory"):
			if rel, ok := within(path1, root); ok {
				m.V1, m.V1Mount = filepath.Join(mnt, rel), mnt
			}
		}
	}
	return m
}

// within returns path relative to a mount's root, if the mount shows it.
func within(path, root string) (string, bool) {
	if root == "/" {
		return path, true
	}
	if path == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(path, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// HasWord says whether the space-separated list s holds w.
func HasWord(s, w string) bool { return hasWord(s, w) }

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}
