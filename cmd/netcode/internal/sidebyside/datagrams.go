package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cmd/netcode/internal/bench"
	"github.com/quic-go/quic-go"
)

// datagramTransports are the echo servers and clients datagrams compares.
var datagramTransports = []string{"quic", "netcode", "udp"}

// dgConfig is one datagrams run.
type dgConfig struct {
	Transport        string
	Clients, Window  int
	Size             int
	Warmup, Duration time.Duration
	BaseExe          string // the server process of baseTransport
	CrefExe          string // the server process of crefTransport (cref/cserver.c)
	// ProcCPU reads the server process's CPU time from /proc/PID/stat
	// (cref -server-only, where the C server does not answer "cpu")
	// rather than asking the process.
	ProcCPU bool
}

// dgResult is what one run measured.
type dgResult struct {
	Transport string
	Clients   int
	// EchoesPerSec is echoes received per second of the window.
	EchoesPerSec float64
	// PerServerCPU is echoes per second of the server process's CPU;
	// PerCPU per second of both processes' CPU.
	PerServerCPU, PerCPU float64
	P50, P99             time.Duration
	// PacketsPerEcho is the server's packets to the clients per echo in
	// the window, where the transport counts them (quic-go); 0 elsewhere.
	PacketsPerEcho float64
	// Lost is payloads sent and never echoed, over the whole exchange
	// (the watchdog sends a stalled client's window again), after the
	// echoes in flight had 200 ms to arrive.
	Lost uint64
}

// dgEndpoint is a client's connection: one Read is one datagram.
type dgEndpoint interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Close() error
}

// quicDatagrams is a quic-go connection's DATAGRAM frames as a dgEndpoint.
type quicDatagrams struct{ c *quic.Conn }

func (q quicDatagrams) Read(b []byte) (int, error) {
	p, err := q.c.ReceiveDatagram(context.Background())
	return copy(b, p), err
}

func (q quicDatagrams) Write(b []byte) (int, error) { return len(b), q.c.SendDatagram(b) }
func (q quicDatagrams) Close() error                { return q.c.CloseWithError(0, "") }

// packetsReceived is the QUIC packets the connection received: the
// server's packets to this client, of which one may carry several DATAGRAM
// frames, and acknowledgements.
func (q quicDatagrams) packetsReceived() uint64 { return q.c.ConnectionStats().PacketsReceived }

// packetCounter is an endpoint that counts the packets it received.
type packetCounter interface{ packetsReceived() uint64 }

// dgClient is one client of a run.
type dgClient struct {
	ep         dgEndpoint
	sent, recv atomic.Uint64
	hist       bench.Histogram // its reader's only
	rbuf, wbuf [netcode.MaxPayloadBytes]byte
	lastRecv   uint64 // the watchdog's
	stalled    int
}

// dgRun is a run in progress.
type dgRun struct {
	cfg       dgConfig
	epoch     time.Time
	clients   []*dgClient
	measuring atomic.Bool
	stopping  atomic.Bool
	readers   sync.WaitGroup
	closeOnce sync.Once
}

// dial connects client i to the server at addr.
func (r *dgRun) dial(ctx context.Context, addr string, key []byte, i int) (dgEndpoint, error) {
	switch r.cfg.Transport {
	case "udp":
		ua, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return nil, err
		}
		return net.DialUDP("udp4", nil, ua)
	case "netcode", baseTransport, crefTransport:
		tok, err := mint(key, addr, uint64(i)+1)
		if err != nil {
			return nil, err
		}
		return netcode.DialContext(ctx, tok)
	case "quic":
		c, err := quic.DialAddr(ctx, addr, clientTLS(), quicDatagramConfig())
		if err != nil {
			return nil, err
		}
		return quicDatagrams{c}, nil
	}
	return nil, fmt.Errorf("no datagram transport %q", r.cfg.Transport)
}

// send sends one payload from c, stamped with its sequence number and
// send time.
func (r *dgRun) send(c *dgClient, buf []byte) {
	seq := c.sent.Add(1)
	binary.LittleEndian.PutUint64(buf[0:8], seq)
	binary.LittleEndian.PutUint64(buf[8:16], uint64(time.Since(r.epoch)))
	if _, err := c.ep.Write(buf[:r.cfg.Size]); err != nil {
		c.sent.Add(^uint64(0))
	}
}

// reader takes c's echoes: each one's round trip, and the next payload.
func (r *dgRun) reader(c *dgClient) {
	defer r.readers.Done()
	for {
		n, err := c.ep.Read(c.rbuf[:])
		if err != nil {
			return
		}
		if n < 16 {
			continue
		}
		sent := time.Duration(binary.LittleEndian.Uint64(c.rbuf[8:16]))
		c.recv.Add(1)
		if r.measuring.Load() {
			c.hist.Record(time.Since(r.epoch) - sent)
		}
		if !r.stopping.Load() {
			r.send(c, c.wbuf[:])
		}
	}
}

// watchdog sends the window again for a client that received nothing for
// two checks in a row (datagrams were dropped), until stop closes.
func (r *dgRun) watchdog(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, netcode.MaxPayloadBytes)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		for _, c := range r.clients {
			if n := c.recv.Load(); n != c.lastRecv {
				c.lastRecv, c.stalled = n, 0
				continue
			}
			if c.stalled++; c.stalled >= 2 {
				c.stalled = 0
				for range r.cfg.Window {
					r.send(c, buf)
				}
			}
		}
	}
}

// settle stops the clients' sending and waits up to 200 ms for the echoes
// still in flight, so that Lost counts what was dropped.
func (r *dgRun) settle() {
	r.stopping.Store(true)
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var sent, recv uint64
		for _, c := range r.clients {
			sent += c.sent.Load()
			recv += c.recv.Load()
		}
		if recv >= sent {
			return
		}
	}
}

// close stops the exchange: the clients close and their readers end.
func (r *dgRun) close() {
	r.closeOnce.Do(func() {
		r.stopping.Store(true)
		for _, c := range r.clients {
			if c.ep != nil {
				c.ep.Close()
			}
		}
		r.readers.Wait()
	})
}

// packets returns the packets the clients received so far, if their
// transport counts them.
func (r *dgRun) packets() (n uint64, ok bool) {
	for _, c := range r.clients {
		pc, isPC := c.ep.(packetCounter)
		if !isPC {
			return 0, false
		}
		n += pc.packetsReceived()
	}
	return n, true
}

func (r *dgRun) received() uint64 {
	var n uint64
	for _, c := range r.clients {
		n += c.recv.Load()
	}
	return n
}

// runDatagram runs one configuration: a server process, the clients, a
// warm-up and the measured window.
func runDatagram(ctx context.Context, cfg dgConfig) (res dgResult, err error) {
	key, err := netcodeKey()
	if err != nil {
		return res, err
	}
	kind, exe, args := cfg.Transport, "", []string(nil)
	switch kind {
	case baseTransport:
		kind, exe = "netcode", cfg.BaseExe
	case crefTransport:
		exe, args = cfg.CrefExe, []string{strconv.Itoa(cfg.Clients)}
	}
	srv, err := startChild(exe, key, append([]string{kind}, args...)...)
	if err != nil {
		return res, err
	}
	serverCPU := srv.cpu
	if cfg.ProcCPU {
		serverCPU = func() (time.Duration, error) { return procCPU(srv.cmd.Process.Pid) }
	}
	defer func() {
		if serr := srv.stop(); err == nil {
			err = serr
		}
	}()
	r := &dgRun{cfg: cfg, epoch: time.Now(), clients: make([]*dgClient, cfg.Clients)}
	var (
		dials  sync.WaitGroup
		dialMu sync.Mutex
		first  error
	)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range r.clients {
		r.clients[i] = &dgClient{}
		dials.Go(func() {
			ep, err := r.dial(dctx, srv.addr, key, i)
			dialMu.Lock()
			defer dialMu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("%s client %d: %w", cfg.Transport, i, err)
			}
			r.clients[i].ep = ep
		})
	}
	dials.Wait()
	defer r.close()
	if first != nil {
		return res, first
	}
	for _, c := range r.clients {
		r.readers.Add(1)
		go r.reader(c)
	}
	// The first window from a buffer of its own: c.wbuf is the reader's,
	// which is already sending on the first echoes.
	firstWindow := make([]byte, netcode.MaxPayloadBytes)
	for _, c := range r.clients {
		for range cfg.Window {
			r.send(c, firstWindow)
		}
	}
	stop := make(chan struct{})
	var wd sync.WaitGroup
	wd.Add(1)
	go r.watchdog(stop, &wd)
	defer func() {
		if stop != nil {
			close(stop)
			wd.Wait()
		}
	}()

	if err := sleepCtx(ctx, cfg.Warmup); err != nil {
		return res, err
	}
	cpu0 := cpuTime()
	srv0, err := serverCPU()
	if err != nil {
		return res, err
	}
	t0, n0 := time.Now(), r.received()
	pk0, counted := r.packets()
	r.measuring.Store(true)
	if err := sleepCtx(ctx, cfg.Duration); err != nil {
		return res, err
	}
	r.measuring.Store(false)
	t1, n1 := time.Now(), r.received()
	pk1, _ := r.packets()
	cpu1 := cpuTime()
	srv1, err := serverCPU()
	if err != nil {
		return res, err
	}
	close(stop)
	wd.Wait()
	stop = nil
	r.settle()
	r.close()

	echoes := float64(n1 - n0)
	res = dgResult{Transport: cfg.Transport, Clients: cfg.Clients, EchoesPerSec: echoes / t1.Sub(t0).Seconds()}
	if counted && echoes > 0 {
		res.PacketsPerEcho = float64(pk1-pk0) / echoes
	}
	if s := srv1 - srv0; s > 0 {
		res.PerServerCPU = echoes / s.Seconds()
		res.PerCPU = echoes / (s + cpu1 - cpu0).Seconds()
	}
	var h bench.Histogram
	for _, c := range r.clients {
		h.Merge(&c.hist)
		if s, rc := c.sent.Load(), c.recv.Load(); s > rc {
			res.Lost += s - rc
		}
	}
	res.P50, res.P99 = h.Quantile(0.5), h.Quantile(0.99)
	return res, nil
}

func runDatagrams(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("datagrams", stderr)
	clients := fs.String("clients", "1,16,64", "client counts, comma-separated")
	transports := fs.String("transports", "quic,netcode,udp", "transports to compare, comma-separated: quic (quic-go DATAGRAM frames), netcode, udp (plain)")
	window := fs.Int("window", 8, "payloads in flight per client")
	size := fs.Int("size", 100, "payload bytes (16..1200)")
	rounds := fs.Int("rounds", 3, "rounds; the table gives medians")
	duration := fs.Duration("duration", 3*time.Second, "measured window of each run")
	warmup := fs.Duration("warmup", time.Second, "unmeasured exchange before the window")
	base := fs.String("base", "", "a worktree of this repository (e.g. main at the commit a change started from): also run its netcode server, as transport netcode-base, beside this worktree's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := intList(*clients)
	if err != nil {
		return err
	}
	ts, err := nameList(*transports, datagramTransports...)
	if err != nil {
		return err
	}
	if *size < 16 || *size > netcode.MaxPayloadBytes || *window < 1 || *rounds < 1 {
		return fmt.Errorf("-size 16..%d, -window and -rounds at least 1", netcode.MaxPayloadBytes)
	}
	baseExe, cleanup, err := buildBaseFlag(ctx, *base)
	if err != nil {
		return err
	}
	defer cleanup()
	if baseExe != "" {
		ts = insertAfter(ts, "netcode", baseTransport)
		fmt.Fprintf(stdout, "netcode-base: the netcode server of %s (clients: this worktree's)\n", *base)
	}
	fmt.Fprintf(stdout, "datagrams: window %d, %d-byte payloads, %v windows after %v warm-up, %d rounds\nuptime before: %s\n",
		*window, *size, *duration, *warmup, *rounds, uptime())
	var all []dgResult
	for round := range *rounds {
		for _, n := range ns {
			for _, t := range rotated(ts, round) {
				res, err := runDatagram(ctx, dgConfig{Transport: t, Clients: n, Window: *window, Size: *size, Warmup: *warmup, Duration: *duration, BaseExe: baseExe})
				if err != nil {
					return fmt.Errorf("round %d, %s, %d clients: %w", round+1, t, n, err)
				}
				fmt.Fprintf(stderr, "round %d: %s\n", round+1, res)
				all = append(all, res)
			}
		}
	}
	printDatagramTable(stdout, all, ns, ts)
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}
