// Command browser serves a web page that talks to a netcode server from the
// browser: the page fetches a connect token (package backend), connects
// through the WebSocket bridge (package bridge) to a netcode echo server on
// loopback UDP, shows the echoes, and reconnects with a fresh token when
// its session ends.
//
//	go run ./examples/browser -addr 127.0.0.1:8080
//
// then open the printed URL. To serve the page over HTTPS and the relay
// over wss, give a certificate, or let it make a self-signed one (the
// browser then asks you to accept it):
//
//	go run ./examples/browser -tls-cert cert.pem -tls-key key.pem
//	go run ./examples/browser -self-signed
//
// The bridge also serves the relay over WebTransport (HTTP/3 on UDP,
// -webtransport; by default the -addr's host, any port), which the page
// uses where the browser has it: with -tls-cert, with that certificate;
// otherwise with a development certificate the page pins by its hash
// (the browser takes that only from a secure context: https, or a
// loopback address).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gonetcode/netcode/examples/browser/app"
	"github.com/gonetcode/netcode/internal/devcert"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP address to serve the page, the token endpoint and the bridge on")
	udp := flag.String("udp", "127.0.0.1:0", "UDP address of the netcode echo server")
	verbose := flag.Bool("v", false, "log the server's and the bridge's debug messages")
	certFile := flag.String("tls-cert", "", "TLS certificate file (PEM): serve https and wss")
	keyFile := flag.String("tls-key", "", "TLS private key file (PEM) of -tls-cert")
	selfSigned := flag.Bool("self-signed", false, "serve https and wss with a self-signed certificate for localhost (development only)")
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
	tlsCfg, err := tlsConfig(*certFile, *keyFile, *selfSigned)
	if err != nil {
		log.Fatal(err)
	}
	var wtTLS *tls.Config
	if *certFile != "" {
		wtTLS = tlsCfg // the certificate browsers trust; otherwise development ones, pinned by hash
	}
	if err := run(*addr, *udp, *wt, wtTLS, *verbose, tlsCfg); err != nil {
		log.Fatal(err)
	}
}

// tlsConfig loads the certificate, or makes one, or returns nil for plain
// HTTP.
func tlsConfig(certFile, keyFile string, selfSigned bool) (*tls.Config, error) {
	var cert tls.Certificate
	switch {
	case certFile != "" || keyFile != "":
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cert = c
	case selfSigned:
		c, err := devcert.New("localhost", "127.0.0.1", "::1")
		if err != nil {
			return nil, err
		}
		cert = c.TLS
	default:
		return nil, nil
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func run(addr, udp, wt string, wtTLS *tls.Config, verbose bool, tlsCfg *tls.Config) error {
	var logger *slog.Logger
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := app.New(app.Config{ServerAddr: udp, Logger: logger, WebTransportAddr: wt, WebTransportTLS: wtTLS})
	if err != nil {
		return err
	}
	defer a.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	fmt.Printf("netcode server on udp %s\n", a.ServerAddr())
	if wt := a.WebTransportAddr(); wt != nil {
		fmt.Printf("WebTransport on udp %s\n", wt)
	}
	fmt.Printf("open %s://%s/\n", scheme, ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
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
