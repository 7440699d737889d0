// Command pause is the real node's sandbox (pause) image: the process that
// holds a pod's namespaces. It reaps the children it inherits as PID 1 and
// exits on SIGINT or SIGTERM. No image can be pulled on the test machines,
// so internal/kubetest builds this one and imports it into containerd.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
