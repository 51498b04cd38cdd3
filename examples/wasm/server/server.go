// Package server is the server side of the WebAssembly example: a netcode
// echo server whose Listener runs over a transport.Mux, so that it serves UDP
// clients and, end to end encrypted over WebSocket, the Go client compiled
// to WebAssembly (package examples/wasm) running in a browser. Each
// connection carries a reliable.Session with the channels of package wire;
// the server echoes every message on the channel it came on, reliable
// messages of up to wire.MaxReliableMessage bytes and unreliable ones. One
// http.Handler serves:
//
//	GET  /             the page
//	GET  /wasm_exec.js Go's WebAssembly support script
//	GET  /main.wasm    the client
//	POST /token        a fresh connect token for the echo server
//	GET  /netcode      the WebSocket transport (transport.Mux.Handler)
//	GET  /webtransport the WebTransport endpoint's URL and certificate hashes (with Config.WebTransportAddr)
//
// The command in ../serve serves it; the browser test drives it in headless
// Chromium.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/examples/wasm/wire"
	"github.com/gonetcode/netcode/reliable"
	"github.com/gonetcode/netcode/token"
)

// ProtocolID is the example's netcode protocol id.
const ProtocolID = 0x7761736d65636831 // "wasmech1"

//go:embed index.html
var page []byte

// Config configures a Server.
type Config struct {
	// UDPAddr is the UDP address of the echo server; empty means
	// "127.0.0.1:0". Connect tokens name it, for UDP and WebSocket clients
	// alike.
	UDPAddr string
	// MaxClients is the echo server's number of slots; 0 means 64.
	MaxClients int
	// WASM is the compiled client (see BuildClient); WASMExec is Go's
	// wasm_exec.js of the same Go version.
	WASM, WASMExec []byte
	// Logger receives the server's logs; nil is silent.
	Logger *slog.Logger
	// OnMessage, if set, is called with each message received, before
	// its echo, from the client's goroutine for that channel; msg is
	// valid only during the call.
	OnMessage func(from net.Addr, channel int, msg []byte)
	// WebTransportAddr, if set, is the UDP address ("127.0.0.1:0": any
	// port) on which the Mux also takes clients over WebTransport, with
	// development certificates that the page pins by hash (it learns them,
	// and the URL, at /webtransport).
	WebTransportAddr string
}

// Server is the example's server side; it is an http.Handler.
type Server struct {
	// Listener is the netcode echo server, over Mux.
	Listener *netcode.Listener
	// Mux merges the UDP socket and the WebSocket transport.
	Mux *transport.Mux
	// WebTransport serves the Mux's sessions over WebTransport; nil
	// without Config.WebTransportAddr.
	WebTransport *webtransport.Server

	key       crypto.Key
	addr      netip.AddrPort
	wtAddr    net.Addr // the WebTransport socket's, from its bind
	wasm      []byte
	wasmExec  []byte
	onMessage func(from net.Addr, channel int, msg []byte)
	http      *http.ServeMux
	wg        sync.WaitGroup
}

// New starts the echo server. Close stops it.
func New(cfg Config) (*Server, error) {
	if cfg.UDPAddr == "" {
		cfg.UDPAddr = "127.0.0.1:0"
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = 64
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", cfg.UDPAddr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddrPort(udp.LocalAddr().String())
	if err != nil || addr.Addr().IsUnspecified() {
		udp.Close()
		return nil, fmt.Errorf("server: the echo server needs a concrete address, not %v", udp.LocalAddr())
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	mux := transport.NewMux(udp, &transport.MuxConfig{Logger: cfg.Logger})
	l, err := netcode.NewListener(mux, &netcode.ServerConfig{
		ProtocolID: ProtocolID,
		PrivateKey: key,
		MaxClients: cfg.MaxClients,
		Logger:     cfg.Logger,
	})
	if err != nil {
		mux.Close()
		return nil, err
	}
	s := &Server{
		Listener:  l,
		Mux:       mux,
		key:       key,
		addr:      addr,
		wasm:      cfg.WASM,
		wasmExec:  cfg.WASMExec,
		onMessage: cfg.OnMessage,
		http:      http.NewServeMux(),
	}
	s.http.HandleFunc("GET /{$}", s.file("text/html; charset=utf-8", page))
	s.http.HandleFunc("GET /wasm_exec.js", s.file("text/javascript; charset=utf-8", s.wasmExec))
	s.http.HandleFunc("GET /main.wasm", s.file("application/wasm", s.wasm))
	s.http.HandleFunc("POST /token", s.token)
	s.http.Handle("GET /netcode", mux.Handler())
	if cfg.WebTransportAddr != "" {
		if err := s.serveWebTransport(cfg); err != nil {
			l.Close()
			return nil, err
		}
		s.http.Handle("GET /webtransport", s.WebTransport.InfoHandler())
	}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// serveWebTransport starts the WebTransport server of the Mux.
func (s *Server) serveWebTransport(cfg Config) error {
	wts, err := webtransport.NewServer(&webtransport.Config{Mux: s.Mux, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", cfg.WebTransportAddr)
	if err != nil {
		return err
	}
	s.WebTransport = wts
	s.wtAddr = pc.LocalAddr()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		wts.Serve(pc) // until Close
	}()
	return nil
}

// UDPAddr returns the echo server's UDP address.
func (s *Server) UDPAddr() netip.AddrPort { return s.addr }

// WebTransportAddr returns the UDP address WebTransport is served on, nil
// when it is off. It is known from New's return, before the goroutine
// serving it has begun (WebTransport.Addr is nil until then).
func (s *Server) WebTransportAddr() net.Addr { return s.wtAddr }

// ServeHTTP serves the page, the client, the token endpoint and the
// transport.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.http.ServeHTTP(w, r) }

// Close disconnects every client, closes the Mux (ending its WebSocket
// and WebTransport sessions) and the WebTransport server, and waits for
// the echo goroutines.
func (s *Server) Close() error {
	err := s.Listener.Close()
	if s.WebTransport != nil {
		err = errors.Join(err, s.WebTransport.Close())
	}
	s.wg.Wait()
	return err
}

func (s *Server) file(contentType string, b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(b) == 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-store")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}
}

// token mints a demo connect token. A real backend authenticates the
// player first and picks the servers; this one hands a token to anyone.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var id [8]byte
	rand.Read(id[:])
	tok, err := token.Generate(&token.Params{
		ProtocolID:     ProtocolID,
		ClientID:       binary.LittleEndian.Uint64(id[:]),
		PrivateKey:     s.key,
		ServerAddrs:    []netip.AddrPort{s.addr},
		ExpireSeconds:  60,
		TimeoutSeconds: 10,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(tok)
}

// serve accepts clients, runs a session with the channels of package wire
// over each, and echoes every message on the channel it came on.
func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.Listener.AcceptConn(context.Background())
		if err != nil {
			return
		}
		sess, err := reliable.NewSession(c, wire.Config())
		if err != nil { // only for an invalid configuration
			c.Close()
			continue
		}
		s.wg.Add(2)
		go s.echo(sess, wire.Reliable, wire.MaxReliableMessage)
		go s.echo(sess, wire.Unreliable, wire.MaxUnreliableMessage)
	}
}

// echo sends back every message of one channel until the session ends
// (the client's disconnect or timeout, or Close), then closes the session.
// A full unreliable send queue drops the echo, as a lost datagram would.
func (s *Server) echo(sess *reliable.Session, channel, maxMessage int) {
	defer s.wg.Done()
	defer sess.Close()
	ch := sess.Channel(channel)
	buf := make([]byte, maxMessage)
	for {
		n, err := ch.Receive(buf)
		if err != nil {
			return
		}
		if s.onMessage != nil {
			s.onMessage(sess.RemoteAddr(), channel, buf[:n])
		}
		if err := ch.Send(buf[:n]); err != nil && !errors.Is(err, reliable.ErrSendQueueFull) {
			return
		}
	}
}

// BuildClient compiles the WebAssembly client (package
// github.com/gonetcode/netcode/examples/wasm) with the go command on $PATH
// and returns it with the matching wasm_exec.js. It must run inside the
// module's source tree; dir is a scratch directory.
func BuildClient(ctx context.Context, dir string) (wasm, wasmExec []byte, err error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, nil, fmt.Errorf("server: the go command is needed to build the client: %w", err)
	}
	out := filepath.Join(dir, "main.wasm")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, "github.com/gonetcode/netcode/examples/wasm")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("server: building the client: %v\n%s", err, b)
	}
	wasm, err = os.ReadFile(out)
	if err != nil {
		return nil, nil, err
	}
	b, err := exec.CommandContext(ctx, goCmd, "env", "GOROOT").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("server: go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(b))
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		wasmExec, err = os.ReadFile(filepath.Join(root, p))
		if err == nil {
			return wasm, wasmExec, nil
		}
	}
	return nil, nil, errors.New("server: wasm_exec.js not found under " + root)
}
