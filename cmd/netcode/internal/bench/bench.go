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
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
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
	ReadShards      int           // server sockets read in parallel (ServerConfig.Socket.ReadShards)
	DialConcurrency int           // handshakes in flight at once; default 256
	ServerTick      time.Duration // ServerConfig.TickInterval; 0 = the library default
	TimeoutSeconds  int32         // the tokens' connection timeout; default 10
	ProtocolID      uint64        // default DefaultProtocolID

	Progress      io.Writer     `json:"-"` // progress lines (nil: none)
	ProgressEvery time.Duration // default 1s
	CPUProfile    io.Writer     `json:"-"` // if set, receives the netcode phase's CPU profile (second half of the window)
	// ProfileConnect makes CPUProfile cover the connect phase instead of
	// the window (the window is still profiled for the CPU attribution).
	ProfileConnect bool
	Logger         *slog.Logger `json:"-"` // the server's logger (nil: silent)
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

// endpoint is a client's connection: a *netcode.Conn or a *net.UDPConn.
type endpoint interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Close() error
}

// client is one simulated client.
type client struct {
	ep    endpoint
	sent  atomic.Uint64
	recv  atomic.Uint64
	hist  Histogram // written by the client's reader goroutine only
	rbuf  [netcode.MaxPayloadBytes]byte
	wbuf  [netcode.MaxPayloadBytes]byte // the reader's send buffer
	err   error                         // why the reader stopped early
	lastR uint64                        // watchdog state
	stall int
}

// run is one phase in progress.
type run struct {
	ctx   context.Context // cancelling it cuts the measurement short
	cfg   *Config
	name  string
	epoch time.Time

	clients   []*client
	measuring atomic.Bool
	stopping  atomic.Bool
	readers   sync.WaitGroup
	senders   sync.WaitGroup
	stopSend  chan struct{}
	// pace is wait's progress ticker (nil until the first wait) and the
	// totals of its last line.
	pace struct {
		tick       *time.Ticker
		t          time.Time
		sent, recv uint64
	}
	// settle is the longest stop waits for the echoes still in flight
	// (default 200ms; payloads not echoed by then count as lost).
	settle time.Duration

	// server side
	srvMu     sync.Mutex
	srvCounts []*atomic.Uint64 // payloads received, one per echo goroutine
	srvEnds   map[string]int
	srvTO     int
	echoes    sync.WaitGroup
}

func newRun(ctx context.Context, cfg *Config, name string) *run {
	return &run{ctx: ctx, cfg: cfg, name: name, epoch: time.Now(), stopSend: make(chan struct{}), srvEnds: map[string]int{}}
}

func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%s] "+format+"\n", append([]any{r.name}, args...)...)
	}
}

// serverCounter registers a counter for a new echo goroutine.
func (r *run) serverCounter() *atomic.Uint64 {
	c := new(atomic.Uint64)
	r.srvMu.Lock()
	r.srvCounts = append(r.srvCounts, c)
	r.srvMu.Unlock()
	return c
}

// serverRecv sums the payloads the server received.
func (r *run) serverRecv() uint64 {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	var n uint64
	for _, c := range r.srvCounts {
		n += c.Load()
	}
	return n
}

func (r *run) serverEnded(err error) {
	if r.stopping.Load() {
		return
	}
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	if errors.Is(err, netcode.ErrConnectionTimedOut) {
		r.srvTO++
	}
	r.srvEnds["server: "+errText(err)]++
}

// send sends one payload stamped with its sequence number and send time.
func (r *run) send(c *client, buf []byte) {
	seq := c.sent.Add(1)
	binary.LittleEndian.PutUint64(buf[0:8], seq)
	binary.LittleEndian.PutUint64(buf[8:16], uint64(time.Since(r.epoch)))
	if _, err := c.ep.Write(buf[:r.cfg.Size]); err != nil {
		c.sent.Add(^uint64(0)) // not sent
	}
}

// reader receives a client's echoes; flat out, each echo sends the next
// payload.
func (r *run) reader(c *client) {
	defer r.readers.Done()
	flat := r.cfg.Rate == 0
	for {
		n, err := c.ep.Read(c.rbuf[:])
		if err != nil {
			if !r.stopping.Load() {
				c.err = err
			}
			return
		}
		if n < MinSize {
			continue
		}
		ts := time.Duration(binary.LittleEndian.Uint64(c.rbuf[8:16]))
		lat := time.Since(r.epoch) - ts
		c.recv.Add(1)
		if r.measuring.Load() {
			c.hist.Record(lat)
		}
		if flat && !r.stopping.Load() {
			r.send(c, c.wbuf[:])
		}
	}
}

// startExchange starts a reader for every connected client, and the
// senders.
func (r *run) startExchange() {
	for _, c := range r.clients {
		if c.ep != nil {
			r.readers.Add(1)
			go r.reader(c)
		}
	}
	r.startTraffic()
}

// startTraffic starts the senders: flat out, every client sends its window
// and a watchdog refills the windows of clients whose payloads were lost;
// at a rate, every client sends one payload each 1/Rate seconds at its own
// phase (sendPhase), spread evenly over the period as a fleet of
// independent clients would be, from one pacer goroutine per pacerGroup
// clients.
func (r *run) startTraffic() {
	if r.cfg.Rate == 0 {
		var buf [netcode.MaxPayloadBytes]byte
		for _, c := range r.clients {
			if c.ep == nil {
				continue
			}
			for range r.cfg.Window {
				r.send(c, buf[:])
			}
		}
		r.senders.Add(1)
		go r.watchdog()
		return
	}
	period := time.Duration(float64(time.Second) / r.cfg.Rate)
	n := len(r.clients)
	groups := (n + pacerGroup - 1) / pacerGroup
	for g := range groups {
		// Group g paces clients g, g+groups, g+2*groups...: their phases
		// are spread over the whole period, and so are the groups'.
		var cs []*client
		var phases []time.Duration
		for i := g; i < n; i += groups {
			cs = append(cs, r.clients[i])
			phases = append(phases, sendPhase(i, n, period))
		}
		r.senders.Add(1)
		go r.pacer(cs, phases, period)
	}
}

// pacerGroup is the most clients one pacer goroutine sends for.
const pacerGroup = 1024

// pacerQuantum is the shortest a pacer sleeps: it sends what fell due
// since it last woke, so a payload leaves up to this late. A timer per
// payload (41k wake-ups a second for 4096 clients at 10 Hz) would cost
// the process more than the clients' own work, on the same CPUs as the
// server.
const pacerQuantum = time.Millisecond

// sendPhase is when, after the exchange starts and then every period,
// client i of n sends: i/n of the period. Clients are not in step: a
// payload from each of n clients at one instant would measure the queue
// behind a burst of n, which no fleet of independent clients makes.
func sendPhase(i, n int, period time.Duration) time.Duration {
	return period * time.Duration(i) / time.Duration(n)
}

// pacer sends for cs, client j at phases[j] (ascending, within the
// period) after the exchange starts and every period after, up to
// pacerQuantum late. A pacer woken later sends what fell due meanwhile,
// at once, and keeps to its schedule.
func (r *run) pacer(cs []*client, phases []time.Duration, period time.Duration) {
	defer r.senders.Done()
	var buf [netcode.MaxPayloadBytes]byte
	start := time.Now()
	t := time.NewTimer(phases[0])
	defer t.Stop()
	for k := 0; ; {
		select {
		case <-t.C:
		case <-r.stopSend:
			return
		}
		now := time.Since(start)
		for ; ; k++ {
			j := k % len(cs)
			due := phases[j] + time.Duration(k/len(cs))*period
			if due > now {
				t.Reset(max(due-now, pacerQuantum))
				break
			}
			if c := cs[j]; c.ep != nil {
				r.send(c, buf[:])
			}
		}
	}
}

// watchdog refills the window of a flat-out client that received nothing
// for two checks in a row (its payloads or echoes were dropped).
func (r *run) watchdog() {
	defer r.senders.Done()
	var buf [netcode.MaxPayloadBytes]byte
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-r.stopSend:
			return
		}
		for _, c := range r.clients {
			if c.ep == nil {
				continue
			}
			n := c.recv.Load()
			if n != c.lastR {
				c.lastR, c.stall = n, 0
				continue
			}
			c.stall++
			if c.stall >= 2 {
				c.stall = 0
				for range r.cfg.Window {
					r.send(c, buf[:])
				}
			}
		}
	}
}

func (r *run) totals() (sent, recv uint64) {
	for _, c := range r.clients {
		sent += c.sent.Load()
		recv += c.recv.Load()
	}
	return
}

// wait lets the exchange run for d (or until the run's context ends),
// printing a progress line with the rates and status() every
// ProgressEvery; the lines keep their pace from one wait to the next.
func (r *run) wait(d time.Duration, stage string, status func() string) {
	end := time.NewTimer(d)
	defer end.Stop()
	if r.cfg.Progress == nil {
		select {
		case <-end.C:
		case <-r.ctx.Done():
		}
		return
	}
	p := &r.pace
	if p.tick == nil {
		p.tick = time.NewTicker(r.cfg.ProgressEvery)
		p.t = time.Now()
		p.sent, p.recv = r.totals()
	}
	for {
		select {
		case <-end.C:
			return
		case <-r.ctx.Done():
			return
		case now := <-p.tick.C:
			s, rc := r.totals()
			dt := now.Sub(p.t).Seconds()
			r.progress("%-7s %6.1fs  payloads/s %9.0f  sent/s %9.0f  %s",
				stage, now.Sub(r.epoch).Seconds(), float64(rc-p.recv)/dt, float64(s-p.sent)/dt, status())
			p.t, p.sent, p.recv = now, s, rc
		}
	}
}

// measure runs the warm-up and the measured window and fills p.
// serverPackets returns the server's payload datagrams so far (in + out).
// serverCPU, if not nil, is the CPU time so far of a server in another
// process: it then gives the server's CPU, and is added to the process's.
func (r *run) measure(p *Phase, serverPackets func() uint64, serverCPU func() time.Duration, profile io.Writer, status func() string) error {
	cfg := r.cfg
	wait := func(d time.Duration, stage string) { r.wait(d, stage, status) }
	if cfg.Warmup > 0 {
		wait(cfg.Warmup, "warmup")
	}

	var ms0, ms1, ms2 runtime.MemStats
	half := cfg.Duration / 2

	// First half: allocations, no profiler.
	runtime.ReadMemStats(&ms0)
	sent0, recv0 := r.totals()
	other := func() time.Duration { return 0 }
	if serverCPU != nil {
		other = serverCPU
	}
	cpu0, srv0 := cpuTime(), other()
	t0 := time.Now()
	r.measuring.Store(true)
	pk0 := serverPackets()
	wait(half, "measure")
	runtime.ReadMemStats(&ms1)
	pk1 := serverPackets()

	// Second half: CPU profile with labels.
	var prof bytes.Buffer
	profiling := pprof.StartCPUProfile(&prof) == nil
	srv1 := other()
	t1 := time.Now()
	wait(cfg.Duration-half, "measure")
	pk2 := serverPackets()
	t2 := time.Now()
	cpu2, srv2 := cpuTime(), other()
	if profiling {
		pprof.StopCPUProfile()
	}
	r.measuring.Store(false)
	sent2, recv2 := r.totals()
	runtime.ReadMemStats(&ms2)

	p.Window = t2.Sub(t0)
	p.Sent = sent2 - sent0
	p.RoundTrips = recv2 - recv0
	p.RoundTripsPerSec = float64(p.RoundTrips) / p.Window.Seconds()
	p.SentPerSec = float64(p.Sent) / p.Window.Seconds()
	p.ProcessCPU = cpu2 - cpu0 + srv2 - srv0
	if p.ProcessCPU > 0 {
		p.EchoesPerCPUSecond = float64(p.RoundTrips) / p.ProcessCPU.Seconds()
	}
	if pk := pk2 - pk0; pk > 0 {
		p.ProcessCPUPerMPacket = time.Duration(float64(p.ProcessCPU) * 1e6 / float64(pk))
	}
	p.AllocPackets = pk1 - pk0
	p.Mallocs = ms1.Mallocs - ms0.Mallocs
	if p.AllocPackets > 0 {
		p.AllocsPerPacket = float64(p.Mallocs) / float64(p.AllocPackets)
	}
	p.GCs = ms2.NumGC - ms0.NumGC
	p.ProfileWindow = t2.Sub(t1)
	p.ServerPackets = pk2 - pk1
	if profiling {
		by, err := cpuBySide(prof.Bytes(), LabelKey)
		if err != nil {
			return fmt.Errorf("bench: reading the CPU profile: %w", err)
		}
		p.ServerCPU = time.Duration(by[SideServer])
		if serverCPU != nil {
			p.ServerCPU = srv2 - srv1
		}
		p.ClientCPU = time.Duration(by[SideClient])
		p.OtherCPU = time.Duration(by[""])
		if p.ServerPackets > 0 {
			p.ServerCPUPerMPacket = time.Duration(float64(p.ServerCPU) * 1e6 / float64(p.ServerPackets))
		}
		if p.ServerCPU > 0 {
			p.EchoesPerServerCPUSecond = float64(p.ServerPackets) / 2 / p.ServerCPU.Seconds()
		}
		if profile != nil {
			if _, err := profile.Write(prof.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop ends the exchange: senders stop, in-flight echoes get up to
// r.settle to arrive, then the clients are closed and the readers
// collected.
func (r *run) stop(p *Phase) {
	r.stopping.Store(true)
	close(r.stopSend)
	if r.pace.tick != nil {
		r.pace.tick.Stop()
	}
	r.senders.Wait()
	settle := r.settle
	if settle <= 0 {
		settle = 200 * time.Millisecond
	}
	for end := time.Now().Add(settle); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if sent, recv := r.totals(); recv >= sent {
			break
		}
	}
	var hist Histogram
	ends := map[string]int{}
	for _, c := range r.clients {
		if c.ep == nil {
			continue
		}
		c.ep.Close()
	}
	r.readers.Wait()
	for _, c := range r.clients {
		if c.ep == nil {
			continue
		}
		hist.Merge(&c.hist)
		s, rc := c.sent.Load(), c.recv.Load()
		if s > rc {
			p.Lost += s - rc
		}
		if c.err != nil {
			ends["client: "+errText(c.err)]++
			if errors.Is(c.err, netcode.ErrConnectionTimedOut) {
				p.Timeouts++
			} else {
				p.Disconnects++
			}
		}
		if nc, ok := c.ep.(*netcode.Conn); ok {
			p.Dropped += nc.Dropped()
		}
	}
	r.srvMu.Lock()
	for k, v := range r.srvEnds {
		ends[k] += v
	}
	p.Timeouts += r.srvTO
	for k, v := range r.srvEnds {
		if k != "server: "+errText(netcode.ErrConnectionTimedOut) {
			p.Disconnects += v
		}
	}
	r.srvMu.Unlock()
	if len(ends) > 0 {
		p.EndErrors = ends
	}
	p.P50 = hist.Quantile(0.50)
	p.P99 = hist.Quantile(0.99)
	p.Max = hist.Max()
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
	if err := checkFDs(cfg.Clients); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg}
	rounds := make([]Round, 0, cfg.Rounds)
	for i := range cfg.Rounds {
		rc := cfg
		if i > 0 {
			rc.CPUProfile = nil // one profile: the first round's
		}
		if cfg.Rounds > 1 && rc.Progress != nil {
			fmt.Fprintf(rc.Progress, "round %d of %d\n", i+1, cfg.Rounds)
		}
		p, err := runNetcode(ctx, &rc)
		if err != nil {
			return nil, err
		}
		r := Round{Netcode: *p}
		if err := ctx.Err(); err != nil {
			return nil, err
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
	res.Netcode, res.Raw, res.Ratio = m.Netcode, m.Raw, m.Ratio
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
func checkFDs(clients int) error {
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

func runNetcode(ctx context.Context, cfg *Config) (*Phase, error) {
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	r := newRun(ctx, cfg, "netcode")
	p := &Phase{Name: "netcode", Clients: cfg.Clients}

	srv, err := startEchoServer(ctx, r, key)
	if err != nil {
		return nil, err
	}
	defer srv.close()

	// Tokens are minted before the clock starts.
	tokens, err := mintTokens(cfg.Clients, cfg.ProtocolID, cfg.TimeoutSeconds, key, srv.addr)
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
	cpu0, srv0 := cpuTime(), srv.cpu()
	var cs connectStats
	labelled(ctx, SideClient, func(ctx context.Context) {
		d := &netcode.Dialer{}
		cs = r.connectAll(ctx, cfg.DialConcurrency, func(ctx context.Context, i int) (endpoint, error) {
			return d.DialContext(ctx, tokens[i])
		})
	})
	srvConnect := srv.cpu() - srv0
	p.ConnectCPU = cpuTime() - cpu0 + srvConnect
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
	var serverCPU func() time.Duration
	if srv.child != nil {
		serverCPU = srv.cpu
	}
	err = r.measure(p, srv.packets, serverCPU, winProfile, srv.status)
	r.stop(p)
	p.ServerStats = srv.stats()
	return p, err
}

// echoServer is the netcode phase's echo server: a Listener in this
// process, with one echo goroutine per connection, or with
// Config.ServerProcess one in a child process.
type echoServer struct {
	r        *run
	addr     netip.AddrPort
	l        *netcode.Listener // in this process
	accepted chan struct{}     // a connection was accepted (in this process)
	child    *childProc        // in a child process
}

// startEchoServer starts r's server; its goroutines in this process carry
// the label bench=server.
func startEchoServer(ctx context.Context, r *run, key crypto.Key) (*echoServer, error) {
	cfg := r.cfg
	s := &echoServer{r: r}
	if cfg.ServerProcess {
		argv := cfg.Child
		if argv == nil {
			var err error
			if argv, err = defaultChild(); err != nil {
				return nil, err
			}
		}
		c, err := startChild(argv, "server", roleServer, hex.EncodeToString(key[:]),
			"-protocol", strconv.FormatUint(cfg.ProtocolID, 10), "-max", strconv.Itoa(cfg.MaxClients),
			"-read-shards", strconv.Itoa(cfg.ReadShards))
		if err != nil {
			return nil, err
		}
		if s.addr, err = netip.ParseAddrPort(c.ready.UDP); err != nil {
			c.stop()
			return nil, fmt.Errorf("bench: the server process's address: %w", err)
		}
		s.child = c
		return s, nil
	}
	var err error
	s.accepted = make(chan struct{}, cfg.Clients)
	labelled(ctx, SideServer, func(ctx context.Context) {
		s.l, err = netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{
			ProtocolID:   cfg.ProtocolID,
			PrivateKey:   key,
			MaxClients:   cfg.MaxClients,
			Socket:       netcode.SocketConfig{ReadShards: cfg.ReadShards},
			Logger:       cfg.Logger,
			TickInterval: cfg.ServerTick,
		})
		if err != nil {
			return
		}
		r.echoes.Add(1)
		go func() {
			defer r.echoes.Done()
			for {
				c, err := s.l.AcceptConn(context.Background())
				if err != nil {
					return
				}
				select {
				case s.accepted <- struct{}{}:
				default:
				}
				r.echoes.Add(1)
				go r.echo(c)
			}
		}()
	})
	if err != nil {
		return nil, err
	}
	s.addr = netip.MustParseAddrPort(s.l.Addr().String())
	return s, nil
}

// close stops the server and waits for its goroutines or its process.
func (s *echoServer) close() {
	if s.child != nil {
		s.child.stop()
		return
	}
	s.l.Close()
	s.r.echoes.Wait()
}

// cpu is the CPU time so far of a server process; 0 in this process.
func (s *echoServer) cpu() time.Duration {
	if s.child == nil {
		return 0
	}
	d, _, _ := s.child.cpu()
	return d
}

// waitAccepted waits (briefly) for the server to have accepted n clients.
func (s *echoServer) waitAccepted(n int) {
	if s.child != nil {
		return // the clients' handshakes completed: the server holds them
	}
	for range n {
		select {
		case <-s.accepted:
		case <-time.After(5 * time.Second):
		}
	}
}

// packets returns the server's payload datagrams so far (in + out): those
// its echo goroutines read, twice, or for a server process two per echo
// the clients received.
func (s *echoServer) packets() uint64 {
	if s.child != nil {
		_, recv := s.r.totals()
		return 2 * recv
	}
	return 2 * s.r.serverRecv()
}

// stats returns the server's counters; nil for a server process.
func (s *echoServer) stats() *netcode.ServerStats {
	if s.child != nil {
		return nil
	}
	st := s.l.Stats()
	return &st
}

// status is the server's part of a progress line.
func (s *echoServer) status() string {
	if s.child != nil {
		return "server: in its own process"
	}
	st := s.l.Stats()
	r := s.r
	r.srvMu.Lock()
	ends := 0
	for _, v := range r.srvEnds {
		ends += v
	}
	r.srvMu.Unlock()
	return fmt.Sprintf("server: connected %d  ended %d  ignored %d", st.Connected, ends, st.Ignored)
}

// connectStats is what connectAll measured.
type connectStats struct {
	connected int
	took      time.Duration  // from the first dial to the last connection
	perSec    float64        // connected / took
	errs      map[string]int // dial errors by text; nil if none
}

// connectAll connects every client of r, concurrency at a time, with dial
// (each in a goroutine of the caller's pprof labels, with a 30 s limit),
// and prints a progress line every ProgressEvery.
func (r *run) connectAll(ctx context.Context, concurrency int, dial func(ctx context.Context, i int) (endpoint, error)) connectStats {
	var (
		connected atomic.Int64
		last      atomic.Int64 // ns after start of the last connection
		errMu     sync.Mutex
		errs      = map[string]int{}
		dials     sync.WaitGroup
	)
	sem := make(chan struct{}, concurrency)
	start := time.Now()
	for i := range r.clients {
		dials.Add(1)
		go func() {
			defer dials.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			ep, err := dial(dctx, i)
			if err != nil {
				errMu.Lock()
				errs[errText(err)]++
				errMu.Unlock()
				return
			}
			for t := int64(time.Since(start)); ; {
				if old := last.Load(); old >= t || last.CompareAndSwap(old, t) {
					break
				}
			}
			connected.Add(1)
			r.clients[i].ep = ep
		}()
	}
	done := make(chan struct{})
	go func() { dials.Wait(); close(done) }()
	tick := time.NewTicker(r.cfg.ProgressEvery)
	defer tick.Stop()
	prev, prevT := int64(0), start
	for {
		select {
		case <-done:
			cs := connectStats{connected: int(connected.Load()), took: time.Duration(last.Load())}
			if cs.connected > 0 && cs.took > 0 {
				cs.perSec = float64(cs.connected) / cs.took.Seconds()
			}
			if len(errs) > 0 {
				cs.errs = errs
			}
			r.progress("connected %d/%d in %v (%.0f connects/s)", cs.connected, len(r.clients), cs.took.Round(time.Millisecond), cs.perSec)
			return cs
		case now := <-tick.C:
			n := connected.Load()
			r.progress("connect %6.1fs  connected %d/%d  (%.0f/s)", now.Sub(start).Seconds(), n, len(r.clients),
				float64(n-prev)/now.Sub(prevT).Seconds())
			prev, prevT = n, now
		}
	}
}

// echo is the server's echo loop for one connection.
func (r *run) echo(c *netcode.Conn) {
	defer r.echoes.Done()
	defer c.Close()
	n := r.serverCounter()
	buf := make([]byte, netcode.MaxPayloadBytes)
	for {
		k, err := c.Read(buf)
		if err != nil {
			r.serverEnded(err)
			return
		}
		n.Add(1)
		if _, err := c.Write(buf[:k]); err != nil {
			r.serverEnded(err)
			return
		}
	}
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

// mintTokens makes one connect token per client (client ids 1 to n) for
// the server at addr, valid for an hour.
func mintTokens(n int, protocolID uint64, timeoutSeconds int32, key crypto.Key, addr netip.AddrPort) ([][]byte, error) {
	tokens := make([][]byte, n)
	for i := range tokens {
		var err error
		tokens[i], err = token.Generate(&token.Params{
			ProtocolID:     protocolID,
			ClientID:       uint64(i + 1),
			PrivateKey:     key,
			ServerAddrs:    []netip.AddrPort{addr},
			ExpireSeconds:  3600,
			TimeoutSeconds: timeoutSeconds,
		})
		if err != nil {
			return nil, err
		}
	}
	return tokens, nil
}
