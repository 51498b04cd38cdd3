package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
)

// ChildArg, as the first argument of "netcode bench", runs one process of
// the bridge load mode instead of a benchmark: the bench starts its server
// and bridge this way, as children of the same binary, so that each has
// its own CPU time, descriptors and heap to measure. It is not meant to be
// typed.
const ChildArg = "-bridge-child"

// Roles of a child process.
const (
	roleServer    = "server"    // a netcode echo server on UDP (relay mode's server)
	roleCute      = "cute"      // a Cute echo server on UDP (the bare protocol layer), -dialect cute's
	roleRelay     = "relay"     // the relay (bridge.Handler) on an http.Server
	roleTransport = "transport" // a netcode echo server on a transport.Mux, and the Mux's http.Server
	roleWebSocket = "websocket" // a plain coder/websocket echo server (the floor)
	roleWire      = "wire"      // the wire (wire.Handler) on an http.Server, to the server's UDP address
)

// sideBridge is the value of LabelKey on the transport child's bridge
// goroutines (the Mux and its http.Server); its netcode server's carry
// SideServer.
const sideBridge = "bridge"

// Requests a child answers, one a line on its stdin (after the private
// key, in hex, for the roles that serve netcode); the answer is one JSON
// line on its stdout. Closing stdin ends the child.
const (
	reqStats    = "stats"     // childStats, after a collection
	reqCPU      = "cpu"       // childStats with only CPU, without a collection
	reqMallocs  = "mallocs"   // childStats with only Mallocs, without a collection
	reqCPUStart = "cpu-start" // starts the CPU profiler; answers childStats
	reqCPUStop  = "cpu-stop"  // stops it; answers childStats with CPUBySide; "cpu-stop PATH" also writes the profile to PATH
)

// childReady is the first line a child writes: where it serves.
type childReady struct {
	UDP string `json:",omitempty"` // the netcode server's UDP address
	URL string `json:",omitempty"` // the WebSocket URL (relay, transport)
	// WebTransport is the session URL with -webtransport, and
	// CertificateHashes the development certificates to pin.
	WebTransport      string     `json:",omitempty"`
	CertificateHashes [][32]byte `json:",omitempty"`
	Err               string     `json:",omitempty"`
}

// childStats is a child's answer to a request.
type childStats struct {
	Goroutines int
	HeapInuse  uint64        // after a collection
	StackInuse uint64        // goroutine stacks
	Mallocs    uint64        // heap objects allocated so far (reqMallocs)
	CPU        time.Duration // the child's own user+sys (getrusage), for systems without /proc
	Sessions   int           // connected clients (server) or open sessions (relay, transport)
	Dropped    uint64        // payloads or datagrams dropped by full queues
	// Runs estimates the goroutines the scheduler has run so far (the
	// runtime's /sched/latencies:seconds samples one run in 8); Switches
	// counts the process's thread context switches (getrusage), with
	// SwitchesOK false where the system does not tell.
	Runs       uint64
	Switches   uint64
	SwitchesOK bool
	// Datagrams are the datagrams the netcode server received and sent so
	// far (server role; with every answer, reqCPU's too).
	Datagrams uint64
	// CPUBySide is, after reqCPUStop, the profiled CPU time by the value
	// of LabelKey (transport child: sideBridge, SideServer, "" for the
	// rest).
	CPUBySide map[string]time.Duration `json:",omitempty"`
	Err       string                   `json:",omitempty"`
}

// RunChild runs one child process of the bridge load mode (see ChildArg)
// with the arguments after ChildArg: it serves until its stdin closes or
// ctx ends, answering requests from stdin on stdout.
func RunChild(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+ChildArg, flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "server, cute, relay, wire, transport or websocket")
	proto := fs.Uint64("protocol", DefaultProtocolID, "protocol id")
	maxN := fs.Int("max", 1, "server slots and bridge sessions")
	allow := fs.String("allow", "", "relay, wire: the server's UDP address")
	shards := fs.Int("read-shards", 0, "server, cute: sockets read in parallel (ServerConfig.Socket.ReadShards, cute.SocketConfig.ReadShards)")
	maxPending := fs.Int("max-pending", 0, "cute: handshakes in progress at once (cute.ServerConfig.MaxPending; 0: its default)")
	wt := fs.Bool("webtransport", false, "relay, transport: serve WebTransport sessions too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &child{proto: *proto, max: *maxN, shards: *shards, wt: *wt, maxPending: *maxPending}
	in := bufio.NewReader(stdin)
	if *role == roleCute {
		// The Cute secret key, as netcode's below.
		line, err := in.ReadString('\n')
		k, herr := hex.DecodeString(strings.TrimSpace(line))
		if err != nil || herr != nil || len(k) != cute.SecretKeyBytes {
			return errors.New("bench child: the first line of stdin must be the Cute secret key in hex")
		}
		copy(c.cuteKey[:], k)
	} else if *role != roleRelay && *role != roleWebSocket && *role != roleWire {
		// The private key comes first on stdin, not on the command line,
		// where every user of the machine could read it.
		line, err := in.ReadString('\n')
		k, herr := hex.DecodeString(strings.TrimSpace(line))
		if err != nil || herr != nil || len(k) != crypto.KeyBytes {
			return errors.New("bench child: the first line of stdin must be the 32-byte private key in hex")
		}
		copy(c.key[:], k)
	}
	var err error
	switch *role {
	case roleServer:
		err = c.startServer()
	case roleCute:
		err = c.startCute()
	case roleRelay:
		var a netip.AddrPort
		if a, err = netip.ParseAddrPort(*allow); err != nil {
			err = fmt.Errorf("bench child: -allow %q: %w", *allow, err)
		} else {
			err = c.startRelay(a)
		}
	case roleWire:
		var a netip.AddrPort
		if a, err = netip.ParseAddrPort(*allow); err != nil {
			err = fmt.Errorf("bench child: -allow %q: %w", *allow, err)
		} else {
			err = c.startWire(a)
		}
	case roleTransport:
		err = c.startTransport()
	case roleWebSocket:
		err = c.startWebSocket()
	default:
		err = fmt.Errorf("bench child: unknown role %q", *role)
	}
	enc := json.NewEncoder(stdout)
	if err != nil {
		c.close()
		enc.Encode(childReady{Err: err.Error()})
		return err
	}
	defer c.close()
	if err := enc.Encode(c.ready); err != nil {
		return err
	}
	lines, done := make(chan string), make(chan struct{})
	defer close(done)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case req, ok := <-lines:
			if !ok {
				return nil
			}
			if err := enc.Encode(c.answer(req)); err != nil {
				return err
			}
		}
	}
}

// child is a running child process's state.
type child struct {
	key    crypto.Key
	proto  uint64
	max    int
	shards int // ServerConfig.Socket.ReadShards, cute.SocketConfig.ReadShards
	wt     bool
	ready  childReady

	cuteKey    cute.SecretKey // cute
	maxPending int            // cute: cute.ServerConfig.MaxPending

	l     *netcode.Listener // server, transport
	cl    *cute.Listener    // cute
	mux   *transport.Mux    // transport
	relay *bridge.Handler   // relay
	wire  *wire.Handler     // wire
	ws    *wsEcho           // websocket
	web   *http.Server      // relay, transport, websocket
	webWG sync.WaitGroup
	wts   *webtransport.Server // relay, transport with -webtransport

	echoes sync.WaitGroup
	mu     sync.Mutex
	conns  map[echoConn]struct{} // for their Dropped counts
	gone   uint64                // Dropped of the conns that ended

	prof bytes.Buffer // the CPU profile in progress
}

func (c *child) serverConfig() *netcode.ServerConfig {
	return &netcode.ServerConfig{ProtocolID: c.proto, PrivateKey: c.key, MaxClients: c.max, Socket: netcode.SocketConfig{ReadShards: c.shards}}
}

func (c *child) startServer() error {
	var err error
	labelled(context.Background(), SideServer, func(context.Context) {
		c.l, err = netcode.Listen("udp4", "127.0.0.1:0", c.serverConfig())
		if err == nil {
			c.ready.UDP = c.l.Addr().String()
			startEcho(c, c.l.AcceptConn)
		}
	})
	return err
}

// startCute serves the Cute echo of -dialect cute: the bare protocol
// layer, payload for payload, as the bench's Cute server in its process.
func (c *child) startCute() error {
	var err error
	labelled(context.Background(), SideServer, func(context.Context) {
		c.cl, err = cute.Listen("udp4", "127.0.0.1:0", cuteServerConfig(c.proto, c.cuteKey, c.max, c.maxPending, c.shards, nil))
		if err == nil {
			c.ready.UDP = c.cl.Addr().String()
			startEcho(c, c.cl.AcceptConn)
		}
	})
	return err
}

func (c *child) startRelay(server netip.AddrPort) error {
	c.relay = bridge.NewHandler(&bridge.Config{AllowedServers: []netip.AddrPort{server}, MaxSessions: c.max})
	mux := http.NewServeMux()
	mux.Handle("/relay", c.relay)
	if err := c.startWebTransport(&webtransport.Config{Relay: c.relay}, webtransport.DefaultRelayPath); err != nil {
		return err
	}
	return c.startWeb(mux, "/relay")
}

// startWire serves the wire to server's port: every browser comes from
// 127.0.0.1, so the cap per source is the cap in total.
func (c *child) startWire(server netip.AddrPort) error {
	c.wire = wire.NewHandler(&wire.Config{
		Allow:       []wire.Range{{Addr: server.Addr(), First: server.Port(), Last: server.Port()}},
		MaxSessions: c.max, MaxSessionsPerSource: c.max,
	})
	path := wire.DefaultPath + strconv.Itoa(int(server.Port()))
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, c.wire)
	if err := c.startWebTransport(&webtransport.Config{Wire: c.wire}, path); err != nil {
		return err
	}
	return c.startWeb(mux, path)
}

func (c *child) startTransport() error {
	var err error
	labelled(context.Background(), sideBridge, func(context.Context) {
		var udp *net.UDPConn
		if udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return
		}
		c.mux = transport.NewMux(udp, &transport.MuxConfig{MaxSessions: c.max})
	})
	if err != nil {
		return err
	}
	labelled(context.Background(), SideServer, func(context.Context) {
		if c.l, err = netcode.NewListener(c.mux, c.serverConfig()); err == nil {
			c.ready.UDP = c.l.Addr().String()
			startEcho(c, c.l.AcceptConn)
		}
	})
	if err != nil {
		c.mux.Close()
		c.mux = nil
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/netcode", c.mux.Handler())
	if err := c.startWebTransport(&webtransport.Config{Mux: c.mux}, webtransport.DefaultTransportPath); err != nil {
		return err
	}
	return c.startWeb(mux, "/netcode")
}

// startWebSocket serves the plain WebSocket echo of websocket mode.
func (c *child) startWebSocket() error {
	c.ws = &wsEcho{sessions: make(map[*websocket.Conn]struct{})}
	mux := http.NewServeMux()
	mux.Handle("/echo", c.ws)
	return c.startWeb(mux, "/echo")
}

// wsEcho is the floor of the bridge modes: what a WebSocket server does
// for a message at the least, reading it and writing it back, with the
// relay's settings (its subprotocol, no compression) and no bridge.
type wsEcho struct {
	mu       sync.Mutex
	sessions map[*websocket.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

func (e *wsEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{bridge.Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		ws.CloseNow()
		return
	}
	e.sessions[ws] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.sessions, ws)
		e.mu.Unlock()
		ws.CloseNow()
		e.wg.Done()
	}()
	ws.SetReadLimit(netcode.MaxPayloadBytes)
	buf := make([]byte, netcode.MaxPayloadBytes)
	ctx := context.Background()
	for {
		typ, rd, err := ws.Reader(ctx)
		if err != nil {
			return
		}
		n, err := io.ReadFull(rd, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return
		}
		if err := ws.Write(ctx, typ, buf[:n]); err != nil {
			return
		}
	}
}

// close ends every session and waits for their handlers.
func (e *wsEcho) close() {
	e.mu.Lock()
	e.closed = true
	for ws := range e.sessions {
		ws.CloseNow()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// startWeb serves h on 127.0.0.1:0, its goroutines labelled bridge.
func (c *child) startWeb(h http.Handler, path string) error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c.web = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.ready.URL = "ws://" + ln.Addr().String() + path
	c.webWG.Add(1)
	labelled(context.Background(), sideBridge, func(context.Context) {
		go func() {
			defer c.webWG.Done()
			c.web.Serve(ln)
		}()
	})
	return nil
}

// startWebTransport serves cfg's sessions over WebTransport on a UDP
// socket of 127.0.0.1, with development certificates, its goroutines
// labelled bridge; only with -webtransport.
func (c *child) startWebTransport(cfg *webtransport.Config, path string) error {
	if !c.wt {
		return nil
	}
	wts, err := webtransport.NewServer(cfg)
	if err != nil {
		return err
	}
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	c.wts = wts
	c.ready.WebTransport = "https://" + udp.LocalAddr().String() + path
	if c.ready.CertificateHashes, err = wts.CertificateHashes(); err != nil {
		return err
	}
	c.webWG.Add(1)
	labelled(context.Background(), sideBridge, func(context.Context) {
		go func() {
			defer c.webWG.Done()
			wts.Serve(udp)
		}()
	})
	return nil
}

// echoConn is a server connection the child echoes on: a *netcode.Conn or
// a *cute.Conn.
type echoConn interface {
	io.ReadWriteCloser
	Dropped() uint64
}

// startEcho accepts clients with accept and echoes every payload to its
// sender, as "netcode serve" does. It runs in the caller's pprof labels.
func startEcho[C echoConn](c *child, accept func(context.Context) (C, error)) {
	c.conns = make(map[echoConn]struct{})
	c.echoes.Add(1)
	go func() {
		defer c.echoes.Done()
		for {
			conn, err := accept(context.Background())
			if err != nil {
				return
			}
			c.mu.Lock()
			c.conns[conn] = struct{}{}
			c.mu.Unlock()
			c.echoes.Add(1)
			go c.echo(conn)
		}
	}()
}

func (c *child) echo(conn echoConn) {
	defer c.echoes.Done()
	defer func() {
		conn.Close()
		c.mu.Lock()
		delete(c.conns, conn)
		c.gone += conn.Dropped()
		c.mu.Unlock()
	}()
	buf := make([]byte, cute.MaxPayloadBytes) // netcode's 1200 and Cute's 1205
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		if _, err := conn.Write(buf[:n]); err != nil {
			return
		}
	}
}

// close ends whatever the child started and waits for its goroutines.
func (c *child) close() {
	if c.relay != nil {
		c.relay.Close()
	}
	if c.wire != nil {
		c.wire.Close()
	}
	if c.ws != nil {
		c.ws.close()
	}
	if c.l != nil {
		c.l.Close() // closes the Mux too, which ends its sessions
	}
	if c.cl != nil {
		c.cl.Close()
	}
	if c.wts != nil {
		c.wts.Close()
	}
	if c.web != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.web.Shutdown(ctx)
		cancel()
		c.web.Close()
	}
	c.webWG.Wait()
	c.echoes.Wait()
}

// answer serves one request.
func (c *child) answer(req string) childStats {
	var st childStats
	req, path, _ := strings.Cut(req, " ")
	switch req {
	case reqCPU:
		st.CPU = cpuTime()
		st.Runs = goroutineRuns()
		st.Switches, st.SwitchesOK = contextSwitches()
		st.Datagrams = c.datagrams()
		return st
	case reqMallocs:
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st.Mallocs = ms.Mallocs
		return st
	case reqStats:
	case reqCPUStart:
		c.prof.Reset()
		if err := pprof.StartCPUProfile(&c.prof); err != nil {
			st.Err = err.Error()
		}
	case reqCPUStop:
		pprof.StopCPUProfile()
		if path != "" {
			if err := os.WriteFile(path, c.prof.Bytes(), 0o644); err != nil {
				st.Err = err.Error()
				break
			}
		}
		by, err := cpuBySide(c.prof.Bytes(), LabelKey)
		if err != nil {
			st.Err = err.Error()
			break
		}
		st.CPUBySide = make(map[string]time.Duration, len(by))
		for k, v := range by {
			st.CPUBySide[k] = time.Duration(v)
		}
	default:
		st.Err = fmt.Sprintf("unknown request %q", req)
		return st
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.Goroutines = runtime.NumGoroutine()
	st.HeapInuse, st.StackInuse = ms.HeapInuse, ms.StackInuse
	st.CPU = cpuTime()
	c.mu.Lock()
	st.Dropped = c.gone
	for conn := range c.conns {
		st.Dropped += conn.Dropped()
	}
	c.mu.Unlock()
	switch {
	case c.relay != nil:
		st.Sessions = c.relay.Sessions()
	case c.ws != nil:
		c.ws.mu.Lock()
		st.Sessions = len(c.ws.sessions)
		c.ws.mu.Unlock()
	case c.mux != nil:
		st.Sessions = c.mux.Sessions()
		st.Dropped += c.mux.Dropped()
	case c.l != nil:
		st.Sessions = c.l.Stats().Connected
	case c.cl != nil:
		st.Sessions = c.cl.Stats().Connected
	}
	st.Datagrams = c.datagrams()
	return st
}

// schedSamplePeriod is how many goroutine runs the runtime counts one
// sample of /sched/latencies:seconds for (runtime's gTrackingPeriod).
const schedSamplePeriod = 8

// goroutineRuns estimates how many times the scheduler has started running
// a goroutine in this process: the samples of /sched/latencies:seconds
// times the period they are taken at.
func goroutineRuns() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n * schedSamplePeriod
}

// datagrams are the datagrams the netcode or Cute server received and
// sent so far; 0 in the relay.
func (c *child) datagrams() uint64 {
	switch {
	case c.l != nil:
		s := c.l.Stats()
		return s.PacketsReceived + s.PacketsSent
	case c.cl != nil:
		s := c.cl.Stats()
		return s.PacketsReceived + s.PacketsSent
	}
	return 0
}
