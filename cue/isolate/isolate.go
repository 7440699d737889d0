// Package isolate evaluates CUE spec files in a child process bounded in
// time and memory. CUE's evaluator cannot be cancelled once it runs, and a
// 200-byte file (a comprehension over list.Range(0, 50000000, 1)) takes it
// to gigabytes: in process, that is an out-of-memory crash of setpoint and
// an interrupt that does nothing. Here one re-executed child evaluates the
// batch; the parent kills it at the time limit or on cancellation, and a
// cgroup (as root) or the child's own heap watchdog bounds its memory. A
// breach costs the file being evaluated: the child says which file it
// starts before evaluating it.
package isolate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Defaults of the bounds: far above what a spec needs (the shipped specs
// take about 40 MB and 100 ms), far below what hurts a CI runner.
const (
	DefaultTimeout = 60 * time.Second
	DefaultMemory  = 1 << 30
)

// Evaluator is a load.CUEEvaluator that evaluates in a child process.
type Evaluator struct {
	// Binary and Args start the child, which must call Serve with its
	// stdin and stdout (setpoint: the binary, "internal", "eval-cue").
	Binary string
	Args   []string
	// Env is added to the child's environment.
	Env []string
	// Timeout bounds the whole batch's wall-clock time; Memory bounds
	// each child, in bytes. Zero means the default.
	Timeout time.Duration
	Memory  int64
	// TimeoutFlag and MemoryFlag name the settings in messages, so that
	// a user who hits a bound knows what to change.
	TimeoutFlag, MemoryFlag string
	// Log receives debug lines (each file as it starts, with the child's
	// pid); slog.Default() when nil.
	Log *slog.Logger

	// Tests switch off one bound to see the other work alone.
	noCgroup, noWatchdog bool
}

var _ load.CUEEvaluator = (*Evaluator)(nil)

func (e *Evaluator) timeout() time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return DefaultTimeout
}

func (e *Evaluator) memory() int64 {
	if e.Memory > 0 {
		return e.Memory
	}
	return DefaultMemory
}

func (e *Evaluator) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// breach is why a child ended before finishing its files.
type breach int

const (
	noBreach breach = iota
	overMemory
	overTime
	interrupted // the caller's context ended
	crashed
)

// outcome is what one child did: the files it finished, whether it had
// started the next one, and if it ended early, why and how.
type outcome struct {
	finished int
	started  bool
	breach   breach
	detail   string // for a crash: the exit status and the child's first words
}

// EvalCUE evaluates files in children: one for the batch, and after a file
// breaks the memory bound or crashes the evaluator, a new one for the
// files after it (the time limit is the batch's, so time that ran out ends
// the batch). A file left out of the result was not evaluated because ctx
// ended.
func (e *Evaluator) EvalCUE(ctx context.Context, opts load.Options, files []string) map[string]load.FileResult {
	out := make(map[string]load.FileResult, len(files))
	tctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	paths := map[string]string{}
	for rest := files; len(rest) > 0; {
		o := e.run(ctx, tctx, opts, rest, out, paths)
		switch {
		case o.breach == noBreach || o.breach == interrupted:
			return out
		case o.breach == overTime && !o.started:
			// The time ran out between files: none is to blame.
			for _, g := range rest[o.finished:] {
				out[g] = diagResult(g, fmt.Sprintf("not evaluated: CUE files had used up their %s%s", e.timeout(), e.hint(e.TimeoutFlag)))
			}
			return out
		case !o.started && o.finished > 0:
			// The child ended between two files; a new one goes on.
			rest = rest[o.finished:]
			continue
		case !o.started:
			// The child ended before its first file: no file is to
			// blame, and another child would do the same.
			for _, g := range rest {
				out[g] = diagResult(g, "could not be evaluated: the CUE evaluator stopped before evaluating it: "+o.detail)
			}
			return out
		}
		f := rest[o.finished]
		rest = rest[o.finished+1:]
		switch o.breach {
		case overMemory:
			out[f] = diagResult(f, fmt.Sprintf("evaluating this file used more than %s of memory%s", humanBytes(e.memory()), e.hint(e.MemoryFlag)))
		case crashed:
			out[f] = diagResult(f, "the CUE evaluator crashed on this file: "+o.detail)
		case overTime:
			out[f] = diagResult(f, fmt.Sprintf("evaluating CUE files took longer than %s; this file was being evaluated when the time ran out%s", e.timeout(), e.hint(e.TimeoutFlag)))
			for _, g := range rest {
				out[g] = diagResult(g, fmt.Sprintf("not evaluated: CUE files had used up their %s%s", e.timeout(), e.hint(e.TimeoutFlag)))
			}
			return out
		}
	}
	return out
}

func (e *Evaluator) hint(flag string) string {
	if flag == "" {
		return ""
	}
	return " (limit: " + flag + ")"
}

// diagResult is a file's result that is one diagnostic at its start.
func diagResult(file, msg string) load.FileResult {
	return load.FileResult{Diags: load.Diagnostics{{Pos: spec.Pos{File: file, Line: 1, Col: 1}, Message: msg}}}
}

// humanBytes prints a bound as users write it ("256 MiB").
func humanBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d %s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// run starts one child on files and records each file it finishes in out.
// ctx is the caller's (its end is an interrupt), tctx the batch's deadline.
func (e *Evaluator) run(ctx, tctx context.Context, opts load.Options, files []string, out map[string]load.FileResult, paths map[string]string) outcome {
	cmd := exec.Command(e.Binary, e.Args...)
	cmd.Env = append(os.Environ(), e.Env...)
	// The child dies with this process, however this process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &headBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	var cg *cgroup
	var err error
	if e.noCgroup {
		err = errors.New("switched off")
	} else {
		cg, err = newCgroup(e.memory())
	}
	if err != nil {
		// Not root, or no memory controller: the watchdog alone bounds it.
		e.log().Debug("no cgroup for CUE evaluation; the child's heap watchdog bounds its memory", "reason", err)
	} else {
		// Runs after the child is reaped: a cgroup with a process in it
		// cannot be removed.
		defer func() {
			if cg == nil {
				return
			}
			if err := cg.remove(); err != nil {
				e.log().Warn("leaving a cgroup behind", "err", err)
			}
		}()
		if cg.v2 {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = cg.fd
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return outcome{breach: crashed, detail: fmt.Sprintf("starting it: %v", err)}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return outcome{breach: crashed, detail: fmt.Sprintf("starting it: %v", err)}
	}
	if err := cmd.Start(); err != nil {
		return outcome{breach: crashed, detail: fmt.Sprintf("starting %s: %v", e.Binary, err)}
	}
	// From here the child is killed when the time is up or the caller
	// gives up, and always reaped before returning.
	stop := context.AfterFunc(tctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	if cg != nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			e.log().Debug("could not put the CUE child in its cgroup; its heap watchdog bounds its memory", "err", err)
			_ = cg.remove()
			cg = nil
		}
	}
	// The request goes last: the child evaluates nothing before it is in
	// its cgroup.
	watch := e.memory()
	if e.noWatchdog {
		watch = 0
	}
	req, err := json.Marshal(request{Files: files, Options: opts, Memory: watch})
	if err == nil {
		_, err = stdin.Write(req)
	}
	stdin.Close()
	if err != nil {
		// The child died already; its exit status says why.
		e.log().Debug("writing the request to the CUE child", "err", err)
	}
	// What the child sends is kept here, in the parent: it is bounded by
	// the same figure as the child's memory, or a small file expanding to
	// huge documents would take the parent's memory instead.
	capped := &capReader{r: stdout, left: e.memory()}
	o, garbled := e.read(capped, files, out, paths, cmd.Process.Pid)
	if capped.over {
		garbled = ""
		_ = cmd.Process.Kill()
	}
	if garbled != "" {
		// The child is alive and talking nonsense: stop it.
		_ = cmd.Process.Kill()
	}
	// Drain what is left so the child never blocks writing, then reap it.
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	e.log().Debug("CUE child ended", "pid", cmd.Process.Pid, "status", cmd.ProcessState.String(), "files", o.finished, "of", len(files),
		"cgroup", cg != nil, "oomKilled", cg != nil && cg.oomKilled())
	if o.finished == len(files) {
		return outcome{finished: o.finished}
	}
	switch {
	case capped.over:
		o.breach = overMemory
	case ctx.Err() != nil:
		o.breach = interrupted
	case tctx.Err() != nil:
		o.breach = overTime
	case cg != nil && cg.oomKilled():
		o.breach = overMemory
	case exitCode(werr) == ExitMemory:
		o.breach = overMemory
	case garbled != "":
		o.breach, o.detail = crashed, garbled
	default:
		o.breach, o.detail = crashed, describeExit(werr, stderr.String())
	}
	return o
}

// read consumes the child's messages until it stops writing (done, or
// killed). A message out of order ends the reading, and garbled says how.
func (e *Evaluator) read(stdout io.Reader, files []string, out map[string]load.FileResult, paths map[string]string, pid int) (p outcome, garbled string) {
	var cur load.FileResult
	dec := json.NewDecoder(bufio.NewReader(stdout))
	for p.finished < len(files) {
		var m message
		if err := dec.Decode(&m); err != nil {
			// The end of the output, cut anywhere when the child was
			// killed, is how a child ends; anything else is a bug.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return p, ""
			}
			return p, fmt.Sprintf("unreadable output: %v", err)
		}
		want := files[p.finished]
		switch {
		case m.Start != "":
			if m.Start != want || p.started {
				return p, fmt.Sprintf("started %s, expected %s", m.Start, want)
			}
			p.started, cur = true, load.FileResult{}
			e.log().Debug("evaluating CUE file", "file", want, "pid", pid)
		case m.Doc != nil && p.started:
			d, err := m.Doc.decode(paths)
			if err != nil {
				// A document the child decoded must decode here: the
				// same code on the same bytes.
				cur.Diags = append(cur.Diags, load.Diagnostic{Pos: m.Doc.Pos, Message: "internal error: " + err.Error()})
				continue
			}
			cur.Documents = append(cur.Documents, d)
		case m.Diag != nil && p.started:
			cur.Diags = append(cur.Diags, *m.Diag)
		case m.Done != "" && m.Done == want && p.started:
			out[want] = cur
			p.finished++
			p.started = false
		default:
			return p, "a message out of order"
		}
	}
	return p, ""
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// describeExit says how a child ended, with the first line it wrote (a Go
// panic's message; the stack after it is for a debugger, not a user).
func describeExit(err error, stderr string) string {
	what := "it exited with status 0 before finishing"
	if err != nil {
		what = err.Error()
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n"); line != "" {
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		what += ": " + line
	}
	return what
}

// headBuffer keeps the first max bytes written to it and discards the rest.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// capReader reads at most left bytes, then fails: the child's output is
// bounded as its memory is.
type capReader struct {
	r    io.Reader
	left int64
	over bool
}

var errOutputCap = errors.New("the CUE child's output passed its bound")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.over = true
		return 0, errOutputCap
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
