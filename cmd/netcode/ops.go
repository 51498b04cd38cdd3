package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cute"
)

// opsReady, if set, is told the address of serve's -metrics endpoint once it
// listens (tests).
var opsReady func(net.Addr)

// opsServer is serve's HTTP endpoint for an orchestrator:
//
//	/metrics  Prometheus metrics: the Listener's Stats, the Go runtime, the process
//	/healthz  200 while the process runs
//	/readyz   200 while the server listens and is not draining, else 503
type opsServer struct {
	srv   *http.Server
	reg   *prometheus.Registry
	ready atomic.Bool
	done  chan error
}

// collect adds a collector to /metrics; nothing without -metrics.
func (o *opsServer) collect(c prometheus.Collector) {
	if o != nil {
		o.reg.MustRegister(c)
	}
}

// startOps serves the endpoint on addr for a server whose Stats stats
// exports (metrics.NewCollector's, or NewCuteCollector's).
func startOps(addr string, stats prometheus.Collector, log *slog.Logger) (*opsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		stats,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	o := &opsServer{reg: reg, done: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if o.ready.Load() {
			plain(w, http.StatusOK, "ready\n")
			return
		}
		plain(w, http.StatusServiceUnavailable, "draining\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	o.ready.Store(true)
	go func() { o.done <- o.srv.Serve(ln) }()
	log.Info("metrics and health endpoints serving", "url", "http://"+ln.Addr().String()+"/metrics")
	if opsReady != nil {
		opsReady(ln.Addr())
	}
	return o, nil
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

// setDraining makes /readyz answer 503.
func (o *opsServer) setDraining() {
	if o != nil {
		o.ready.Store(false)
	}
}

// close stops the endpoint.
func (o *opsServer) close() error {
	if o == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := o.srv.Shutdown(ctx)
	if serr := <-o.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// drainable is a server serve and cute serve drain: a *netcode.Listener
// (netcodeDrain) or a *cute.Listener (cuteDrain).
type drainable interface {
	Drain()
	connected() int
}

// netcodeDrain and cuteDrain are the dialects' Listeners as drainable.
type (
	netcodeDrain struct{ *netcode.Listener }
	cuteDrain    struct{ *cute.Listener }
)

func (l netcodeDrain) connected() int { return l.Stats().Connected }
func (l cuteDrain) connected() int    { return l.Stats().Connected }

// stopServing is what serve and cute serve do once told to stop: deny new
// clients first (the Listener and the registry's entry), then report not
// ready, so that whoever sees /readyz turn 503 can rely on new clients
// being denied; then wait for the connected ones for up to d, or until a
// second signal.
func stopServing(reg *registration, ops *opsServer, l drainable, d time.Duration, log *slog.Logger) {
	reg.drain(l)
	ops.setDraining()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	drain(l, d, again, log)
	signal.Stop(again)
}

// drain denies new clients and waits until the connected ones have left,
// for at most d or until a second signal arrives on stop.
func drain(l drainable, d time.Duration, stop <-chan os.Signal, log *slog.Logger) {
	l.Drain()
	if d <= 0 {
		return
	}
	n := l.connected()
	log.Info("draining: new clients are denied", "clients", n, "for", d)
	if n == 0 {
		log.Info("drained: every client has left")
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			log.Info("drain time is up: closing", "clients", l.connected())
			return
		case <-stop:
			log.Info("second signal: closing", "clients", l.connected())
			return
		case <-poll.C:
			if l.connected() == 0 {
				log.Info("drained: every client has left")
				return
			}
		}
	}
}
