// Package bench is the load generator behind "netcode bench": it runs a
// netcode echo server and N clients in one process on loopback, drives
// payloads through them at a fixed rate or flat out, and measures
// throughput, round-trip latency, CPU time and allocations. With a baseline
// it repeats the run over raw UDP sockets to give the cost of the protocol.
//
// # Method
//
// The server (a netcode.Listener on 127.0.0.1:0 and one echo goroutine per
// accepted Conn) and the clients (netcode.Dial with freshly minted tokens and
// one reader goroutine each) share the process. Each payload carries a
// sequence number and its send time, so a client measures the round trip
// when the echo comes back.
//
// A run has a connect phase (every client dials, Config.DialConcurrency at
// a time; connects/s is the number connected over the time from the first
// dial to the last connection, and the phase's CPU is measured as below), a
// warm-up that is not measured, and a measured window of Config.Duration:
//
//   - throughput, latency and process CPU (user+sys: getrusage, or GetProcessTimes on Windows) cover the
//     whole window;
//   - allocations (runtime.MemStats.Mallocs) are counted over the first half
//     of the window, with no profiler running, and divided by the payload
//     datagrams of that half (two per round trip: each is sealed once and
//     opened once);
//   - the second half runs the CPU profiler. Goroutines inherit pprof
//     labels from their creator, so the server's goroutines (the Listener's
//     reader and ticker, started by Listen, and the echo goroutines) carry
//     the label bench=server and the clients' (Dial's reader and ticker and
//     the bench's reader and sender goroutines) carry bench=client. The
//     server's CPU time is the sum of the samples labelled server; runtime
//     work with no goroutine (GC workers, the scheduler) is reported as
//     "other". Server CPU per million packets divides it by the payload
//     datagrams the server received and sent in that half. Kernel time is
//     in the samples of the thread that made the system call; note that on
//     loopback the kernel delivers a datagram to the receiving socket in
//     the sender's system call, so each side pays for delivering what it
//     sends.
//
// With a baseline, the raw phase runs the same clients, payloads and
// timing over plain UDP, and the report gives the ratio of payloads/s, and
// the ratios of payloads per CPU second (process and server alone), which a
// machine shared with other work disturbs less. Config.Rounds repeats both
// phases and keeps the round with the median ratio.
package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
)

// MinSize is the smallest payload: a sequence number and a send time.
const MinSize = 16

// DefaultProtocolID is the protocol id the benchmark's tokens use.
const DefaultProtocolID = 0x6e6574636f646531 // "netcode1"

// Config describes a benchmark run. Zero fields take the defaults noted.
type Config struct {
	Clients  int           // number of clients; default 1
	Size     int           // payload bytes, MinSize..netcode.MaxPayloadBytes; default 64
	Rate     float64       // payloads per client per second; 0 = flat out
	Window   int           // flat out: payloads in flight per client; default 8
	Duration time.Duration // measured window; 0 = connect phase only
	Warmup   time.Duration // unmeasured exchange before the window; default 1s, negative = none
	Baseline bool          // also run the same load over raw UDP
	// Rounds repeats the run (netcode, then raw with Baseline) this many
	// times and reports the median round, which resists a noisy machine;
	// default 1.
	Rounds int
	// RawReaders is how many goroutines serve the raw UDP echo socket;
	// default GOMAXPROCS.
	RawReaders int

	// ServerProcess runs the echo server in a child process (this
	// executable, as the bridge mode runs its server) instead of beside
	// the clients: a server then shares its Go scheduler and its CPU with
	// no client goroutine, as in production. The server's CPU is the
	// child's (/proc or getrusage), process CPU is both processes', and
	// the server's payload datagrams are counted as two per echo the
	// clients receive. ServerTick and Logger do not apply.
	ServerProcess bool
	// Child is the command line that runs a child process (default: this
	// executable, "bench", ChildArg); tests set it.
	Child []string `json:"-"`

	MaxClients      int           // server slots; default Clients
	ReadShards      int           // server sockets read in parallel (ServerConfig.Socket.ReadShards; cute.SocketConfig.ReadShards in the Cute phase)
	DialConcurrency int           // handshakes in flight at once; default 256
	ServerTick      time.Duration // ServerConfig.TickInterval; 0 = the library default
	TimeoutSeconds  int32         // the tokens' connection timeout; default 10
	ProtocolID      uint64        // default DefaultProtocolID
	// Dialect "cute" measures the Cute Protocol dialect too (package
	// cute), in the same run right after netcode, reported beside it;
	// "" or "netcode" measures netcode only. With ServerProcess, Cute's
	// server runs in a child process too; ReadShards applies to both
	// servers; Light to netcode only (Cute has no light generator).
	Dialect string

	Progress      io.Writer     `json:"-"` // progress lines (nil: none)
	ProgressEvery time.Duration // default 1s
	CPUProfile    io.Writer     `json:"-"` // if set, receives the netcode phase's CPU profile (second half of the window)
	// ProfileConnect makes CPUProfile (and ServerCPUProfile) cover the
	// connect phase instead of the window (the window is still profiled
	// for the CPU attribution).
	ProfileConnect bool
	// ServerCPUProfile, with ServerProcess, is the file the server
	// process writes its CPU profile of the window (second half) to, or
	// of the connect phase with ProfileConnect.
	ServerCPUProfile string
	Logger           *slog.Logger `json:"-"` // the server's logger (nil: silent)
	// Light runs the netcode clients on the light generator: the client
	// core (internal/client) for each, lightGroupSize of them per UDP
	// socket with one reader goroutine and one keep-alive ticker per
	// socket, each client on its own source address in 127.0.0.0/8,
	// instead of a dialed netcode.Conn (socket, reader goroutine and
	// timer) each. It speaks the same protocol for a fraction of the
	// generator's CPU, so that the server's cost at 16,384 clients can be
	// measured. It needs IP_PKTINFO (Linux) and applies to the netcode
	// dialect (Cute's clients and the raw baseline stay as they are).
	Light bool
}

func (c *Config) fill() error {
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.Clients < 0 {
		return fmt.Errorf("bench: %d clients", c.Clients)
	}
	if c.Size == 0 {
		c.Size = 64
	}
	if c.Size < MinSize || c.Size > netcode.MaxPayloadBytes {
		return fmt.Errorf("bench: payload size %d out of range %d..%d", c.Size, MinSize, netcode.MaxPayloadBytes)
	}
	if c.Rate < 0 {
		return fmt.Errorf("bench: negative rate")
	}
	if c.Window <= 0 {
		c.Window = 8
	}
	if c.MaxClients == 0 {
		c.MaxClients = c.Clients
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.RawReaders <= 0 {
		c.RawReaders = runtime.GOMAXPROCS(0)
	}
	switch c.Dialect {
	case "", "netcode", "cute":
	default:
		return fmt.Errorf("bench: unknown dialect %q (netcode or cute)", c.Dialect)
	}
	if c.Dialect == "cute" && c.Size > cute.MaxPayloadBytes {
		return fmt.Errorf("bench: payload size %d over Cute's %d", c.Size, cute.MaxPayloadBytes)
	}
	fillShared(&c.Warmup, &c.DialConcurrency, &c.TimeoutSeconds, &c.ProtocolID, &c.ProgressEvery)
	return nil
}

// fillShared sets the defaults Config and BridgeConfig share: a warm-up of
// 1s (negative: none), 256 dials at once, tokens with a 10 s timeout, the
// protocol id DefaultProtocolID and a progress line a second.
func fillShared(warmup *time.Duration, dialConcurrency *int, timeoutSeconds *int32, protocolID *uint64, progressEvery *time.Duration) {
	if *warmup == 0 {
		*warmup = time.Second
	}
	if *warmup < 0 {
		*warmup = 0
	}
	if *dialConcurrency <= 0 {
		*dialConcurrency = 256
	}
	if *timeoutSeconds == 0 {
		*timeoutSeconds = 10
	}
	if *protocolID == 0 {
		*protocolID = DefaultProtocolID
	}
	if *progressEvery <= 0 {
		*progressEvery = time.Second
	}
}

// Result is what a run measured.
type Result struct {
	Config  Config
	Netcode Phase
	Cute    *Phase  // with Config.Dialect "cute"
	Raw     *Phase  // with Config.Baseline
	Ratio   float64 // Netcode.RoundTripsPerSec / Raw.RoundTripsPerSec
	// CPURatio is the same comparison per CPU second rather than per wall
	// second: raw's process CPU per packet over netcode's. It is steadier
	// than Ratio on a machine shared with other work.
	CPURatio float64
	// ServerCPURatio compares the servers alone: raw's server CPU per
	// packet over netcode's.
	ServerCPURatio float64
	// Rounds holds every round when Config.Rounds > 1; Netcode, Raw and
	// Ratio are then those of the round with the median ratio (or, with no
	// baseline, the median payloads/s).
	Rounds []Round `json:",omitempty"`
}

// Round is one netcode phase and, with a baseline, the raw phase after it.
type Round struct {
	Netcode                  Phase
	Cute                     *Phase
	Raw                      *Phase
	Ratio                    float64
	CPURatio, ServerCPURatio float64
}

// Phase is the measurement of one transport (netcode or raw UDP).
type Phase struct {
	Name string

	Clients        int
	Connected      int
	ConnectTime    time.Duration // first dial to last connection
	ConnectsPerSec float64
	DialErrors     map[string]int // by error text
	// ConnectCPU is the process's CPU time (getrusage) in the connect
	// phase, ConnectServerCPU the part sampled in server goroutines.
	ConnectCPU, ConnectServerCPU time.Duration

	Window           time.Duration // measured window, as it lasted
	Sent             uint64        // payloads sent in the window
	RoundTrips       uint64        // echoes received in the window
	RoundTripsPerSec float64       // payloads/s: echoes received per second
	SentPerSec       float64
	P50, P99, Max    time.Duration // round-trip latency in the window
	Lost             uint64        // payloads sent and never echoed, whole exchange

	ProcessCPU           time.Duration // getrusage user+sys over the window
	ProcessCPUPerMPacket time.Duration // per million server payload datagrams (in + out)
	// EchoesPerCPUSecond is round trips per second of the whole process's
	// CPU (server and clients); EchoesPerServerCPUSecond per second of the
	// server's goroutines' CPU (an echo is two server datagrams). The C
	// reference's figures are measured the first way.
	EchoesPerCPUSecond       float64
	EchoesPerServerCPUSecond float64

	ProfileWindow       time.Duration // the profiled second half
	ServerCPU           time.Duration // samples labelled server, second half
	ClientCPU           time.Duration // samples labelled client
	OtherCPU            time.Duration // unlabelled samples (GC, scheduler)
	ServerPackets       uint64        // payload datagrams the server received and sent, second half
	ServerCPUPerMPacket time.Duration
	// ServerDatagrams are the datagrams of every kind (payloads,
	// keep-alives, handshakes) the server received and sent in the
	// second half, and ServerCPUPerMDatagram the server's CPU per million
	// of them: unlike ServerCPUPerMPacket it does not rise when the
	// clients fall behind and keep-alives fill the gaps between payloads.
	ServerDatagrams       uint64
	ServerCPUPerMDatagram time.Duration
	// ServerRunsPerEcho and ServerSwitchesPerEcho are, with a server
	// process, its goroutine runs (the runtime samples one in 8) and
	// thread context switches per echo in the second half.
	ServerRunsPerEcho     float64
	ServerSwitchesPerEcho float64

	AllocPackets    uint64  // payload datagrams in the first half
	Mallocs         uint64  // heap allocations in the first half
	AllocsPerPacket float64 // Mallocs / AllocPackets
	GCs             uint32  // collections during the window

	Timeouts    int            // client connections that timed out (either side)
	Disconnects int            // other ends of connections before the run stopped
	EndErrors   map[string]int // why connections ended early, by error text
	Dropped     uint64         // payloads dropped by full read queues (netcode)

	ServerStats *netcode.ServerStats // netcode only
}

// errText names an error by its innermost message.
func errText(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// Run runs the benchmark: the netcode phase, then with Baseline the raw UDP
// phase.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := checkFDs(cfg.Clients, cfg.Light && !cfg.Baseline && cfg.Dialect != "cute"); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg}
	rounds := make([]Round, 0, cfg.Rounds)
	for i := range cfg.Rounds {
		rc := cfg
		if i > 0 {
			rc.CPUProfile = nil // one profile: the first round's
			rc.ServerCPUProfile = ""
		}
		if cfg.Rounds > 1 && rc.Progress != nil {
			fmt.Fprintf(rc.Progress, "round %d of %d\n", i+1, cfg.Rounds)
		}
		p, err := runDialect(ctx, &rc, "netcode")
		if err != nil {
			return nil, err
		}
		r := Round{Netcode: *p}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cfg.Dialect == "cute" {
			cp, err := runDialect(ctx, &rc, "cute")
			if err != nil {
				return nil, err
			}
			r.Cute = cp
		}
		if cfg.Baseline && cfg.Duration > 0 {
			raw, err := runRaw(ctx, &rc)
			if err != nil {
				return nil, err
			}
			r.Raw = raw
			if raw.RoundTripsPerSec > 0 {
				r.Ratio = p.RoundTripsPerSec / raw.RoundTripsPerSec
			}
			if p.ProcessCPUPerMPacket > 0 {
				r.CPURatio = float64(raw.ProcessCPUPerMPacket) / float64(p.ProcessCPUPerMPacket)
			}
			if p.ServerCPUPerMPacket > 0 {
				r.ServerCPURatio = float64(raw.ServerCPUPerMPacket) / float64(p.ServerCPUPerMPacket)
			}
		}
		rounds = append(rounds, r)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	m := medianRound(rounds)
	res.Netcode, res.Cute, res.Raw, res.Ratio = m.Netcode, m.Cute, m.Raw, m.Ratio
	res.CPURatio, res.ServerCPURatio = m.CPURatio, m.ServerCPURatio
	if len(rounds) > 1 {
		res.Rounds = rounds
	}
	return res, nil
}

// fdSpare is the descriptors a run needs besides one socket per client:
// the server's sockets, the runtime's epoll and pipes, profiles, stdio.
const fdSpare = 64

// checkFDs refuses a run of clients whose sockets the descriptor limit
// cannot hold, before it starts, rather than part way into the connect
// phase with "too many open files".
func checkFDs(clients int, light bool) error {
	if light {
		clients = (clients + lightGroupSize - 1) / lightGroupSize
	}
	soft, hard, ok := fdLimit()
	if need := uint64(clients) + fdSpare; ok && need > soft {
		return fmt.Errorf("bench: %d clients need about %d file descriptors, and the limit is %d (hard limit %d); raise it (ulimit -n) or run fewer clients",
			clients, need, soft, hard)
	}
	return nil
}

// medianRound returns the round with the median ratio, or with no
// baseline the median netcode payloads/s (the lower middle one of an even
// number).
func medianRound(rounds []Round) Round {
	s := slices.Clone(rounds)
	key := func(r Round) float64 {
		if r.Raw != nil {
			return r.Ratio
		}
		return r.Netcode.RoundTripsPerSec
	}
	slices.SortFunc(s, func(a, b Round) int { return cmp.Compare(key(a), key(b)) })
	return s[(len(s)-1)/2]
}

func labelled(ctx context.Context, side string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(LabelKey, side), f)
}

// runDialect measures one dialect: "netcode" or "cute".
func runDialect(ctx context.Context, cfg *Config, dialect string) (*Phase, error) {
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	_, cuteKey := cute.GenerateKeyPair()
	r := newRun(ctx, cfg, dialect)
	p := &Phase{Name: dialect, Clients: cfg.Clients}

	var srv *echoServer
	if dialect == "cute" {
		srv, err = startCuteServer(ctx, r, cuteKey)
	} else {
		srv, err = startEchoServer(ctx, r, key)
	}
	if err != nil {
		return nil, err
	}
	defer srv.close()

	// Tokens are minted before the clock starts.
	var tokens [][]byte
	if dialect == "cute" {
		tokens, err = mintCuteTokens(cfg.Clients, cfg.ProtocolID, cuteKey, srv.addr)
	} else {
		tokens, err = mintTokens(cfg.Clients, cfg.ProtocolID, cfg.TimeoutSeconds, key, srv.addr)
	}
	if err != nil {
		return nil, err
	}

	// Connect phase.
	r.clients = make([]*client, cfg.Clients)
	for i := range r.clients {
		r.clients[i] = new(client)
	}
	// The connect phase is profiled too, for the CPU the handshakes cost.
	var prof bytes.Buffer
	profiling := pprof.StartCPUProfile(&prof) == nil
	srvProf := srv.profiler(cfg.ServerCPUProfile)
	if cfg.ProfileConnect {
		if err := srvProf.start(); err != nil {
			return nil, err
		}
	}
	cpu0, srv0 := cpuTime(), srv.cpu()
	if cfg.Light && dialect == "netcode" {
		labelled(ctx, SideClient, func(context.Context) { r.light, err = newLightGen(r, srv.addr) })
		if err != nil {
			return nil, err
		}
		defer r.light.close()
	}
	var cs connectStats
	labelled(ctx, SideClient, func(ctx context.Context) {
		d := &netcode.Dialer{}
		cd := &cute.Dialer{BareProtocol: true} // the protocol layer, as the server
		cs = r.connectAll(ctx, cfg.DialConcurrency, func(ctx context.Context, i int) (endpoint, error) {
			if r.light != nil {
				return r.light.dial(ctx, i, tokens[i])
			}
			if dialect == "cute" {
				return cd.DialContext(ctx, tokens[i])
			}
			return d.DialContext(ctx, tokens[i])
		})
	})
	srvConnect := srv.cpu() - srv0
	p.ConnectCPU = cpuTime() - cpu0 + srvConnect
	if cfg.ProfileConnect {
		if err := srvProf.stop(); err != nil {
			return nil, err
		}
		srvProf = nil
	}
	if profiling {
		pprof.StopCPUProfile()
		by, err := cpuBySide(prof.Bytes(), LabelKey)
		if err != nil {
			return nil, fmt.Errorf("bench: reading the CPU profile: %w", err)
		}
		p.ConnectServerCPU = time.Duration(by[SideServer]) + srvConnect
		if cfg.ProfileConnect && cfg.CPUProfile != nil {
			if _, err := cfg.CPUProfile.Write(prof.Bytes()); err != nil {
				return nil, err
			}
		}
	}
	p.Connected, p.ConnectTime, p.ConnectsPerSec, p.DialErrors = cs.connected, cs.took, cs.perSec, cs.errs
	srv.waitAccepted(p.Connected)

	if cfg.Duration <= 0 {
		r.stop(p)
		p.ServerStats = srv.stats()
		return p, nil
	}

	// Exchange.
	labelled(ctx, SideClient, func(context.Context) { r.startExchange() })
	winProfile := cfg.CPUProfile
	if cfg.ProfileConnect {
		winProfile = nil
	}
	r.datagrams = srv.datagrams
	if srv.child != nil {
		r.wakes = srv.wakes
	}
	var serverCPU func() time.Duration
	if srv.child != nil {
		serverCPU = srv.cpu
	}
	err = r.measure(p, srv.packets, serverCPU, winProfile, srvProf, srv.status)
	r.stop(p)
	p.ServerStats = srv.stats()
	return p, err
}

// SortedKeys returns m's keys in order, for printing.
func SortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var _ endpoint = (*net.UDPConn)(nil)
var _ endpoint = (*netcode.Conn)(nil)
var _ endpoint = (*cute.Conn)(nil)
