// Command netcheck is the install tests' workload for the eBPF agent, run
// as pods on the real node (no image can be pulled there).
//
//	netcheck serve   accepts TCP connections on :8080, answers each with
//	                 its name ($HOSTNAME: the pod's) and counts them;
//	                 GET :8081/count says how many it accepted, and
//	                 :8081/metrics is a RouteGroup backend's gauges (an
//	                 idle backend's: no queue, 1 ms, no errors)
//	netcheck dial    GET :8081/dial?to=ADDR&n=N makes N connects to ADDR,
//	                 one after another, and answers which name answered
//	                 each (JSON: {"by": {NAME: COUNT}, "failed": K, "error": LAST})
//
// The test reads both from the node, so the connects a client made are
// counted where they arrived.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// maxDials and dialsFor bound one /dial request.
const (
	maxDials = 10000
	dialsFor = time.Minute
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: netcheck serve|dial")
	}
	name, _ := os.Hostname()
	switch os.Args[1] {
	case "serve":
		serve(name)
	case "dial":
		http.HandleFunc("/dial", dial)
		log.Fatal(stats().ListenAndServe())
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

func serve(name string) {
	var accepted atomic.Int64
	ln, err := net.Listen("tcp", ":8080")
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, accepted.Load())
	})
	http.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "backend_queue_depth 0\nbackend_latency_p95_seconds 0.001\nbackend_error_ratio 0\n")
	})
	go func() { log.Fatal(stats().ListenAndServe()) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		accepted.Add(1)
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintln(c, name)
		}()
	}
}

// stats is the server on :8081, its requests bounded in time.
func stats() *http.Server {
	return &http.Server{Addr: ":8081", ReadHeaderTimeout: 5 * time.Second, WriteTimeout: dialsFor + 10*time.Second}
}

type tally struct {
	By     map[string]int `json:"by"`
	Failed int            `json:"failed"`
	Error  string         `json:"error,omitempty"`
}

func dial(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 1 || n > maxDials {
		http.Error(w, fmt.Sprintf("n: want 1 to %d", maxDials), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialsFor)
	defer cancel()
	t := tally{By: map[string]int{}}
	for range n {
		if ctx.Err() != nil {
			t.Failed++
			t.Error = ctx.Err().Error()
			continue
		}
		name, err := once(ctx, to)
		if err != nil {
			t.Failed++
			t.Error = err.Error()
			continue
		}
		t.By[name]++
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(t)
}

// once connects to addr and reads the name the server answers with.
func once(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the answer of %s: %w", c.RemoteAddr(), err)
	}
	return line[:len(line)-1], nil
}
