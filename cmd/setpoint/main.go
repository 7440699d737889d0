// Command setpoint reconciles run-time capacity with declared specs.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// errSilent marks an error whose details were already printed (for example
// validation diagnostics); main only sets the exit code.
var errSilent = errors.New("failed")

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		if errors.Is(err, errChanges) {
			return 2
		}
		if !errors.Is(err, errSilent) {
			fmt.Fprintln(root.ErrOrStderr(), "error:", err)
		}
		return 1
	}
	return 0
}
