package bench

// The light generator (Config.Light): many simulated netcode clients per
// UDP socket, driven by the I/O-free client core (internal/client) instead
// of one dialed netcode.Conn each.
//
// A dialed Conn is a socket, a reader goroutine and a keep-alive timer;
// at 16,384 clients the generator spent more CPU on them (55% in the
// timers) than the server it measured. Here lightGroupSize clients share
// one socket bound to 0.0.0.0 on one port, each with its own source
// address in 127.0.0.0/8 (IP_PKTINFO: the source is set per datagram on
// the way out, and the destination, which names the client, is read on
// the way in). The server sees one address per client, as from a fleet
// of machines, and the real protocol from the core; it cannot tell these
// clients from dialed ones. Per group, one goroutine reads the socket in
// batches (recvmmsg) and one ticker runs every client's Update when its
// Output.Next falls due (keep-alives, timeouts), lightTick apart at most.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/gonetcode/netcode"
	clientcore "github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/protocol"
)

// lightGroupSize is how many light clients share a socket, its reader
// goroutine and its ticker.
const lightGroupSize = pacerGroup

// lightTick is how often a group's ticker looks for clients whose Update
// is due: a keep-alive or timeout acts up to this late.
const lightTick = 10 * time.Millisecond

// lightBatch is how many datagrams a group's reader takes per read.
const lightBatch = 64

// lightGen is the light generator of one run: its groups of clients.
type lightGen struct {
	r      *run
	server netip.AddrPort
	groups []*lightGroup
	conns  []*lightConn // client i's, in order
	stop   chan struct{}
	hold   bool // Writes are held for flush (Config.Rate: the pacer sends them)
	once   sync.Once
	wg     sync.WaitGroup // the groups' goroutines
}

// lightGroup is the clients that share one socket.
type lightGroup struct {
	gen    *lightGen
	conn   *net.UDPConn
	pc     *ipv4.PacketConn
	byAddr map[netip.Addr]*lightConn // read-only once built
	conns  []*lightConn

	// held is the payloads its clients' Writes sealed at a rate (held,
	// set for Config.Rate), sent by the pacer's flush with one sendmmsg
	// per lightBatch instead of a sendmsg each: at 8,192 clients and
	// 10 Hz the generator spent more than a quarter of its CPU in those.
	hmu  sync.Mutex
	held lightOut
}

// lightOut is a batch of datagrams for one socket, each with its own
// source address (IP_PKTINFO), sent with sendmmsg.
type lightOut struct {
	msgs []ipv4.Message
	bufs []byte
	n    int
}

func newLightOut(server netip.AddrPort) lightOut {
	o := lightOut{msgs: make([]ipv4.Message, lightBatch), bufs: make([]byte, lightBatch*protocol.MaxPacketBytes)}
	addr := net.UDPAddrFromAddrPort(server)
	for i := range o.msgs {
		o.msgs[i].Buffers = [][]byte{nil}
		o.msgs[i].Addr = addr
	}
	return o
}

// add copies d, from the address whose IP_PKTINFO is oob, into the batch,
// sending the batch to pc first if it is full.
func (o *lightOut) add(pc *ipv4.PacketConn, d, oob []byte) {
	if o.n == len(o.msgs) {
		o.send(pc)
	}
	b := o.bufs[o.n*protocol.MaxPacketBytes:]
	o.msgs[o.n].Buffers[0] = b[:copy(b, d)]
	o.msgs[o.n].OOB = oob
	o.n++
}

// send sends the batch to pc and empties it; a datagram the socket
// refuses ends the batch, as a lost datagram.
func (o *lightOut) send(pc *ipv4.PacketConn) {
	for k := 0; k < o.n; {
		w, err := pc.WriteBatch(o.msgs[k:o.n], 0)
		if err != nil {
			break
		}
		k += w
	}
	o.n = 0
}

// lightConn is one light client: an endpoint for the run (Write sends a
// payload, Close disconnects; its group's reader delivers the echoes).
type lightConn struct {
	g    *lightGroup
	c    *client // the run's record of it
	src  netip.Addr
	oob  []byte // IP_PKTINFO with the source address, for every send
	core atomic.Pointer[clientcore.Client]
	next atomic.Int64 // when Update is due, Unix ns; MaxInt64: never

	ready     chan struct{} // closed when connected
	readyOnce sync.Once
	done      chan struct{} // closed when the connection ended
	endOnce   sync.Once
	err       error // why it ended before the run stopped; set under endOnce
	closed    atomic.Bool
}

// outputs are Outputs for Write and Close, which any goroutine may call.
var outputs = sync.Pool{New: func() any { return new(clientcore.Output) }}

// lightAddr is client i's source address: 127.a.b.c with a, b and c in
// 1..254.
func lightAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + i/(254*254)), byte(1 + i/254%254), byte(1 + i%254)})
}

// lightMaxClients is how many source addresses lightAddr has.
const lightMaxClients = 254 * 254 * 254

// newLightGen opens the sockets for the run's clients, whose server is at
// server, and starts each group's reader and ticker. They run until close.
func newLightGen(r *run, server netip.AddrPort) (*lightGen, error) {
	if len(r.clients) > lightMaxClients {
		return nil, fmt.Errorf("bench: the light generator runs at most %d clients", lightMaxClients)
	}
	if !server.Addr().Is4() || !server.Addr().IsLoopback() {
		return nil, fmt.Errorf("bench: the light generator needs an IPv4 loopback server, not %v", server)
	}
	gen := &lightGen{r: r, server: server, stop: make(chan struct{}), hold: r.cfg.Rate > 0}
	for start := 0; start < len(r.clients); start += lightGroupSize {
		g, err := gen.newGroup(start, min(start+lightGroupSize, len(r.clients)))
		if err != nil {
			gen.close()
			return nil, err
		}
		gen.groups = append(gen.groups, g)
	}
	for _, g := range gen.groups {
		gen.wg.Add(2)
		go g.read()
		go g.tick()
	}
	return gen, nil
}

func (gen *lightGen) newGroup(start, end int) (*lightGroup, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, fmt.Errorf("bench: light generator: %w", err)
	}
	pc := ipv4.NewPacketConn(conn)
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		conn.Close()
		return nil, fmt.Errorf("bench: the light generator needs IP_PKTINFO (Linux): %w", err)
	}
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)
	g := &lightGroup{gen: gen, conn: conn, pc: pc, byAddr: make(map[netip.Addr]*lightConn, end-start), held: newLightOut(gen.server)}
	for i := start; i < end; i++ {
		lc := &lightConn{g: g, c: gen.r.clients[i], src: lightAddr(i), ready: make(chan struct{}), done: make(chan struct{})}
		lc.oob = (&ipv4.ControlMessage{Src: lc.src.AsSlice()}).Marshal()
		lc.next.Store(math.MaxInt64)
		g.byAddr[lc.src] = lc
		g.conns = append(g.conns, lc)
		gen.conns = append(gen.conns, lc)
	}
	return g, nil
}

// close stops the groups' goroutines and closes their sockets; it may be
// called more than once.
func (gen *lightGen) close() {
	gen.once.Do(func() {
		close(gen.stop)
		for _, g := range gen.groups {
			g.conn.Close()
		}
		gen.wg.Wait()
	})
}

// dial connects client i with its connect token: the handshake runs in
// the group's goroutines, and dial waits for its end.
func (gen *lightGen) dial(ctx context.Context, i int, tok []byte) (endpoint, error) {
	lc := gen.conns[i]
	now := time.Now()
	core := clientcore.New(now, tok, nil)
	if s := core.State(); s < 0 {
		return nil, stateErr(s)
	}
	lc.core.Store(core)
	out := outputs.Get().(*clientcore.Output)
	core.Update(now, out)
	lc.g.acted(lc, out)
	outputs.Put(out)
	select {
	case <-lc.ready:
		return lc, nil
	case <-lc.done:
		return nil, lc.err
	case <-ctx.Done():
		lc.end(ctx.Err())
		return nil, ctx.Err()
	}
}

// stateErr is the error a dialed Conn would return for final state s.
func stateErr(s clientcore.State) error {
	switch s {
	case clientcore.ConnectionTimedOut:
		return netcode.ErrConnectionTimedOut
	case clientcore.Disconnected:
		return io.EOF
	}
	return errors.New("netcode: " + s.String())
}

// acted sends out's datagrams for lc and follows its state and next
// Update.
func (g *lightGroup) acted(lc *lightConn, out *clientcore.Output) {
	for _, d := range out.Datagrams {
		g.conn.WriteMsgUDPAddrPort(d.Buf, lc.oob, g.gen.server)
	}
	lc.follow(out)
}

// follow follows lc's state and next Update after a call that filled out.
func (lc *lightConn) follow(out *clientcore.Output) {
	if out.Changed() {
		switch {
		case out.To == clientcore.Connected:
			lc.readyOnce.Do(func() { close(lc.ready) })
		case out.To <= clientcore.Disconnected:
			lc.end(stateErr(out.To))
		}
	}
	if out.Next.IsZero() {
		lc.next.Store(math.MaxInt64)
	} else {
		lc.next.Store(out.Next.UnixNano())
	}
}

// end records that lc's connection ended with err: a failure, unless the
// run is stopping.
func (lc *lightConn) end(err error) {
	lc.endOnce.Do(func() {
		if !lc.g.gen.r.stopping.Load() && !lc.closed.Load() {
			lc.err = err
		}
		lc.next.Store(math.MaxInt64)
		close(lc.done)
	})
}

// read is a group's reader: it hands each datagram to the core of the
// client it was sent to, and each echo to the run.
func (g *lightGroup) read() {
	defer g.gen.wg.Done()
	msgs := make([]ipv4.Message, lightBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, protocol.MaxPacketBytes)}
		msgs[i].OOB = ipv4.NewControlMessage(ipv4.FlagDst)
	}
	var out clientcore.Output
	var cm ipv4.ControlMessage
	for {
		n, err := g.pc.ReadBatch(msgs, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		now := time.Now()
		for _, m := range msgs[:n] {
			if cm.Parse(m.OOB[:m.NN]) != nil || cm.Dst == nil {
				continue
			}
			dst, _ := netip.AddrFromSlice(cm.Dst)
			lc := g.byAddr[dst.Unmap()]
			if lc == nil {
				continue
			}
			core := lc.core.Load()
			from, ok := m.Addr.(*net.UDPAddr)
			if core == nil || !ok {
				continue
			}
			core.Receive(now, from.AddrPort(), m.Buffers[0][:m.N], &out)
			if p := out.Payload; p != nil {
				g.gen.r.received(lc.c, p, g.gen.r.cfg.Rate == 0)
			}
			g.acted(lc, &out)
			if due := lc.next.Load(); due <= now.UnixNano() {
				core.Update(now, &out)
				g.acted(lc, &out)
			}
		}
	}
}

// tick is a group's ticker: every lightTick, it runs the Update of each
// client whose Update is due, and sends what they send (keep-alives,
// mostly) in batches of lightBatch (sendmmsg).
func (g *lightGroup) tick() {
	defer g.gen.wg.Done()
	t := time.NewTicker(lightTick)
	defer t.Stop()
	var out clientcore.Output
	batch := newLightOut(g.gen.server)
	for {
		select {
		case <-t.C:
		case <-g.gen.stop:
			return
		}
		now := time.Now()
		ns := now.UnixNano()
		for _, lc := range g.conns {
			if lc.next.Load() > ns {
				continue
			}
			core := lc.core.Load()
			if core == nil {
				continue
			}
			core.Update(now, &out)
			for _, d := range out.Datagrams {
				batch.add(g.pc, d.Buf, lc.oob)
			}
			lc.follow(&out)
		}
		batch.send(g.pc)
	}
}

// Write sends one payload to the server.
func (lc *lightConn) Write(p []byte) (int, error) {
	if lc.closed.Load() {
		return 0, net.ErrClosed
	}
	out := outputs.Get().(*clientcore.Output)
	defer outputs.Put(out)
	if err := lc.core.Load().Send(time.Now(), p, out); err != nil {
		return 0, err
	}
	g := lc.g
	if !g.gen.hold {
		g.acted(lc, out)
		return len(p), nil
	}
	g.hmu.Lock()
	for _, d := range out.Datagrams {
		g.held.add(g.pc, d.Buf, lc.oob)
	}
	g.hmu.Unlock()
	lc.follow(out)
	return len(p), nil
}

// flush sends the payloads the groups' Writes hold; the pacer calls it
// each time it has sent what fell due.
func (gen *lightGen) flush() {
	for _, g := range gen.groups {
		g.hmu.Lock()
		if g.held.n > 0 {
			g.held.send(g.pc)
		}
		g.hmu.Unlock()
	}
}

// Read is not used: the group's reader delivers the echoes.
func (lc *lightConn) Read([]byte) (int, error) {
	return 0, errors.New("bench: a light client is read by its group")
}

// Close disconnects, sending the disconnect packets as a dialed Conn's
// Close does.
func (lc *lightConn) Close() error {
	if lc.closed.Swap(true) {
		return nil
	}
	out := outputs.Get().(*clientcore.Output)
	defer outputs.Put(out)
	lc.core.Load().Disconnect(out)
	lc.g.acted(lc, out)
	lc.end(nil)
	return nil
}

// endErr is why the connection ended before the run stopped, or nil.
// Call it once the group's goroutines have stopped.
func (lc *lightConn) endErr() error { return lc.err }
