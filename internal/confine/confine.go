// Package confine resolves the paths a spec names and says whether they
// stay inside the spec directory.
//
// Specs arrive in pull requests, so a path in a spec is input from whoever
// wrote the pull request: "trace: /etc/shadow" or "state.path:
// ../../x/state.json" must not let them read or create files elsewhere.
// A path is judged by where it resolves on disk, with every symlink
// followed, not by how it is spelled.
package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Resolve returns p made absolute against base with every symlink in its
// existing part followed. The part that does not exist yet (a state file
// not written) is appended as spelled, cleaned.
func Resolve(base, p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(base)
		if err != nil {
			return "", err
		}
		// Not filepath.Join: it would clean "link/.." lexically, while the
		// kernel follows link first and then goes up from its target.
		p = abs + string(filepath.Separator) + p
	}
	// Another process may create the missing part while this one looks
	// (a concurrent run's lock file): such a path is resolved again.
	for range 3 {
		res, again, err := resolveOnce(p)
		if !again {
			return res, err
		}
	}
	return "", fmt.Errorf("resolving %s: it kept changing while being resolved", p)
}

// resolveOnce resolves an absolute path; again says the path changed
// under it (a part that did not resolve exists now and is no dangling
// link), so it should be resolved again.
func resolveOnce(p string) (res string, again bool, err error) {
	// The longest prefix that exists is resolved by the kernel's rules
	// (EvalSymlinks applies ".." after following a link); what is left
	// does not exist, so it holds no symlink.
	parts := strings.Split(p, string(filepath.Separator))
	for i := len(parts); i > 0; i-- {
		prefix := strings.Join(parts[:i], string(filepath.Separator))
		if prefix == "" {
			prefix = string(filepath.Separator)
		}
		real, err := filepath.EvalSymlinks(prefix)
		if err == nil {
			// The first part that does not resolve must not exist at all:
			// a dangling link there would make a later create (O_CREAT)
			// write wherever it points.
			if i < len(parts) {
				next := strings.Join(parts[:i+1], string(filepath.Separator))
				if fi, err := os.Lstat(next); err == nil {
					if _, err := filepath.EvalSymlinks(next); err != nil && fi.Mode()&os.ModeSymlink != 0 {
						return "", false, fmt.Errorf("%s is a symlink to nothing (or cannot be followed)", next)
					}
					return "", true, nil // created meanwhile
				}
			}
			return filepath.Clean(filepath.Join(append([]string{real}, parts[i:]...)...)), false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
			// A loop, or a component that is a file: report it, as the
			// kernel would refuse it too.
			return "", false, fmt.Errorf("resolving %s: %w", p, unwrap(err))
		}
	}
	return filepath.Clean(p), false, nil
}

// Within reports whether path (resolved) is root or below it. root must be
// resolved too.
func Within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}

// Root is a spec directory, resolved.
type Root struct {
	Dir string
}

// NewRoot resolves a spec directory.
func NewRoot(dir string) (Root, error) {
	real, err := Resolve(".", dir)
	if err != nil {
		return Root{}, err
	}
	return Root{Dir: real}, nil
}

// OutsideError is a path that resolves outside the spec directory.
type OutsideError struct {
	Path     string // as the spec spells it
	Resolved string
	Root     string
}

func (e *OutsideError) Error() string {
	if e.Resolved == filepath.Clean(e.Path) {
		return fmt.Sprintf("%s is outside the spec directory %s", e.Path, e.Root)
	}
	return fmt.Sprintf("%s resolves to %s, outside the spec directory %s", e.Path, e.Resolved, e.Root)
}

// Inside resolves p against base and returns it if it stays inside the
// root; otherwise an *OutsideError (or the resolution's error).
func (r Root) Inside(base, p string) (string, error) {
	res, err := Resolve(base, p)
	if err != nil {
		return "", err
	}
	if !Within(r.Dir, res) {
		return res, &OutsideError{Path: p, Resolved: res, Root: r.Dir}
	}
	return res, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Kind names what a file mode is, for an error that refuses a path for
// being something else ("…: a named pipe (FIFO), not a regular file").
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return fmt.Sprintf("a special file (mode %s)", m)
	}
}

// NotRegularError refuses a path that is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, Kind(e.Mode))
}

// OpenRegular opens p for reading only if what was opened is a regular
// file, judged by fstat of the open file, not the path (which a swap may
// change meanwhile). The open does not block: opening a FIFO waits for a
// writer in a system call no signal ends. With noFollow, a symlink as the
// last component is refused too. The caller closes the file.
func OpenRegular(p string, noFollow bool) (*os.File, fs.FileInfo, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(p, flags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: p, Mode: fi.Mode()}
	}
	return f, fi, nil
}

// ErrTooLarge marks a file over the size ReadRegular allows.
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads a regular file (as OpenRegular opens it) of at most
// limit bytes, also when it grows while being read; past the limit the
// error wraps ErrTooLarge. It returns what fstat said of the file.
func ReadRegular(p string, limit int64, noFollow bool) ([]byte, fs.FileInfo, error) {
	f, fi, err := OpenRegular(p, noFollow)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fi, fmt.Errorf("%s is %d bytes, over %d: %w", p, fi.Size(), limit, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fi, err
	}
	if int64(len(b)) > limit {
		return nil, fi, fmt.Errorf("%s grew past %d bytes while being read: %w", p, limit, ErrTooLarge)
	}
	return b, fi, nil
}
