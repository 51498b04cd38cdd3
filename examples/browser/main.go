// Command browser serves a web page that talks to a netcode server from the
// browser: the page fetches a connect token, connects through the WebSocket
// bridge (package bridge) to a netcode echo server on loopback UDP, and
// shows the echoes.
//
//	go run ./examples/browser -addr 127.0.0.1:8080
//
// then open the printed URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/gonetcode/netcode/examples/browser/app"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP address to serve the page, the token endpoint and the bridge on")
	udp := flag.String("udp", "127.0.0.1:0", "UDP address of the netcode echo server")
	verbose := flag.Bool("v", false, "log the server's and the bridge's debug messages")
	flag.Parse()
	if err := run(*addr, *udp, *verbose); err != nil {
		log.Fatal(err)
	}
}

func run(addr, udp string, verbose bool) error {
	var logger *slog.Logger
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := app.New(app.Config{ServerAddr: udp, Logger: logger})
	if err != nil {
		return err
	}
	defer a.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("netcode server on udp %s\n", a.ServerAddr())
	fmt.Printf("open http://%s/\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Sessions are hijacked connections, which Shutdown does not wait for:
	// the bridge ends them.
	a.Bridge.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
