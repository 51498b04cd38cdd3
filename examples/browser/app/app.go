// Package app is the browser example as a library: a netcode echo server on
// loopback UDP, a demo token endpoint, the WebSocket bridge in front of the
// server, and the page that uses them, all behind one http.Handler. The
// command in the parent directory serves it; the browser test drives it in
// headless Chromium.
package app

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
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
	// Logger receives the server's and the bridge's logs; nil is silent.
	Logger *slog.Logger
}

// App is the example's server side. It is an http.Handler serving:
//
//	GET  /           the page (index.html)
//	GET  /netcode.js the browser module (bridge.JSHandler)
//	POST /token      a fresh 2048-byte connect token for the echo server
//	GET  /relay      the WebSocket bridge (bridge.Handler)
type App struct {
	// Listener is the netcode echo server.
	Listener *netcode.Listener
	// Bridge is the relay at /relay.
	Bridge *bridge.Handler

	key     [netcode.KeyBytes]byte
	addr    netip.AddrPort
	timeout int32
	mux     *http.ServeMux
	wg      sync.WaitGroup
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
	a := &App{
		Listener: l,
		key:      key,
		addr:     addr,
		timeout:  cfg.TokenTimeoutSeconds,
		mux:      http.NewServeMux(),
	}
	a.Bridge = bridge.NewHandler(bridge.Config{
		AllowedServers: []netip.AddrPort{addr},
		Logger:         cfg.Logger,
	})
	a.mux.HandleFunc("GET /{$}", a.page)
	a.mux.Handle("GET /netcode.js", bridge.JSHandler())
	a.mux.HandleFunc("POST /token", a.token)
	a.mux.Handle("GET /relay", a.Bridge)
	a.wg.Add(1)
	go a.serve()
	return a, nil
}

// ServerAddr returns the echo server's UDP address.
func (a *App) ServerAddr() netip.AddrPort { return a.addr }

// ServeHTTP serves the page, the module, the token endpoint and the bridge.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Close ends every bridge session and stops the echo server.
func (a *App) Close() error {
	err := a.Bridge.Close()
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

// token mints a demo connect token. A real backend authenticates the
// player first and picks the servers; this one hands a token to anyone.
func (a *App) token(w http.ResponseWriter, r *http.Request) {
	var id [8]byte
	rand.Read(id[:])
	tok, err := token.Generate(token.Params{
		ProtocolID:     ProtocolID,
		ClientID:       binary.LittleEndian.Uint64(id[:]),
		PrivateKey:     a.key,
		ServerAddrs:    []netip.AddrPort{a.addr},
		ExpireSeconds:  60,
		TimeoutSeconds: a.timeout,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	w.Write(tok)
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
