// Command measure runs a command and prints its wall time, CPU time and peak
// resident set size, which `go test -bench` cannot give for a whole process.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure CMD [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = nil
	cmd.Stdout = nil
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	code := 0
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("wall=%.2fs cpu=%.2fs maxrss=%dMB exit=%d\n", wall.Seconds(), cpu.Seconds(), ru.Maxrss/1024, code)
}
