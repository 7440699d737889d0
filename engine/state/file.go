package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
)

// fileBackend is the local backend: see NewFile.
type fileBackend struct {
	path string // the Environment's state.path, e.g. .setpoint/state.json
	dir  string // path + ".d": the shards
	lock string // path + ".lock"
	id   string // the absolute shard directory: which storage a State came from

	// onWait, when set (tests), is called each time a waiting Lock finds
	// the lock held.
	onWait func()

	// held is the lock file the last Lock took, open while it is held:
	// CheckHeld compares it with what the path names now.
	mu   sync.Mutex
	held *os.File
}

// ShardDirSuffix is appended to state.path to name the shard directory.
const ShardDirSuffix = ".d"

// NewFile returns the local backend for the Environment's state.path
// (default .setpoint/state.json). That name stays the one users configure
// and see; the state itself is a directory beside it, PATH.d, holding one
// file per target object, and PATH.lock is the lock file:
//
//	.setpoint/state.json.lock
//	.setpoint/state.json.d/kubernetes_Deployment_shop_checkout.1f0c…9a.json
//
// Nothing is stored at PATH itself, so a single-file state of an earlier
// release found there is recognised and reported (Load and Save refuse
// with ErrOldFormat, saying to move it aside) rather than mistaken for a
// directory or overwritten, and "state.json" never names a directory
// that tools would try to read as JSON.
//
// A shard file's name is the object's address made filename-safe (any
// byte other than ASCII letters, digits, '-', '_' and a non-leading '.'
// becomes '_', cut to 80 bytes) for people, then a hash of the address's
// parts, which makes it unique and means no address, whatever it holds
// (':', '/', "..", NUL), names anything outside the directory. The file is
// one line of JSON:
//
//	{"version":2,"object":{"provider":…,"kind":…,"namespace":…,"name":…},
//	 "checksum":"<sha256 of attrs, hex>","attrs":{…}}
//
// The object is kept as its parts (the address text is ambiguous when a
// part holds '/'); Load checks that it hashes to the file's name.
//
// Each shard is written atomically (temporary file, fsync, rename) and the
// directory is fsynced once per Save: a crash leaves each shard old or
// new, never torn. Shards are independent, so a crash in a Save may leave
// some objects' shards new and others old, each consistent.
func NewFile(path string) Backend {
	dir := path + ShardDirSuffix
	id, err := filepath.Abs(dir)
	if err != nil {
		id = filepath.Clean(dir)
	}
	return &fileBackend{path: path, dir: dir, lock: FilesBeside(path)[1], id: "file:" + id}
}

// FilesBeside lists what the file backend keeps for the state file at
// path: its shard directory and its lock file (path itself holds nothing).
func FilesBeside(path string) []string {
	return []string{path + ShardDirSuffix, path + ".lock", ConfirmPath(path)}
}

// ConfirmPath is where setpoint state confirm-release hands a confirmation
// to the process that holds the lock (a running watch): beside the state.
func ConfirmPath(path string) string { return path + ".confirm-release" }

func (b *fileBackend) String() string { return b.dir }

// shardName is the file name of o's shard.
func shardName(o addrs.Object) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range [...]string{o.Provider, o.Kind, o.Namespace, o.Name} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	const maxReadable = 80
	addr := o.String()
	if len(addr) > maxReadable {
		addr = addr[:maxReadable]
	}
	name := make([]byte, 0, len(addr)+1+32+5)
	for i := 0; i < len(addr); i++ {
		c := addr[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.' && i > 0:
		default:
			c = '_'
		}
		name = append(name, c)
	}
	name = append(name, '.')
	name = hex.AppendEncode(name, sum[:16])
	return string(append(name, ".json"...))
}

// objectJSON is an address kept as its parts.
type objectJSON struct {
	Provider  string `json:"provider"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// shardFile is a shard file's content.
type shardFile struct {
	Version  int             `json:"version"`
	Object   *objectJSON     `json:"object"`
	Checksum string          `json:"checksum"`
	Attrs    json.RawMessage `json:"attrs"`
}

// checkPath refuses when something other than nothing is at state.path:
// most likely the single-file state of an earlier release.
func (b *fileBackend) checkPath() error {
	fi, err := os.Lstat(b.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if fi.IsDir() {
		return fmt.Errorf("state path %s is a directory: state.path names a file such as .setpoint/state.json, and the state is kept beside it in %s", b.path, b.dir)
	}
	var head struct {
		Version int `json:"version"`
	}
	f, err := os.Open(b.path)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer f.Close()
	if json.NewDecoder(f).Decode(&head) == nil && head.Version == 1 {
		return fmt.Errorf("%s: %w: it is the single-file state of an earlier setpoint release (format 1), and this release keeps one file per target object in %s. "+
			"Move the old file aside (mv %s %s.v1) and run again: setpoint then adopts each attribute's current value as the user's value, "+
			"so first restore any value setpoint applied that you want back as the user's",
			b.path, ErrOldFormat, b.dir, b.path, b.path)
	}
	return fmt.Errorf("%s: %w: a file is in the way of the state (this release keeps its state in %s and nothing at %s); move it aside", b.path, ErrOldFormat, b.dir, b.path)
}

// ShardError is a shard Load could not read. It wraps ErrCorrupt or
// ErrOldFormat.
type ShardError struct {
	File   string       // the shard's path
	Object addrs.Object // the object, when the shard says
	Err    error
}

func (e *ShardError) Error() string {
	of := ""
	if !e.Object.IsZero() {
		of = " (of " + e.Object.String() + ")"
	}
	return fmt.Sprintf("state shard %s%s: %v; it was left as it is: repair it or move it aside", e.File, of, e.Err)
}

func (e *ShardError) Unwrap() error { return e.Err }

// LoadError lists the shards Load could not read.
type LoadError struct{ Shards []*ShardError }

func (e *LoadError) Error() string {
	const show = 5
	var b strings.Builder
	if len(e.Shards) > 1 {
		fmt.Fprintf(&b, "%d state shards could not be read: ", len(e.Shards))
	}
	for i, s := range e.Shards {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(e.Shards)-show)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.Error())
	}
	return b.String()
}

func (e *LoadError) Unwrap() []error {
	out := make([]error, len(e.Shards))
	for i, s := range e.Shards {
		out[i] = s
	}
	return out
}

// loaded is one shard as read.
type loaded struct {
	obj   addrs.Object
	attrs map[string]*Entry
	sum   digest
	err   *ShardError
}

// Load reads every shard, in parallel.
func (b *fileBackend) Load(ctx context.Context) (*State, error) {
	if err := b.checkPath(); err != nil {
		return nil, err
	}
	s := New()
	s.origin = b.id
	s.saved = map[addrs.Object]digest{}
	d, err := os.Open(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", b.dir, err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		// Skip temporary files (".name.*.tmp") and anything not a shard.
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") || !e.Type().IsRegular() {
			continue
		}
		names = append(names, n)
	}
	s.objects = make(map[addrs.Object]*Object, len(names))
	s.saved = make(map[addrs.Object]digest, len(names))
	dirfd := int(d.Fd())
	out := make([]loaded, len(names))
	parallel(len(names), runtime.GOMAXPROCS(0), func() func(int) {
		buf, keys := make([]byte, readBuf), map[string]string{}
		return func(i int) {
			if ctx.Err() == nil {
				out[i] = b.readShard(dirfd, names[i], buf, keys)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var bad []*ShardError
	for i, l := range out {
		if l.err != nil {
			bad = append(bad, l.err)
			if s.unreadable == nil {
				s.unreadable = map[string]error{}
			}
			s.unreadable[names[i]] = l.err
			continue
		}
		s.saved[l.obj] = l.sum
		if len(l.attrs) > 0 {
			s.objects[l.obj] = &Object{Attrs: l.attrs}
		}
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(x, y *ShardError) int { return strings.Compare(x.File, y.File) })
		return s, &LoadError{Shards: bad}
	}
	return s, nil
}

// readBuf is each Load worker's read buffer: a shard that fills it is
// read again whole.
const readBuf = 64 << 10

// readShard reads and checks one shard file. It tries the fast way first:
// one openat, one read, the fast decoder; anything unexpected, and it
// reads the file again with the os package and decodes with encoding/json,
// which says what is wrong if something is.
func (b *fileBackend) readShard(dirfd int, name string, buf []byte, keys map[string]string) loaded {
	if data, ok := readAt(dirfd, name, buf); ok {
		if f, ok := fastHeader(data); ok {
			if l, ok := b.decode(name, f, true, keys); ok {
				return l
			}
		}
	}
	path := filepath.Join(b.dir, name)
	data, err := readBounded(path, MaxShard)
	if err != nil {
		return loaded{err: &ShardError{File: path, Err: err}}
	}
	var f shardFile
	if err := json.Unmarshal(data, &f); err != nil {
		return loaded{err: &ShardError{File: path, Err: fmt.Errorf("%w: does not parse: %v", ErrCorrupt, err)}}
	}
	l, _ := b.decode(name, f, false, nil)
	return l
}

// readAt reads a small file in one read (a short read from a regular file
// is its end; if it was not, the checksum or the parse fails and the file
// is read again the slow way). ok is false if anything is unusual.
func readAt(dirfd int, name string, buf []byte) ([]byte, bool) {
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(dirfd, name, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 || n == len(buf) {
			return nil, false
		}
		return buf[:n], true
	}
}

// decode checks a shard file's header and checksum and decodes its
// attrs. With fast, it gives up (ok false) rather than report a problem,
// so the caller can try the slow way.
func (b *fileBackend) decode(name string, f shardFile, fast bool, keys map[string]string) (l loaded, ok bool) {
	return decodeShard(filepath.Join(b.dir, name), name, f, fast, keys)
}

// decodeShard checks and reads one shard's content: where names it in
// errors; name, when not empty, is the file it must be in (a shard moved
// to another object's file is refused).
func decodeShard(where, name string, f shardFile, fast bool, keys map[string]string) (l loaded, ok bool) {
	var o addrs.Object
	if f.Object != nil {
		o = addrs.Object{Provider: f.Object.Provider, Kind: f.Object.Kind, Namespace: f.Object.Namespace, Name: f.Object.Name}
	}
	fail := func(err error) (loaded, bool) {
		return loaded{err: &ShardError{File: where, Object: o, Err: err}}, false
	}
	switch {
	case f.Version > Version:
		return fail(fmt.Errorf("%w: written by a newer setpoint release (format %d; this release reads %d)", ErrOldFormat, f.Version, Version))
	case f.Version != Version:
		return fail(fmt.Errorf("%w: format %d, want %d", ErrCorrupt, f.Version, Version))
	case f.Object == nil || len(f.Attrs) == 0:
		return fail(fmt.Errorf("%w: no object or no attrs", ErrCorrupt))
	}
	sum := sha256.Sum256(f.Attrs)
	if hex.EncodeToString(sum[:]) != f.Checksum {
		if fast {
			return loaded{}, false
		}
		// Tolerate a reformatted file (jq): the checksum is of the
		// compact form.
		var c bytes.Buffer
		if json.Compact(&c, f.Attrs) == nil {
			sum = sha256.Sum256(c.Bytes())
		}
		if hex.EncodeToString(sum[:]) != f.Checksum {
			return fail(fmt.Errorf("%w: checksum %s, but its attrs hash to %s", ErrCorrupt, short(f.Checksum), short(hex.EncodeToString(sum[:]))))
		}
	}
	if want := shardName(o); name != "" && want != name {
		return fail(fmt.Errorf("%w: it holds the shard of %s, whose file is %s", ErrCorrupt, o, want))
	}
	var attrs map[string]*Entry
	if fast {
		if attrs, ok = fastAttrs(f.Attrs, keys); !ok {
			return loaded{}, false
		}
	} else if err := json.Unmarshal(f.Attrs, &attrs); err != nil {
		return fail(fmt.Errorf("%w: attrs do not parse: %v", ErrCorrupt, err))
	}
	for k, e := range attrs {
		if e == nil {
			return fail(fmt.Errorf("%w: attribute %s is null", ErrCorrupt, k))
		}
	}
	return loaded{obj: o, attrs: attrs, sum: detectSum(f.Attrs)}, true
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// shard is what Save does with one object's shard.
type shard struct {
	obj  addrs.Object
	x    *Object
	op   uint8
	sum  digest // detectSum of the attributes' bytes as the encoder gives them unchecked
	name string
	data []byte // the file to write
	err  error  // why the shard is refused, or its write failed
	tmp  string // the written, not yet synced temporary file
	done bool
}

const (
	opNone uint8 = iota
	opWrite
	opRemove
)

// saveWorkers bounds the shard writes in flight: each waits mostly on its
// fsync, and concurrent fsyncs share journal commits. (Measured here: 4 to
// 64 all within noise; 16 is in the middle.)
const saveWorkers = 16

// Save serializes every shard to tell the changed ones (in parallel),
// writes those (in parallel, as they are found), removes the emptied ones
// and fsyncs the directory once.
func (b *fileBackend) Save(ctx context.Context, s *State) (SaveStats, error) {
	var st SaveStats
	if err := ctx.Err(); err != nil {
		return st, err
	}
	if err := b.checkPath(); err != nil {
		return st, err
	}
	known := s.saved
	if s.origin != b.id {
		known = nil
	}
	shards := make([]shard, 0, len(s.objects))
	for o, x := range s.objects {
		shards = append(shards, shard{obj: o, x: x})
	}
	for o := range known {
		if _, ok := s.objects[o]; !ok {
			shards = append(shards, shard{obj: o, op: opRemove})
		}
	}
	// Writers start on a changed shard as soon as it is found: their
	// fsyncs wait on the disk while the rest are serialized.
	toWrite := make(chan int, len(shards))
	var (
		failed   atomic.Bool
		mkdir    sync.Once
		mkdirErr error
		writers  sync.WaitGroup
	)
	for range saveWorkers {
		writers.Go(func() {
			for i := range toWrite {
				w := &shards[i]
				mkdir.Do(func() { mkdirErr = b.mkdir() })
				if mkdirErr != nil || failed.Load() || ctx.Err() != nil {
					continue
				}
				if w.tmp, w.err = atomicfile.WriteTemp(filepath.Join(b.dir, w.name), w.data, 0o600); w.err != nil {
					failed.Store(true) // the disk's trouble is every shard's: stop
					continue
				}
			}
		})
	}
	parallel(len(shards), runtime.GOMAXPROCS(0), func() func(int) {
		var enc encoder
		return func(i int) {
			if b.plan(&shards[i], s, known, &enc); shards[i].op == opWrite {
				toWrite <- i
			}
		}
	})
	close(toWrite)
	writers.Wait()
	// One flush makes every temporary file durable (an fsync each cost
	// ~0.4 ms here), then each is renamed over its shard: a crash leaves
	// each shard old or new.
	staged := 0
	for i := range shards {
		if shards[i].tmp != "" {
			staged++
		}
	}
	var syncErr error
	if staged > 0 {
		syncErr = atomicfile.SyncFS(b.dir)
	}
	for i := range shards {
		w := &shards[i]
		if w.tmp == "" {
			continue
		}
		if syncErr == nil {
			if err := os.Rename(w.tmp, filepath.Join(b.dir, w.name)); err != nil {
				w.err = fmt.Errorf("writing the state of %s: %w", w.obj, err)
			} else {
				w.done = true
				continue
			}
		} else {
			w.err = syncErr
		}
		os.Remove(w.tmp)
		failed.Store(true)
	}
	if s.saved == nil || s.origin != b.id {
		s.saved = map[addrs.Object]digest{}
		s.origin = b.id
	}
	var errs []error
	if mkdirErr != nil {
		errs = append(errs, mkdirErr)
	}
	unwritten := 0
	for i := range shards {
		w := &shards[i]
		switch {
		case w.op == opWrite && w.done:
			s.saved[w.obj] = w.sum
			st.Written++
		case w.err != nil:
			errs = append(errs, w.err)
		case w.op == opWrite:
			unwritten++
		case w.op == opRemove && !failed.Load() && mkdirErr == nil:
			err := os.Remove(filepath.Join(b.dir, shardName(w.obj)))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing the state of %s: %w", w.obj, err))
				continue
			}
			delete(s.saved, w.obj)
			st.Removed++
		}
	}
	if err := ctx.Err(); err != nil && unwritten > 0 {
		errs = append(errs, fmt.Errorf("%d shards not written: %w", unwritten, err))
	}
	if st.Written+st.Removed > 0 {
		if err := atomicfile.SyncDir(b.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return st, errors.Join(errs...)
}

// plan decides what Save does with one shard, and serializes it if it is
// to be written.
func (b *fileBackend) plan(w *shard, s *State, known map[addrs.Object]digest, enc *encoder) {
	if w.op == opRemove {
		return
	}
	o := w.obj
	refuse := func(err error) { w.op, w.err = opNone, fmt.Errorf("state of %s not saved: %w", o, err) }
	x := w.x
	det, err := enc.attrs(x, false)
	if err != nil {
		refuse(err)
		return
	}
	if det == nil {
		if _, ok := known[o]; ok {
			w.op = opRemove
		}
		return
	}
	w.sum = detectSum(det)
	if k, ok := known[o]; ok && k == w.sum {
		return
	}
	for _, p := range [...]string{o.Provider, o.Kind, o.Namespace, o.Name} {
		if !utf8.ValidString(p) {
			refuse(fmt.Errorf("the address is not valid UTF-8"))
			return
		}
	}
	w.name = shardName(o)
	if why, bad := s.unreadable[w.name]; bad {
		refuse(fmt.Errorf("its shard %s could not be read (%v) and is not overwritten", filepath.Join(b.dir, w.name), why))
		return
	}
	canon, err := enc.attrs(x, true)
	if err != nil {
		refuse(err)
		return
	}
	w.data = shardBytes(o, sha256.Sum256(canon), canon)
	if len(w.data) > MaxShard {
		refuse(fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(w.data), MaxShard))
		w.data = nil
		return
	}
	w.op = opWrite
}

// parallel runs work(i) for i in [0, n) on up to workers goroutines, each
// with its own work function from newWorker.
func parallel(n, workers int, newWorker func() func(int)) {
	workers = min(n, workers)
	if workers <= 1 {
		if n > 0 {
			w := newWorker()
			for i := range n {
				w(i)
			}
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		w := newWorker()
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				w(i)
			}
		})
	}
	wg.Wait()
}

// mkdir creates the shard directory, durably.
func (b *fileBackend) mkdir() error {
	err := os.Mkdir(b.dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(b.dir), 0o755); err != nil {
			return fmt.Errorf("creating the state directory: %w", err)
		}
		err = os.Mkdir(b.dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(b.dir))
}

// shardBytes is a shard file's content.
func shardBytes(o addrs.Object, sum [sha256.Size]byte, attrs []byte) []byte {
	obj, _ := json.Marshal(objectJSON{Provider: o.Provider, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	out := make([]byte, 0, len(attrs)+len(obj)+128)
	out = append(out, `{"version":`...)
	out = fmt.Appendf(out, "%d", Version)
	out = append(out, `,"object":`...)
	out = append(out, obj...)
	out = append(out, `,"checksum":"`...)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, `","attrs":`...)
	out = append(out, attrs...)
	return append(out, "}\n"...)
}

// readBounded reads a regular file of at most max bytes, not through a
// link: a shard is small, and one that is not is refused unread.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%w: not a regular file of at most %d bytes", ErrCorrupt, max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%w: grew past %d bytes while being read", ErrCorrupt, max)
	}
	return data, err
}
