// Package app is the browser example as a library: a netcode echo server on
// loopback UDP, a token endpoint (package backend), the bridge in front of
// the server, over WebSocket and, optionally, WebTransport (package
// bridge/webtransport, on a UDP port of its own), and the page that uses
// them, all behind one http.Handler. The page reconnects with a fresh token whenever its session
// ends. The command in the parent directory serves it over HTTP or HTTPS;
// the browser test drives it in headless Chromium.
package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/crypto"
)

// ProtocolID is the demo's netcode protocol id.
const ProtocolID = 0x62726f7773657231 // "browser1"

//go:embed static/index.html
var static embed.FS

// Config configures an App.
type Config struct {
	// ServerAddr is the UDP address of the netcode echo server; empty means
	// "127.0.0.1:0" (loopback, any port). The bridge may dial it and nothing
	// else.
	ServerAddr string
	// MaxClients is the echo server's number of slots; 0 means 64.
	MaxClients int
	// TokenTimeoutSeconds is the connection timeout written in the demo
	// tokens; 0 means 10.
	TokenTimeoutSeconds int32
	// IdleTimeout is the bridge's: a session without a message from the
	// page for this long is ended (and the page reconnects). 0 means
	// bridge.DefaultIdleTimeout.
	IdleTimeout time.Duration
	// OriginPatterns are the bridge's (bridge.Config.OriginPatterns): the
	// origins, besides the bridge's own host, whose pages may connect.
	OriginPatterns []string
	// WebTransportAddr, if set, is the UDP address ("127.0.0.1:0": any
	// port) on which the bridge also serves the relay over WebTransport,
	// with development certificates that the page pins by hash (it learns
	// them, and the URL, at /webtransport).
	WebTransportAddr string
	// WebTransportHosts are the development certificates' host names and
	// addresses; nil means localhost, 127.0.0.1 and ::1.
	WebTransportHosts []string
	// WebTransportTLS, if set, carries a certificate browsers trust, used
	// instead of development certificates.
	WebTransportTLS *tls.Config
	// Logger receives the server's and the bridge's logs; nil is silent.
	Logger *slog.Logger
}

// App is the example's server side. It is an http.Handler serving:
//
//	GET  /           the page (index.html)
//	GET  /netcode.js the browser module (bridge.JSHandler)
//	POST /token      a fresh 2048-byte connect token for the echo server (backend.Handler)
//	GET  /relay      the WebSocket bridge (bridge.Handler)
//	GET  /webtransport the WebTransport bridge's URLs and certificate hashes (with Config.WebTransportAddr)
type App struct {
	// Listener is the netcode echo server.
	Listener *netcode.Listener
	// Bridge is the relay at /relay.
	Bridge *bridge.Handler
	// WebTransport serves Bridge's sessions over WebTransport; nil
	// without Config.WebTransportAddr.
	WebTransport *webtransport.Server
	// Tokens is the token endpoint at /token.
	Tokens *backend.Handler

	addr   netip.AddrPort
	wtAddr net.Addr // the WebTransport socket's, from its bind
	mux    *http.ServeMux
	wg     sync.WaitGroup
}

// New starts the echo server and returns the App. Close stops it.
func New(cfg Config) (*App, error) {
	if cfg.ServerAddr == "" {
		cfg.ServerAddr = "127.0.0.1:0"
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = 64
	}
	if cfg.TokenTimeoutSeconds == 0 {
		cfg.TokenTimeoutSeconds = 10
	}
	// The private key is shared by the server and the token endpoint only;
	// the browser never sees it.
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	l, err := netcode.Listen("udp", cfg.ServerAddr, &netcode.ServerConfig{
		ProtocolID: ProtocolID,
		PrivateKey: key,
		MaxClients: cfg.MaxClients,
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddrPort(l.Addr().String())
	if err != nil || addr.Addr().IsUnspecified() {
		l.Close()
		return nil, fmt.Errorf("app: the echo server needs a concrete address, not %v", l.Addr())
	}
	tokens, err := backend.NewHandler(&backend.Config{
		ProtocolID:     ProtocolID,
		PrivateKey:     key,
		Authenticate:   anyone,
		Servers:        []backend.Server{{Addr: addr}},
		ExpireSeconds:  60,
		TimeoutSeconds: cfg.TokenTimeoutSeconds,
		Logger:         cfg.Logger,
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	a := &App{
		Listener: l,
		Tokens:   tokens,
		addr:     addr,
		mux:      http.NewServeMux(),
	}
	a.Bridge = bridge.NewHandler(&bridge.Config{
		AllowedServers: []netip.AddrPort{addr},
		IdleTimeout:    cfg.IdleTimeout,
		OriginPatterns: cfg.OriginPatterns,
		Logger:         cfg.Logger,
	})
	if cfg.WebTransportAddr != "" {
		if err := a.serveWebTransport(cfg); err != nil {
			a.Bridge.Close()
			l.Close()
			return nil, err
		}
		a.mux.Handle("GET /webtransport", a.WebTransport.InfoHandler())
	}
	a.mux.HandleFunc("GET /{$}", a.page)
	a.mux.Handle("GET /netcode.js", bridge.JSHandler())
	a.mux.Handle("/token", tokens) // it answers 405 to anything but POST
	a.mux.Handle("GET /relay", a.Bridge)
	a.wg.Add(1)
	go a.serve()
	return a, nil
}

// serveWebTransport starts the WebTransport server of the bridge.
func (a *App) serveWebTransport(cfg Config) error {
	wts, err := webtransport.NewServer(&webtransport.Config{
		Relay:     a.Bridge,
		TLSConfig: cfg.WebTransportTLS,
		DevHosts:  cfg.WebTransportHosts,
		Logger:    cfg.Logger,
	})
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", cfg.WebTransportAddr)
	if err != nil {
		return err
	}
	a.WebTransport = wts
	a.wtAddr = pc.LocalAddr()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		wts.Serve(pc) // until Close
	}()
	return nil
}

// ServerAddr returns the echo server's UDP address.
func (a *App) ServerAddr() netip.AddrPort { return a.addr }

// WebTransportAddr returns the UDP address WebTransport is served on, nil
// when it is off. It is known from New's return, before the goroutine
// serving it has begun (WebTransport.Addr is nil until then).
func (a *App) WebTransportAddr() net.Addr { return a.wtAddr }

// ServeHTTP serves the page, the module, the token endpoint and the bridge.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Close ends every bridge session and stops the echo server.
func (a *App) Close() error {
	err := a.Bridge.Close()
	if a.WebTransport != nil {
		err = errors.Join(err, a.WebTransport.Close())
	}
	err = errors.Join(err, a.Listener.Close())
	a.wg.Wait()
	return err
}

func (a *App) page(w http.ResponseWriter, r *http.Request) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// anyone is the demo's authentication hook: every caller is a new player
// with a random client id. A real game checks a session cookie or a bearer
// token here (see examples/backend) and returns the player's own id.
func anyone(*http.Request) (backend.Identity, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return backend.Identity{}, err
	}
	return backend.Identity{ClientID: binary.LittleEndian.Uint64(id[:]) | 1}, nil
}

// serve accepts clients and echoes every payload back to its sender.
func (a *App) serve() {
	defer a.wg.Done()
	for {
		c, err := a.Listener.AcceptConn(context.Background())
		if err != nil {
			return
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer c.Close()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}
