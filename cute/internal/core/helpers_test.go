package core

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/hydro"
	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/stretchr/testify/require"
)

const testApp = 0x1234

var (
	testSK     [hydro.SecretKeyBytes]byte
	testPK     [hydro.PublicKeyBytes]byte
	testServer = netip.MustParseAddrPort("10.0.0.1:5000")
	t0         = time.Unix(1_700_000_000, 0)
)

func init() { hydro.KeyPairDeterministic(&testSK, &testPK, &[hydro.SeedBytes]byte{42}) }

// tokenOpts tweak a test token.
type tokenOpts struct {
	clientID  uint64
	expire    uint64 // seconds after t0; 0: 60
	handshake uint32 // 0: 5
	userData  [wire.UserDataBytes]byte
	endpoints []netip.AddrPort
	created   time.Time // zero: t0
}

// makeToken mints a token signed with the test key.
func makeToken(t testing.TB, o tokenOpts) []byte {
	t.Helper()
	if o.expire == 0 {
		o.expire = 60
	}
	if o.handshake == 0 {
		o.handshake = 5
	}
	if o.endpoints == nil {
		o.endpoints = []netip.AddrPort{testServer}
	}
	if o.created.IsZero() {
		o.created = t0
	}
	p := &wire.TokenParams{
		ApplicationID: testApp, Created: uint64(o.created.Unix()), Expires: uint64(o.created.Unix()) + o.expire,
		HandshakeTimeout: o.handshake, Endpoints: o.endpoints, ClientID: o.clientID, UserData: o.userData,
	}
	p.ClientToServer[0], p.ServerToClient[0] = byte(o.clientID), byte(o.clientID>>8)|0x80
	p.ClientToServer[1] = byte(o.clientID >> 8)
	tok := new([wire.TokenBytes]byte)
	var iv wire.IV
	var r [32]byte
	hydro.RandomBufDeterministic(iv[:], &[32]byte{byte(o.clientID), 1})
	hydro.RandomBufDeterministic(r[:], &[32]byte{byte(o.clientID), 2})
	require.NoError(t, wire.WriteToken(tok, p, &testSK, &iv, &r))
	return tok[:]
}

// newServer makes a test server.
func newServer(t testing.TB, edit func(*ServerConfig)) (*Server, *History) {
	t.Helper()
	h := NewHistory(4096, 0)
	cfg := ServerConfig{ApplicationID: testApp, PublicKey: testPK, SecretKey: testSK, Addrs: []netip.AddrPort{testServer}, History: h}
	if edit != nil {
		edit(&cfg)
	}
	s, err := NewServer(t0, cfg)
	require.NoError(t, err)
	return s, h
}

// simnet is an in-memory network between one server and its clients, on a
// simulated clock stepped by tick.
type simnet struct {
	t       testing.TB
	now     time.Time
	srv     *Server
	clients map[netip.AddrPort]*Client
	// queued datagrams, by destination
	queue map[netip.AddrPort][][]byte
	from  map[netip.AddrPort][]netip.AddrPort
	// sent records every datagram, by destination
	sent   map[netip.AddrPort][][]byte
	events []Event
	sout   ServerOutput
	cout   ClientOutput
}

func newNet(t testing.TB, srv *Server) *simnet {
	return &simnet{t: t, now: t0, srv: srv, clients: map[netip.AddrPort]*Client{},
		queue: map[netip.AddrPort][][]byte{}, from: map[netip.AddrPort][]netip.AddrPort{}, sent: map[netip.AddrPort][][]byte{}}
}

func (n *simnet) add(addr netip.AddrPort, token []byte) *Client {
	c, err := NewClient(n.now, token, testApp)
	require.NoError(n.t, err)
	n.clients[addr] = c
	return c
}

func (n *simnet) deliver(from netip.AddrPort, d datagrams) {
	for _, m := range d.Datagrams {
		b := append([]byte(nil), m.Buf...)
		n.sent[m.Addr] = append(n.sent[m.Addr], b)
		n.queue[m.Addr] = append(n.queue[m.Addr], append([]byte(nil), b...))
		n.from[m.Addr] = append(n.from[m.Addr], from)
	}
}

func (n *simnet) drain(to netip.AddrPort) ([][]byte, []netip.AddrPort) {
	q, f := n.queue[to], n.from[to]
	n.queue[to], n.from[to] = nil, nil
	return q, f
}

// inject queues a raw datagram to to from from.
func (n *simnet) inject(from, to netip.AddrPort, b []byte) {
	n.queue[to] = append(n.queue[to], append([]byte(nil), b...))
	n.from[to] = append(n.from[to], from)
}

// step advances the clock by dt and runs every client, then the server.
func (n *simnet) step(dt time.Duration) {
	n.now = n.now.Add(dt)
	for addr, c := range n.clients {
		q, f := n.drain(addr)
		for i, b := range q {
			c.Receive(n.now, f[i], b, &n.cout)
			n.deliver(addr, n.cout.datagrams)
		}
		c.Update(n.now, &n.cout)
		n.deliver(addr, n.cout.datagrams)
	}
	if n.srv == nil {
		return
	}
	q, f := n.drain(testServer)
	for i, b := range q {
		n.srv.Receive(n.now, f[i], b, &n.sout)
		n.events = append(n.events, copyEvents(n.sout.Events)...)
		n.deliver(testServer, n.sout.datagrams)
	}
	n.srv.Update(n.now, &n.sout)
	n.events = append(n.events, copyEvents(n.sout.Events)...)
	n.deliver(testServer, n.sout.datagrams)
}

func (n *simnet) run(d, dt time.Duration) {
	for end := n.now.Add(d); n.now.Before(end); {
		n.step(dt)
	}
}

func copyEvents(es []Event) []Event {
	out := make([]Event, len(es))
	for i, e := range es {
		out[i] = e
		out[i].Payload = append([]byte(nil), e.Payload...)
	}
	return out
}
