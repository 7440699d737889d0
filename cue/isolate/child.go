package isolate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// ExitMemory is the child's exit status when its heap watchdog finds it
// over the memory bound: distinct from a crash (2), a failure (1) and a
// kill by signal.
const ExitMemory = 86

// watchdogPeriod is how often the child reads its own memory use. The
// evaluator allocates in the order of 100 MB/s, so the bound is overshot
// by a few MB at most; a cgroup, where there is one, is exact.
const watchdogPeriod = 50 * time.Millisecond

// Serve is the child's side: it reads one request from in, loads each
// file with a Loader of its own and writes the results to out as JSON
// lines. It is what `setpoint internal eval-cue` runs; any error is the
// parent's to report (it has gone, or the protocol broke).
func Serve(in io.Reader, out io.Writer) error {
	// The parent enforces the time bound and kills this process on its way
	// out (Pdeathsig); Pdeathsig fires when the parent's thread that
	// started it ends, which a Go runtime may do early, so this process
	// also ends once it is re-parented.
	go exitWithParent(os.Getppid())
	// Compiling the schemas takes a while: do it while the parent puts this
	// process in its cgroup, before the request arrives.
	l, err := load.New()
	if err != nil {
		return fmt.Errorf("compiling the schemas: %w", err)
	}
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	if req.Memory > 0 {
		go watchdog(req.Memory)
	}
	l.SetOptions(req.Options)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	// The documents' JSON travels as bytes; diagnostics need no escaping
	// for a browser either.
	enc.SetEscapeHTML(false)
	send := func(m message) error {
		if err := enc.Encode(m); err != nil {
			return fmt.Errorf("writing to the parent: %w", err)
		}
		// Each message goes out at once: a Start must reach the parent
		// before the evaluation that may get this process killed.
		if err := w.Flush(); err != nil {
			return fmt.Errorf("writing to the parent: %w", err)
		}
		return nil
	}
	for _, f := range req.Files {
		if err := send(message{Start: f}); err != nil {
			return err
		}
		var sendErr error
		diags := l.LoadFile(f, func(d spec.Document) {
			if sendErr == nil {
				sendErr = send(message{Doc: encodeDoc(d, l.EmittedJSON())})
			}
		})
		if sendErr != nil {
			return sendErr
		}
		for i := range diags {
			if err := send(message{Diag: &diags[i]}); err != nil {
				return err
			}
		}
		if err := send(message{Done: f}); err != nil {
			return err
		}
	}
	return nil
}

// watchdog ends the process with ExitMemory once the memory the Go runtime
// holds from the system exceeds limit. It is the bound where no cgroup can
// be made (not root, no memory controller), and a second one where it can.
func watchdog(limit int64) {
	// A soft limit below the bound makes the collector work hard before
	// garbage alone could trip the watchdog: only a live heap near the
	// bound ends the process.
	debug.SetMemoryLimit(limit - limit/8)
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	t := time.NewTicker(watchdogPeriod)
	defer t.Stop()
	for range t.C {
		metrics.Read(samples)
		// Released pages are mapped but given back to the system: not
		// used.
		used := int64(samples[0].Value.Uint64()) - int64(samples[1].Value.Uint64())
		if used > limit {
			fmt.Fprintf(os.Stderr, "setpoint: CUE evaluation uses %d MiB, over its bound of %d MiB\n", used>>20, limit>>20)
			os.Exit(ExitMemory)
		}
	}
}

// exitWithParent ends the process when its parent is no longer parent.
func exitWithParent(parent int) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if os.Getppid() != parent {
			os.Exit(1)
		}
	}
}
