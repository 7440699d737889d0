package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/setpoint-dev/setpoint/cue/isolate"
	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// newInternalCmd groups the commands setpoint runs as its own children;
// they are no interface for users, so they are hidden.
func newInternalCmd() *cobra.Command {
	c := &cobra.Command{Use: "internal", Short: "Commands setpoint runs in its own child processes", Hidden: true}
	c.AddCommand(&cobra.Command{
		Use:   "eval-cue",
		Short: "Evaluate the .cue spec files named on stdin and write the results to stdout (isolate.Serve)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := isolate.Serve(os.Stdin, os.Stdout); err != nil {
				return fmt.Errorf("eval-cue: %w", err)
			}
			return nil
		},
	})
	c.AddCommand(newDocsCmd())
	return c
}

// minCUEMemory is below what the child needs to compile the schemas: a
// smaller bound would fail every .cue file without evaluating it.
const minCUEMemory = 64 << 20

// cueLimits bound the child process that evaluates .cue spec files.
// SETPOINT_CUE_TIMEOUT and SETPOINT_CUE_MEMORY set them for every command;
// validate's flags override them.
type cueLimits struct {
	timeout time.Duration
	memory  byteSize
	// How a user names each setting, for the messages of a breach.
	timeoutName, memoryName string
	envErr                  error // an unreadable variable, said when used
}

func defaultCUELimits() cueLimits {
	c := cueLimits{timeout: isolate.DefaultTimeout, memory: isolate.DefaultMemory,
		timeoutName: "SETPOINT_CUE_TIMEOUT", memoryName: "SETPOINT_CUE_MEMORY"}
	if v := os.Getenv("SETPOINT_CUE_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err != nil {
			c.envErr = fmt.Errorf("SETPOINT_CUE_TIMEOUT=%q: %w", v, err)
		} else {
			c.timeout = d
		}
	}
	if v := os.Getenv("SETPOINT_CUE_MEMORY"); v != "" {
		if err := c.memory.Set(v); err != nil {
			c.envErr = fmt.Errorf("SETPOINT_CUE_MEMORY=%q: %w", v, err)
		}
	}
	return c
}

// addFlags makes the limits flags of a command, defaulting to what the
// environment says.
func (c *cueLimits) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.timeout, "cue-timeout", c.timeout, "wall-clock bound on evaluating the .cue spec files, all together (env SETPOINT_CUE_TIMEOUT)")
	fs.Var(&c.memory, "cue-memory", "memory bound of the process evaluating .cue spec files, e.g. 512Mi (env SETPOINT_CUE_MEMORY)")
	c.timeoutName, c.memoryName = "--cue-timeout", "--cue-memory"
}

func (c cueLimits) check() error {
	switch {
	case c.envErr != nil:
		return c.envErr
	case c.timeout <= 0:
		return fmt.Errorf("%s %s: must be positive", c.timeoutName, c.timeout)
	case c.memory < minCUEMemory:
		return fmt.Errorf("%s %s: below the %s the CUE evaluator needs to start", c.memoryName, spec.Bytes(c.memory), spec.Bytes(minCUEMemory))
	}
	return nil
}

// newLoader returns a loader that stops between files when ctx ends and
// evaluates .cue files in a bounded child process of this binary
// (SETPOINT_CUE=in-process keeps them here, for debugging).
func newLoader(ctx context.Context, c cueLimits) (*load.Loader, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	l, err := load.New()
	if err != nil {
		return nil, err
	}
	l.Ctx = ctx
	if os.Getenv("SETPOINT_CUE") == "in-process" {
		return l, nil
	}
	self, err := selfBinary()
	if err != nil {
		return nil, err
	}
	l.CUE = &isolate.Evaluator{Binary: self, Args: []string{"internal", "eval-cue"},
		Timeout: c.timeout, Memory: int64(c.memory), TimeoutFlag: c.timeoutName, MemoryFlag: c.memoryName}
	return l, nil
}

// byteSize is a flag of a memory quantity: 512Mi, 1Gi, 1G, 1073741824 (a
// trailing B, as in 512MiB, is accepted too).
type byteSize int64

func (b *byteSize) String() string { return spec.Bytes(*b).String() }

func (b *byteSize) Set(s string) error {
	v, err := spec.ParseBytes(strings.TrimSuffix(strings.TrimSpace(s), "B"))
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

func (b *byteSize) Type() string { return "quantity" }
