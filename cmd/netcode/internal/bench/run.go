package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
)

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
	// datagrams, if set, is the server's datagrams of every kind so far,
	// received and sent (netcode: Listener.Stats), for the CPU per
	// datagram beside the CPU per payload.
	datagrams func() uint64
	// wakes, if set, is a server process's goroutine runs and thread
	// context switches so far (ok: both told), for the wake-ups per echo.
	wakes func() (runs, switches uint64, ok bool)
	// settle is the longest stop waits for the echoes still in flight
	// (default 200ms; payloads not echoed by then count as lost).
	settle time.Duration
	// light, with Config.Light, is the generator that runs the clients
	// (nil: each client is a dialed Conn).
	light *lightGen

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
		r.received(c, c.rbuf[:n], flat)
	}
}

// received takes an echo for c: its round trip, and flat out the next
// payload. Only the goroutine that reads c calls it.
func (r *run) received(c *client, p []byte, flat bool) {
	if len(p) < MinSize {
		return
	}
	ts := time.Duration(binary.LittleEndian.Uint64(p[8:16]))
	lat := time.Since(r.epoch) - ts
	c.recv.Add(1)
	if r.measuring.Load() {
		c.hist.Record(lat)
	}
	if flat && !r.stopping.Load() {
		r.send(c, c.wbuf[:])
	}
}

// startExchange starts a reader for every connected client, and the
// senders.
func (r *run) startExchange() {
	for _, c := range r.clients {
		if _, light := c.ep.(*lightConn); c.ep != nil && !light {
			r.readers.Add(1)
			go r.reader(c)
		}
	}
	r.startTraffic()
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
// srvProf, if not nil, profiles that process over the second half.
func (r *run) measure(p *Phase, serverPackets func() uint64, serverCPU func() time.Duration, profile io.Writer, srvProf *serverProfiler, status func() string) error {
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
	if err := srvProf.start(); err != nil {
		return err
	}
	srv1 := other()
	var dg1 uint64
	if r.datagrams != nil {
		dg1 = r.datagrams()
	}
	var runs1, sw1 uint64
	if r.wakes != nil {
		runs1, sw1, _ = r.wakes()
	}
	t1 := time.Now()
	wait(cfg.Duration-half, "measure")
	pk2 := serverPackets()
	var dg2 uint64
	if r.datagrams != nil {
		dg2 = r.datagrams()
	}
	var runs2, sw2 uint64
	wakesOK := false
	if r.wakes != nil {
		runs2, sw2, wakesOK = r.wakes()
	}
	t2 := time.Now()
	cpu2, srv2 := cpuTime(), other()
	if profiling {
		pprof.StopCPUProfile()
	}
	if err := srvProf.stop(); err != nil {
		return err
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
		if p.ServerDatagrams = dg2 - dg1; p.ServerDatagrams > 0 {
			p.ServerCPUPerMDatagram = time.Duration(float64(p.ServerCPU) * 1e6 / float64(p.ServerDatagrams))
		}
		if p.ServerCPU > 0 {
			p.EchoesPerServerCPUSecond = float64(p.ServerPackets) / 2 / p.ServerCPU.Seconds()
		}
		if echoes := float64(p.ServerPackets) / 2; wakesOK && echoes > 0 {
			p.ServerRunsPerEcho = float64(runs2-runs1) / echoes
			p.ServerSwitchesPerEcho = float64(sw2-sw1) / echoes
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
	if r.light != nil {
		r.light.close()
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
		if lc, ok := c.ep.(*lightConn); ok {
			c.err = lc.endErr()
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
func (r *run) echo(c endpoint) {
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
