package plugin

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// parentCheck is how often a provider checks that setpoint still runs.
const parentCheck = 500 * time.Millisecond

// dieWithParent makes a provider process end with setpoint: on SIGTERM,
// and when its parent is gone. The parent's Pdeathsig covers most deaths,
// but it fires when the thread that started the child exits, which a Go
// runtime may do first; the re-parenting check covers the rest.
func dieWithParent() {
	parent := os.Getppid()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		t := time.NewTicker(parentCheck)
		defer t.Stop()
		for {
			select {
			case <-term:
				os.Exit(0)
			case <-t.C:
				if os.Getppid() != parent {
					os.Exit(1)
				}
			}
		}
	}()
}
