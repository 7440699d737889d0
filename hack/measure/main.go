// Command measure runs a command and prints its wall time, CPU time and peak
// resident set size, which `go test -bench` cannot give for a whole process.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/setpoint-dev/setpoint/internal/procstat"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure CMD [ARGS...]")
		os.Exit(2)
	}
	u, err := procstat.Run(os.Args[1], os.Args[2:]...)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		code = ee.ExitCode()
	}
	fmt.Printf("wall=%.2fs cpu=%.2fs maxrss=%dMB exit=%d\n", u.Wall.Seconds(), u.CPU.Seconds(), u.MaxRSS>>20, code)
}
