// Package atomicfile writes a file so that a crash at any instruction
// leaves either the old content or the new, never a mix or an empty file:
// a uniquely named temporary file beside the target, fsynced, renamed over
// it, and the directory fsynced so the rename itself survives. State, the
// sim world's state and saved plans all write through it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Write replaces path with data.
func Write(path string, data []byte, perm os.FileMode) error {
	if err := WriteNoDirSync(path, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteNoDirSync is Write without the directory fsync, for callers that
// write many files into one directory and sync it once (SyncDir) after.
func WriteNoDirSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// SyncDir makes renames and removals in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// WriteTemp writes data to a new, uniquely named temporary file beside
// path without syncing it, and returns its name: the first half of a
// batch of atomic writes (many WriteTemp, one SyncFS, then Rename each,
// then SyncDir), which costs one filesystem flush instead of one fsync per
// file.
func WriteTemp(path string, data []byte, perm os.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	if err := tmp.Chmod(perm); err == nil {
		_, err = tmp.Write(data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return name, nil
		}
		os.Remove(name)
		return "", fmt.Errorf("writing %s: %w", path, err)
	} else {
		tmp.Close()
		os.Remove(name)
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
}

// SyncFS flushes every file of the filesystem holding dir to disk
// (syncfs(2)): after it, temporary files written by WriteTemp are durable
// and may be renamed over their targets.
func SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
