// Command serve builds the WebAssembly netcode client (../) and serves it
// with a page, a token endpoint and a netcode echo server that accepts UDP
// clients and, over WebTransport or the WebSocket transport, the browser:
//
//	go run ./examples/wasm/serve -addr 127.0.0.1:8080
//
// WebTransport runs on UDP (-webtransport, by default the -addr's host,
// any port) with a development certificate the page pins by hash; open
// the page at a loopback address (a secure context) for the browser to
// use it.
//
// then open the printed URL. Run it from inside the module's source tree
// (it runs "go build" for GOOS=js GOARCH=wasm).
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

	"github.com/gonetcode/netcode/examples/wasm/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP address to serve the page, the client and the transport on")
	udp := flag.String("udp", "127.0.0.1:0", "UDP address of the netcode echo server")
	verbose := flag.Bool("v", false, "log the server's debug messages")
	wt := flag.String("webtransport", "", `UDP address of the WebTransport endpoint; "" means the -addr's host, any port; "off" for none`)
	flag.Parse()
	if *wt == "" {
		host, _, err := net.SplitHostPort(*addr)
		if err != nil {
			log.Fatal(err)
		}
		*wt = net.JoinHostPort(host, "0")
	} else if *wt == "off" {
		*wt = ""
	}
	if err := run(*addr, *udp, *wt, *verbose); err != nil {
		log.Fatal(err)
	}
}

func run(addr, udp, wt string, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "netcode-wasm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("building the WebAssembly client")
	wasm, wasmExec, err := server.BuildClient(ctx, dir)
	if err != nil {
		return err
	}
	var logger *slog.Logger
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := server.New(server.Config{UDPAddr: udp, WASM: wasm, WASMExec: wasmExec, Logger: logger, WebTransportAddr: wt})
	if err != nil {
		return err
	}
	defer s.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("netcode server on udp %s\n", s.UDPAddr())
	if wt := s.WebTransportAddr(); wt != nil {
		fmt.Printf("WebTransport on udp %s\n", wt)
	}
	fmt.Printf("open http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
