package bench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
)

// Bridge load modes.
const (
	// ModeRelay: browsers speak the relay protocol (bridge.Subprotocol) to
	// a bridge.Handler, which dials a netcode echo server in another
	// process for each of them.
	ModeRelay = "relay"
	// ModeTransport: each browser runs a netcode client over
	// transport.Dial to a transport.Mux, which is the PacketConn of the
	// netcode echo server in the same process.
	ModeTransport = "transport"
	// ModeWTRelay is ModeRelay over WebTransport: each browser is a
	// webtransport.DialRelay client (the token on a stream, payloads in
	// datagrams) of the same bridge.Handler, served by a
	// webtransport.Server.
	ModeWTRelay = "wt-relay"
	// ModeWTTransport is ModeTransport over WebTransport: each browser
	// runs a netcode client over webtransport.Dial to the same Mux.
	ModeWTTransport = "wt-transport"
	// ModeWebSocket is the floor the others are measured against: a
	// plain coder/websocket echo server (no netcode, no bridge) in a child
	// process, which the browsers reach as relay mode's do, without the
	// token. Its CPU per message is what any WebSocket bridge pays for the
	// browser's side alone.
	ModeWebSocket = "websocket"
	// ModeWire: each browser runs a netcode client over transport.Dial
	// to the wire (package bridge/wire, in a child process) at
	// /wire/<port>, which forwards its datagrams, unread, to the netcode
	// echo server on UDP in another child process, as relay mode's
	// browsers reach theirs.
	ModeWire = "wire"
	// ModeWTWire is ModeWire over WebTransport: a netcode client over
	// webtransport.Dial to the same wire, served by a webtransport.Server.
	ModeWTWire = "wt-wire"
)

// transportMode reports whether mode is one of the transport's.
func transportMode(mode string) bool { return mode == ModeTransport || mode == ModeWTTransport }

// wireMode reports whether mode is one of the wire's.
func wireMode(mode string) bool { return mode == ModeWire || mode == ModeWTWire }

// webTransportMode reports whether mode runs over WebTransport.
func webTransportMode(mode string) bool {
	return mode == ModeWTRelay || mode == ModeWTTransport || mode == ModeWTWire
}

// Defaults of BridgeConfig.
const (
	DefaultBridgeRate = 10  // messages per browser per second
	DefaultBridgeSize = 100 // bytes
)

// BridgeConfig describes a run of the bridge load mode: N simulated
// browsers against the real bridge and a netcode echo server, each run as
// a child process of this executable (see ChildArg). Zero fields take the
// defaults noted.
type BridgeConfig struct {
	Mode     string        // ModeRelay, ModeTransport, ModeWTRelay, ModeWTTransport, ModeWire, ModeWTWire or ModeWebSocket
	Clients  int           // browsers; default 1
	Size     int           // message bytes, MinSize..netcode.MaxPayloadBytes; default DefaultBridgeSize
	Rate     float64       // messages per browser per second; default DefaultBridgeRate
	Duration time.Duration // measured window; 0 = connect (and idle) phase only
	Warmup   time.Duration // unmeasured exchange before the window; default 1s, negative = none
	// Idle is the idle phase after the connect phase: every browser
	// connected, no message sent; 0 = none. It must be shorter than the
	// bridge's idle timeout (bridge.DefaultIdleTimeout), which ends relay
	// sessions that say nothing.
	Idle            time.Duration
	DialConcurrency int   // browsers connecting at once; default 256
	TimeoutSeconds  int32 // the tokens' connection timeout; default 10
	// Dialect "cute" makes the browsers Cute clients (cute.Conn, the bare
	// protocol layer, over the same transports) and the server a Cute
	// echo server, in the wire modes only (the wire is what Cute
	// Framework's web builds dial); "" or "netcode" is netcode.
	Dialect    string
	ProtocolID uint64 // default DefaultProtocolID
	// CPUProfile, if set, is the prefix of the files that receive the
	// child processes' CPU profiles of the measured window: the prefix
	// followed by ".relay" and ".server", ".websocket" for the floor, or
	// ".transport" for the one process of transport mode (its samples are
	// labelled bench=bridge or bench=server).
	CPUProfile string
	// Child is the command line that runs a child process, to which the
	// role's flags are added; default this executable with "bench" and
	// ChildArg (tests set their own).
	Child []string `json:"-"`

	Progress      io.Writer     `json:"-"` // progress lines (nil: none)
	ProgressEvery time.Duration // default 1s
}

func (c *BridgeConfig) fill() error {
	switch c.Mode {
	case ModeRelay, ModeTransport, ModeWTRelay, ModeWTTransport, ModeWire, ModeWTWire, ModeWebSocket:
	default:
		return fmt.Errorf("bench: bridge mode %q: want %s, %s, %s, %s, %s, %s or %s", c.Mode,
			ModeRelay, ModeTransport, ModeWTRelay, ModeWTTransport, ModeWire, ModeWTWire, ModeWebSocket)
	}
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.Size == 0 {
		c.Size = DefaultBridgeSize
	}
	if c.Rate == 0 {
		c.Rate = DefaultBridgeRate
	}
	switch {
	case c.Clients < 0:
		return fmt.Errorf("bench: %d clients", c.Clients)
	case c.Size < MinSize || c.Size > netcode.MaxPayloadBytes:
		return fmt.Errorf("bench: payload size %d out of range %d..%d", c.Size, MinSize, netcode.MaxPayloadBytes)
	case c.Rate < 0:
		return errors.New("bench: the bridge mode sends at a rate: -rate must be positive")
	case c.Idle < 0 || c.Idle >= bridge.DefaultIdleTimeout:
		return fmt.Errorf("bench: the idle phase must be shorter than the bridge's idle timeout (%v)", bridge.DefaultIdleTimeout)
	}
	switch {
	case c.Dialect == "" || c.Dialect == "netcode":
	case c.Dialect != "cute":
		return fmt.Errorf("bench: unknown dialect %q (netcode or cute)", c.Dialect)
	case !wireMode(c.Mode):
		return fmt.Errorf("bench: -dialect cute with -bridge %s: Cute's clients reach a server through the wire only (%s, %s)", c.Mode, ModeWire, ModeWTWire)
	}
	fillShared(&c.Warmup, &c.DialConcurrency, &c.TimeoutSeconds, &c.ProtocolID, &c.ProgressEvery)
	return nil
}

// cute reports whether the run's browsers speak Cute.
func (c *BridgeConfig) cute() bool { return c.Dialect == "cute" }

// BridgeResult is what a run of the bridge load mode measured.
type BridgeResult struct {
	Config BridgeConfig

	Connected      int
	ConnectTime    time.Duration // first dial to last connection
	ConnectsPerSec float64
	DialErrors     map[string]int // by error text

	Window       time.Duration // measured window, as it lasted
	Sent         uint64        // messages sent in the window
	Echoed       uint64        // echoes received in the window
	EchoesPerSec float64
	P50, P99     time.Duration // round trip, browser to server and back, in the window
	Max          time.Duration
	// TotalSent and TotalEchoed count the whole exchange (warm-up, window
	// and the end); Lost is the messages sent and never echoed, Dropped
	// the datagrams or payloads the server, the bridge and the browsers'
	// netcode clients dropped because a queue was full.
	TotalSent, TotalEchoed uint64
	Lost, Dropped          uint64
	Timeouts               int            // connections that timed out
	Disconnects            int            // other ends of connections before the run stopped
	EndErrors              map[string]int // why connections ended early, by error text

	IdleWindow time.Duration // the idle phase, as it lasted
	// Bridge and Server are the two processes' costs. In transport mode
	// the bridge (the Mux and its http.Server) and the server are one
	// process (Shared): their CPU is split by the samples of the
	// process's CPU profile labelled with each side (unlabelled runtime
	// work shared in the same proportion), and the per-session counts are
	// the whole process's, in Bridge.
	Bridge, Server ProcessCost
	Shared         bool
	// Unlabelled is, Shared, the share of the window's profiled CPU that
	// carried no side label (the runtime's own work: collection,
	// scheduling), which the split shares in proportion.
	Unlabelled float64
	LoadCPU    time.Duration // this process (the browsers) over the window; 0 if not measured
	// OtherCores is how many cores the rest of the machine kept busy over
	// the window, IdleOtherCores over the idle phase (Linux: /proc/stat's
	// busy time less the bridge, the server and this process; 0 where not
	// measured). On a shared machine it tells how much the figures were
	// disturbed.
	OtherCores, IdleOtherCores float64
}

// ProcessCost is what one side (bridge or server) cost.
type ProcessCost struct {
	PID int
	// CPU is the process's (or, Shared, the side's) user+system CPU time
	// over the window; Cores divides it by the window, MicrosPerEcho by
	// the echoes. CPUMeasured is false where no CPU time could be had.
	CPU           time.Duration
	CPUMeasured   bool
	Cores         float64
	MicrosPerEcho float64
	// RunsPerEcho estimates the goroutines the process's scheduler ran per
	// echo over the window (its wake-ups: the runtime samples one run in
	// 8), SwitchesPerEcho its threads' context switches per echo;
	// WakesMeasured is false where they were not counted. Shared, they are
	// the whole process's, in Bridge.
	RunsPerEcho, SwitchesPerEcho float64
	WakesMeasured                bool
	// DatagramsPerEcho is, for the process running the netcode server,
	// the datagrams it received and sent over the window per echo: 2 for
	// the payload and its echo, and the keep-alives either side sent
	// beyond them. 0 where the process has no server.
	DatagramsPerEcho float64
	// IdleCPU is the CPU time over the idle phase; IdleMicrosPerSession is
	// µs of it per connected session per second. IdleMeasured is false
	// where no CPU time could be had.
	IdleCPU              time.Duration
	IdleMeasured         bool
	IdleMicrosPerSession float64
	// Per connected session: the growth from before the connect phase to
	// after it, divided by the sessions. Heap is HeapInuse and Stack
	// StackInuse after a collection; FDs is false where the system does
	// not count descriptors.
	Goroutines, GoroutinesPerSession float64
	HeapPerSession, StackPerSession  float64 // bytes
	FDsPerSession                    float64
	FDs                              bool
	// AllocsPerEcho is the heap objects the process allocated over the
	// window per echo (the whole process's, in transport mode: bridge and
	// server together).
	AllocsPerEcho float64
}

// bridgeSettle is how long the end of a run waits for the echoes still in
// flight: an overloaded bridge is seconds behind, and what it echoes late
// is late, not lost.
const bridgeSettle = 5 * time.Second

// RunBridge runs the bridge load mode: it starts the server and bridge
// processes, connects the browsers, runs the idle phase, the warm-up and
// the measured window, and stops everything.
func RunBridge(ctx context.Context, cfg BridgeConfig) (*BridgeResult, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.Child == nil {
		argv, err := defaultChild()
		if err != nil {
			return nil, err
		}
		cfg.Child = argv
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	b := &bridgeRun{cfg: &cfg, res: &BridgeResult{Config: cfg}}
	if cfg.cute() {
		_, b.cuteKey = cute.GenerateKeyPair()
	}
	defer b.stopChildren()
	if err := b.startChildren(key); err != nil {
		return nil, err
	}
	err = b.run(ctx, key)
	if serr := b.stopChildren(); err == nil {
		err = serr
	}
	if err == nil {
		err = ctx.Err() // cut short: the figures are not those of the run asked for
	}
	if err != nil {
		return nil, err
	}
	return b.res, nil
}

// bridgeRun is a run of the bridge load mode in progress.
type bridgeRun struct {
	cfg *BridgeConfig
	res *BridgeResult
	r   *run

	url            string
	wtOpts         *webtransport.Options // WebTransport modes: the bridge's certificate, pinned
	udp            netip.AddrPort        // invalid in websocket mode (no netcode)
	bridge, server *childProc            // server is nil in transport mode (Shared) and websocket mode
	stopped        bool
	cuteKey        cute.SecretKey // with Dialect "cute": the tokens' and the server's
}

func (b *bridgeRun) startChildren(key crypto.Key) error {
	cfg := b.cfg
	keyLine := hex.EncodeToString(key[:])
	common := []string{"-protocol", strconv.FormatUint(cfg.ProtocolID, 10), "-max", strconv.Itoa(cfg.Clients)}
	var err error
	if cfg.Mode == ModeWebSocket {
		b.bridge, err = startChild(cfg.Child, "websocket echo", roleWebSocket, "", "-max", strconv.Itoa(cfg.Clients))
		if err != nil {
			return err
		}
		b.url = b.bridge.ready.URL
		b.res.Bridge.PID = b.bridge.cmd.Process.Pid
		return nil
	}
	var wt []string
	if webTransportMode(cfg.Mode) {
		wt = []string{"-webtransport"}
	}
	if transportMode(cfg.Mode) {
		b.res.Shared = true
		b.bridge, err = startChild(cfg.Child, "bridge+server", roleTransport, keyLine, append(common, wt...)...)
		if err != nil {
			return err
		}
	} else {
		srvRole, line, args := roleServer, keyLine, common
		if cfg.cute() {
			srvRole, line = roleCute, hex.EncodeToString(b.cuteKey[:])
			args = slices.Concat(common, []string{"-max-pending", strconv.Itoa(min(cfg.DialConcurrency, 4096))})
		}
		if b.server, err = startChild(cfg.Child, "server", srvRole, line, args...); err != nil {
			return err
		}
		role := roleRelay
		if wireMode(cfg.Mode) {
			role = roleWire
		}
		b.bridge, err = startChild(cfg.Child, "bridge", role, "", append([]string{"-max", strconv.Itoa(cfg.Clients),
			"-allow", b.server.ready.UDP}, wt...)...)
		if err != nil {
			return err
		}
	}
	b.url = b.bridge.ready.URL
	if webTransportMode(cfg.Mode) {
		b.url = b.bridge.ready.WebTransport
		b.wtOpts = &webtransport.Options{CertificateHashes: b.bridge.ready.CertificateHashes}
	}
	udpOf := b.bridge
	if b.server != nil {
		udpOf = b.server
	}
	if b.udp, err = netip.ParseAddrPort(udpOf.ready.UDP); err != nil {
		return fmt.Errorf("bench: the %s process's address: %w", udpOf.name, err)
	}
	b.res.Bridge.PID = b.bridge.cmd.Process.Pid
	if b.server != nil {
		b.res.Server.PID = b.server.cmd.Process.Pid
	} else {
		b.res.Server.PID = b.res.Bridge.PID
	}
	return nil
}

// stopChildren ends the child processes, once.
func (b *bridgeRun) stopChildren() error {
	if b.stopped {
		return nil
	}
	b.stopped = true
	var errs []error
	for _, p := range []*childProc{b.bridge, b.server} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	return errors.Join(errs...)
}

// procs are the child processes measured: the bridge's, and the server's
// unless they are one.
func (b *bridgeRun) procs() []*childProc {
	if b.server == nil {
		return []*childProc{b.bridge}
	}
	return []*childProc{b.bridge, b.server}
}

// costs are the ProcessCosts of procs(), in the same order.
func (b *bridgeRun) costs() []*ProcessCost {
	if b.server == nil {
		return []*ProcessCost{&b.res.Bridge}
	}
	return []*ProcessCost{&b.res.Bridge, &b.res.Server}
}

// snapshot is a child's counts at one moment.
type snapshot struct {
	st  childStats
	fds int
	ok  bool // fds counted
}

func (b *bridgeRun) snapshots() ([]snapshot, error) {
	var out []snapshot
	for _, p := range b.procs() {
		st, err := p.request(reqStats)
		if err != nil {
			return nil, err
		}
		n, ok := p.fds()
		out = append(out, snapshot{st: st, fds: n, ok: ok})
	}
	return out, nil
}

func (b *bridgeRun) run(ctx context.Context, key crypto.Key) error {
	cfg, res := b.cfg, b.res
	var tokens [][]byte
	if cfg.Mode != ModeWebSocket {
		var err error
		if cfg.cute() {
			tokens, err = mintCuteTokens(cfg.Clients, cfg.ProtocolID, b.cuteKey, b.udp)
		} else {
			tokens, err = mintTokens(cfg.Clients, cfg.ProtocolID, cfg.TimeoutSeconds, key, b.udp)
		}
		if err != nil {
			return err
		}
	}
	before, err := b.snapshots()
	if err != nil {
		return err
	}

	// The run's clients are the browsers; its reader and pacers drive them.
	b.r = newRun(ctx, &Config{Size: cfg.Size, Rate: cfg.Rate, Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery},
		"bridge-"+cfg.Mode)
	r := b.r
	r.settle = bridgeSettle
	r.clients = make([]*client, cfg.Clients)
	for i := range r.clients {
		r.clients[i] = new(client)
	}
	defer func() {
		if !r.stopping.Load() {
			var p Phase
			r.stop(&p)
		}
	}()
	b.connect(ctx, tokens)
	if err := ctx.Err(); err != nil {
		return err
	}
	after, err := b.snapshots()
	if err != nil {
		return err
	}
	if n := float64(res.Connected); n > 0 {
		for i, c := range b.costs() {
			s0, s1 := before[i], after[i]
			c.Goroutines = float64(s1.st.Goroutines)
			c.GoroutinesPerSession = float64(s1.st.Goroutines-s0.st.Goroutines) / n
			c.HeapPerSession = (float64(s1.st.HeapInuse) - float64(s0.st.HeapInuse)) / n
			c.StackPerSession = (float64(s1.st.StackInuse) - float64(s0.st.StackInuse)) / n
			if c.FDs = s0.ok && s1.ok; c.FDs {
				c.FDsPerSession = float64(s1.fds-s0.fds) / n
			}
		}
	}

	if cfg.Idle > 0 && res.Connected > 0 {
		m, err := b.startCPU(false)
		if err != nil {
			return err
		}
		r.progress("idle    %d browsers connected, sending nothing for %v", res.Connected, cfg.Idle)
		select {
		case <-time.After(cfg.Idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		sp, err := m.stop()
		if err != nil {
			return err
		}
		wall, br, sv := sp.wall, sp.bridge, sp.server
		res.IdleWindow = wall
		if sp.otherOK {
			res.IdleOtherCores = sp.other.Seconds() / wall.Seconds()
		}
		if sp.ok {
			per := func(d time.Duration) float64 {
				return float64(d.Nanoseconds()) / 1e3 / float64(res.Connected) / wall.Seconds()
			}
			res.Bridge.IdleCPU, res.Bridge.IdleMicrosPerSession, res.Bridge.IdleMeasured = br, per(br), true
			if res.Server.PID != 0 {
				res.Server.IdleCPU, res.Server.IdleMicrosPerSession, res.Server.IdleMeasured = sv, per(sv), true
			}
		}
	}
	if cfg.Duration <= 0 || res.Connected == 0 {
		return b.finish()
	}

	// Exchange.
	r.startExchange()
	status := func() string {
		var s []string
		for _, p := range b.procs() {
			if d, ok := procCPU(p.cmd.Process.Pid); ok {
				s = append(s, fmt.Sprintf("%s CPU %v", p.name, d.Round(time.Millisecond)))
			}
		}
		return strings.Join(s, "  ")
	}
	if cfg.Warmup > 0 {
		r.wait(cfg.Warmup, "warmup", status)
	}
	m, err := b.startCPU(true)
	if err != nil {
		return err
	}
	sent0, recv0 := r.totals()
	r.measuring.Store(true)
	r.wait(cfg.Duration, "measure", status)
	r.measuring.Store(false)
	sent1, recv1 := r.totals()
	sp, err := m.stop()
	if err != nil {
		return err
	}
	wall, br, sv, ok := sp.wall, sp.bridge, sp.server, sp.ok
	res.Window = wall
	res.Sent, res.Echoed = sent1-sent0, recv1-recv0
	res.EchoesPerSec = float64(res.Echoed) / wall.Seconds()
	res.LoadCPU = sp.self
	res.Unlabelled = sp.unlabelled
	if sp.otherOK {
		res.OtherCores = sp.other.Seconds() / wall.Seconds()
	}
	for i, c := range b.costs() {
		if res.Echoed > 0 && i < len(sp.mallocs) {
			c.AllocsPerEcho = float64(sp.mallocs[i]) / float64(res.Echoed)
		}
	}
	for _, side := range []struct {
		c   *ProcessCost
		cpu time.Duration
	}{{&res.Bridge, br}, {&res.Server, sv}} {
		if w, counted := sp.wakes[side.c]; counted && w.ok && res.Echoed > 0 {
			side.c.RunsPerEcho = float64(w.runs) / float64(res.Echoed)
			side.c.SwitchesPerEcho = float64(w.switches) / float64(res.Echoed)
			side.c.DatagramsPerEcho = float64(w.datagrams) / float64(res.Echoed)
			side.c.WakesMeasured = true
		}
		if !ok || side.c.PID == 0 { // websocket mode has no server
			continue
		}
		side.c.CPU, side.c.CPUMeasured = side.cpu, true
		side.c.Cores = side.cpu.Seconds() / wall.Seconds()
		if res.Echoed > 0 {
			side.c.MicrosPerEcho = float64(side.cpu.Nanoseconds()) / 1e3 / float64(res.Echoed)
		}
	}
	return b.finish()
}

// finish stops the browsers, collects their figures and the children's
// drop counts.
func (b *bridgeRun) finish() error {
	var p Phase
	b.r.stop(&p)
	res := b.res
	res.TotalSent, res.TotalEchoed = b.r.totals()
	res.P50, res.P99, res.Max = p.P50, p.P99, p.Max
	res.Lost, res.Dropped = p.Lost, p.Dropped
	res.Timeouts, res.Disconnects, res.EndErrors = p.Timeouts, p.Disconnects, p.EndErrors
	for _, c := range b.procs() {
		st, err := c.request(reqStats)
		if err != nil {
			return err
		}
		res.Dropped += st.Dropped
	}
	return nil
}

// connect connects every browser, DialConcurrency at a time.
func (b *bridgeRun) connect(ctx context.Context, tokens [][]byte) {
	dialer := &netcode.Dialer{ListenPacket: transport.ListenPacket(b.url, nil)}
	if b.cfg.Mode == ModeWTTransport || b.cfg.Mode == ModeWTWire {
		dialer.ListenPacket = webtransport.ListenPacket(b.url, b.wtOpts)
	}
	// The protocol layer, as the server speaks it.
	cuteDialer := &cute.Dialer{ListenPacket: dialer.ListenPacket, BareProtocol: true}
	cs := b.r.connectAll(ctx, b.cfg.DialConcurrency, func(ctx context.Context, i int) (endpoint, error) {
		switch b.cfg.Mode {
		case ModeTransport, ModeWTTransport, ModeWire, ModeWTWire:
			if b.cfg.cute() {
				return cuteDialer.DialContext(ctx, tokens[i])
			}
			return dialer.DialContext(ctx, tokens[i])
		case ModeWTRelay:
			return webtransport.DialRelay(ctx, b.url, tokens[i], b.wtOpts)
		case ModeWebSocket:
			return dialWebSocket(ctx, b.url)
		}
		return dialRelay(ctx, b.url, tokens[i])
	})
	res := b.res
	res.Connected, res.ConnectTime, res.ConnectsPerSec, res.DialErrors = cs.connected, cs.took, cs.perSec, cs.errs
}
