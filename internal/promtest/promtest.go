// Package promtest runs a real Prometheus server (Debian's prometheus) on
// loopback for tests, scraping the targets a test serves.
package promtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running Prometheus.
type Server struct {
	URL string
	cmd *exec.Cmd
	log *os.File
}

// Start runs Prometheus scraping targets (host:port) every second, and
// stops it at the end of the test. A missing binary fails the test and
// names make testenv.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	s, err := Run(t.TempDir(), targets...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Run runs Prometheus scraping targets every second, its configuration,
// data and log under dir, until Close (or until this process dies).
func Run(dir string, targets ...string) (*Server, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, fmt.Errorf("prometheus is not installed: run make testenv (Debian's prometheus)")
	}
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: test\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  static_configs: [{targets: [%s]}]\n", strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, log: logf}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			s.Close()
			return nil, fmt.Errorf("prometheus not ready in 30s:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops Prometheus.
func (s *Server) Close() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.log.Close()
}
