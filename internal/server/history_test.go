package server

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addrN(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 50, byte(i >> 8), byte(i)}), 1000)
}

// recSink collects what a core's calls send: the Output they append to,
// reset only by take.
type recSink struct{ Output }

// pkts are the datagrams sent so far.
func (s *recSink) pkts() [][]byte {
	var p [][]byte
	for _, m := range s.Datagrams {
		p = append(p, m.Buf)
	}
	return p
}

// to are their destinations.
func (s *recSink) to() []netip.AddrPort {
	var to []netip.AddrPort
	for _, m := range s.Datagrams {
		to = append(to, m.Addr)
	}
	return to
}

// take returns what was sent (copies) and forgets it.
func (s *recSink) take() ([]netip.AddrPort, [][]byte) {
	to := s.to()
	var p [][]byte
	for _, m := range s.Datagrams {
		p = append(p, append([]byte(nil), m.Buf...))
	}
	s.Reset()
	return to, p
}

// record keeps the datagrams a client core's call put in out.
func (s *recSink) record(out *client.Output) {
	for _, m := range out.Datagrams {
		s.Datagrams = append(s.Datagrams, transport.Message{Buf: append([]byte(nil), m.Buf...), Addr: m.Addr})
	}
}

// harness runs client cores against one server core on a perfect network.
type harness struct {
	t    *testing.T
	now  time.Time
	srv  *Server
	out  recSink // the server's packets
	seen [][]byte
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.ProtocolID == 0 {
		cfg.ProtocolID = protocolID
	}
	if cfg.PrivateKey == (crypto.Key{}) {
		cfg.PrivateKey = privKey
	}
	if cfg.Addrs == nil {
		cfg.Addrs = []netip.AddrPort{self}
	}
	if cfg.Now.IsZero() {
		cfg.Now = epoch
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return &harness{t: t, now: cfg.Now, srv: s}
}

// exchange runs one round: the client's due packets to the server, the
// server's answers to the client, then time moves on by 100 ms.
func (h *harness) exchange(c *client.Client, from netip.AddrPort) {
	var (
		cs  recSink
		out client.Output
	)
	c.Update(h.now, &out)
	cs.record(&out)
	for _, p := range cs.pkts() {
		h.srv.Receive(h.now, from, p, &h.out.Output)
	}
	h.srv.Update(h.now, &h.out.Output)
	h.srv.Log(&h.out.Output)
	to, pkts := h.out.take()
	for i, p := range pkts {
		if to[i] == from {
			h.seen = append(h.seen, append([]byte(nil), p...))
			c.Receive(h.now, self, p, &out)
		}
	}
	h.now = h.now.Add(100 * time.Millisecond)
}

// dial runs a client with tok from addr for at most rounds rounds, or
// until it connects.
func (h *harness) dial(tok []byte, from netip.AddrPort, rounds int) *client.Client {
	c := client.New(h.now, tok, nil)
	for range rounds {
		if c.State() == client.Connected || c.State() < 0 {
			break
		}
		h.exchange(c, from)
	}
	return c
}

// tokenWith mints a token for self, sealed with key, with nonce and keys
// made from n so that tokens differ.
func tokenWith(t testing.TB, key crypto.Key, n int, created time.Time) []byte {
	t.Helper()
	tok, err := tokentest.GenerateWith(token.Params{
		ProtocolID:     protocolID,
		ClientID:       uint64(1000 + n),
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{self},
		ExpireSeconds:  60,
		TimeoutSeconds: 5,
	}, uint64(created.Unix()), [crypto.TokenNonceBytes]byte{0: byte(n), 1: byte(n >> 8), 2: byte(n >> 16), 23: 1}, crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 1}, crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 2})
	require.NoError(t, err)
	return tok
}

// requestOf is the connection request a client sends for tok.
func requestOf(t testing.TB, tok []byte) []byte {
	t.Helper()
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	return protocol.AppendConnectionRequest(nil, ct.ProtocolID, ct.ExpireTimestamp, &ct.Nonce, ct.PrivateData[:])
}

// fillHistory makes n connections with tokens n0, n0+1, ... and ends
// each, so that the history remembers their n tokens.
func fillHistory(tb testing.TB, s *Server, n0, n int, now time.Time) {
	tb.Helper()
	var out Output
	for i := range n {
		p := connectPeer(tb, s, n0+i, now, 5)
		s.Disconnect(p.c, &out)
		out.Reset()
	}
}

// TestRequestFloodRecordsNothing is the token flood of issue 36: a holder
// of more valid tokens than the history holds sends one request per token
// and never answers a challenge. Nothing is recorded, the flood's
// handshakes are dropped oldest first, and a fresh client connects
// during it.
func TestRequestFloodRecordsNothing(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 4, History: 64})
	var sink recSink
	flood := 3 * h.srv.Stats().HistoryLimit
	for i := 1; i <= flood; i++ {
		h.srv.Receive(h.now, addrN(i), requestOf(t, tokenWith(t, privKey, i, h.now)), &sink.Output)
	}
	st := h.srv.Stats()
	assert.Zero(t, st.History, "no request is recorded before its challenge is answered")
	assert.Zero(t, st.HistoryFull)
	assert.Equal(t, st.MappingsLimit, st.Mappings, "the flood's handshakes fill the mappings")
	assert.Equal(t, uint64(flood), st.ChallengesSent)
	c := h.dial(tokenWith(t, privKey, flood+1, h.now), netip.MustParseAddrPort("10.60.0.9:5000"), 20)
	assert.Equal(t, client.Connected, c.State(), "a fresh client connects during the flood")
	assert.Equal(t, 1, h.srv.Stats().History, "its token is recorded when it connects")
}

// TestHistoryFullNeverForgets: however many other tokens connect, a token
// that connected never connects again while it is valid; a full history
// refuses new tokens instead of forgetting old ones; once tokens expire,
// new ones are accepted again.
func TestHistoryFullNeverForgets(t *testing.T) {
	h := newHarness(t, Config{MaxClients: 1, History: 64})
	limit := h.srv.Stats().HistoryLimit
	require.Equal(t, 64, limit)

	tok := tokenWith(t, privKey, 0, h.now)
	player := netip.MustParseAddrPort("10.60.0.1:5000")
	c := h.dial(tok, player, 20)
	require.Equal(t, client.Connected, c.State())
	var (
		cs  recSink
		out client.Output
	)
	c.Disconnect(&out)
	cs.record(&out)
	for _, p := range cs.pkts() {
		h.srv.Receive(h.now, player, p, &h.out.Output)
	}
	require.Zero(t, h.srv.Stats().Connected)

	// The history fills with tokens that connected.
	fillHistory(t, h.srv, 1, limit-1, h.now)
	require.Equal(t, limit, h.srv.Stats().History, "full")
	var sink recSink
	for i := range 10 {
		h.srv.Receive(h.now, addrN(500+i), requestOf(t, tokenWith(t, privKey, 500+i, h.now)), &sink.Output)
	}
	st := h.srv.Stats()
	assert.Equal(t, uint64(10), st.HistoryFull, "every new token refused and counted")
	assert.Empty(t, sink.pkts(), "and not answered")

	// The consumed token, dialed again from its own address: refused,
	// and nothing is sent to it.
	before := h.srv.Stats()
	h.out.take()
	c2 := h.dial(tok, player, 15)
	assert.NotEqual(t, client.Connected, c2.State())
	after := h.srv.Stats()
	assert.Equal(t, before.ConnectionsOpened, after.ConnectionsOpened)
	assert.Positive(t, after.TokenReuseRefused-before.TokenReuseRefused)
	assert.Empty(t, h.out.pkts())

	// After the tokens expire (connectPeer's live an hour), a new token
	// connects.
	h.now = h.now.Add(3601 * time.Second)
	h.srv.Update(h.now, &sink.Output)
	assert.Zero(t, h.srv.Stats().History)
	c3 := h.dial(tokenWith(t, privKey, 600, h.now), netip.MustParseAddrPort("10.60.0.2:5000"), 20)
	assert.Equal(t, client.Connected, c3.State())
}

// TestConnectionSequenceFromServerClock: the server's first sequence
// number on a connection comes from its own clock, whatever sequence the
// client's response carried; the reference's 0 only with
// ReferenceSequences.
func TestConnectionSequenceFromServerClock(t *testing.T) {
	tests := []struct {
		name      string
		clientSeq uint64
		reference bool
	}{
		{"client counts from 0", 0, false},
		{"client counts from the token's age", 5_000_000, false},
		{"client near the top", 1<<62 - 1, false},
		{"reference sequences", 77, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxClients: 2, ReferenceSequences: tt.reference})
			c := client.New(h.now, tokenWith(t, privKey, i, h.now), nil)
			c.SetSequence(tt.clientSeq)
			var connectedAt time.Time
			for range 10 {
				if c.State() == client.Connected {
					break
				}
				connectedAt = h.now
				h.exchange(c, addrN(1))
			}
			require.Equal(t, client.Connected, c.State())
			var first uint64
			found := false
			for _, p := range h.seen {
				if typ, _ := protocol.PeekType(p); typ == protocol.KeepAlive {
					first, found = sequenceOf(p), true
					break
				}
			}
			require.True(t, found)
			want := uint64(connectedAt.UnixNano())
			if tt.reference {
				want = 0
			}
			assert.Equal(t, want, first)
		})
	}
}

// sequenceOf decodes an encrypted packet's sequence number.
func sequenceOf(p []byte) uint64 {
	var seq uint64
	for i := range int(p[0] >> 4) {
		seq |= uint64(p[1+i]) << (8 * i)
	}
	return seq
}

func TestClockSequence(t *testing.T) {
	tests := []struct {
		at   time.Time
		want uint64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(-5, 0), 0},
		{time.Unix(1_800_000_000, 7), 1_800_000_000_000_000_007},
		{time.Unix(0, 1<<62+3), 3}, // the year 2116 wraps below 2^62
	}
	for _, tt := range tests {
		got := clockSequence(tt.at)
		assert.Equal(t, tt.want, got, "%v", tt.at)
		assert.Less(t, got, GlobalSequenceStart, "below the global sequence")
	}
}

// TestKeyRotation: with a previous key set, tokens sealed with either key
// are answered; tokens sealed with any other key are not.
func TestKeyRotation(t *testing.T) {
	oldKey, newKey, otherKey := crypto.Key{0: 1, 31: 1}, crypto.Key{0: 2, 31: 2}, crypto.Key{0: 3, 31: 3}
	tests := []struct {
		name     string
		previous crypto.Key
		sealedBy crypto.Key
		answered bool
	}{
		{"current key", oldKey, newKey, true},
		{"previous key", oldKey, oldKey, true},
		{"other key", oldKey, otherKey, false},
		{"previous key after the rotation", crypto.Key{}, oldKey, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{PrivateKey: newKey, PreviousPrivateKey: tt.previous})
			c := h.dial(tokenWith(t, tt.sealedBy, i, h.now), addrN(1), 20)
			assert.Equal(t, tt.answered, c.State() == client.Connected)
			assert.Equal(t, tt.answered, h.srv.Stats().ChallengesSent > 0)
		})
	}
}

func TestZeroKeyRefused(t *testing.T) {
	_, err := New(Config{ProtocolID: protocolID, Now: epoch})
	require.ErrorIs(t, err, ErrZeroKey)
}

// logCounter counts log records by level and message.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level.String()+" "+r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) count(level slog.Level, prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for k, v := range l.n {
		if len(k) >= len(level.String()+" "+prefix) && k[:len(level.String()+" "+prefix)] == level.String()+" "+prefix {
			total += v
		}
	}
	return total
}

// TestSameAddressReuseRefusedAndLoggedOnce: a token that connected is
// refused from its own address after its session (a deliberate deviation
// from the reference), and said once at Info however often it is retried.
func TestSameAddressReuseRefusedAndLoggedOnce(t *testing.T) {
	logs := &logCounter{n: map[string]int{}}
	h := newHarness(t, Config{MaxClients: 2, Logger: slog.New(logs)})
	tok := tokenWith(t, privKey, 1, h.now)
	c := h.dial(tok, addrN(1), 20)
	require.Equal(t, client.Connected, c.State())
	var (
		cs  recSink
		out client.Output
	)
	c.Disconnect(&out)
	cs.record(&out)
	for _, p := range cs.pkts() {
		h.srv.Receive(h.now, addrN(1), p, &h.out.Output)
	}
	before := h.srv.Stats()
	again := h.dial(tok, addrN(1), 30) // 3 s of requests at 10 Hz
	assert.NotEqual(t, client.Connected, again.State())
	after := h.srv.Stats()
	assert.Equal(t, uint64(1), after.TokenReuseRefused-before.TokenReuseRefused, "counted once per token, not per resent request")
	assert.Equal(t, before.ConnectionsOpened, after.ConnectionsOpened)
	assert.Equal(t, 1, logs.count(slog.LevelInfo, refusedMsg))
}

// TestLoopbackSlots: loopback clients take slots without packets, never
// time out, and free their slot when either side ends them.
func TestLoopbackSlots(t *testing.T) {
	s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 2, Now: epoch})
	require.NoError(t, err)
	var sink recSink
	a, err := s.ConnectLoopback(1, [token.UserDataBytes]byte{7}, &sink.Output)
	require.NoError(t, err)
	assert.True(t, a.Loopback())
	assert.Equal(t, uint64(1), a.ID())
	assert.Equal(t, byte(7), a.UserData()[0])
	_, err = s.ConnectLoopback(1, [token.UserDataBytes]byte{}, &sink.Output)
	require.ErrorIs(t, err, ErrClientIDInUse)
	b, err := s.ConnectLoopback(2, [token.UserDataBytes]byte{}, &sink.Output)
	require.NoError(t, err)
	_, err = s.ConnectLoopback(3, [token.UserDataBytes]byte{}, &sink.Output)
	require.ErrorIs(t, err, ErrFull)
	assert.NotEqual(t, a.Index(), b.Index())

	s.Update(epoch.Add(time.Hour), &sink.Output) // never times out, no keep-alives
	assert.Equal(t, 2, s.Stats().Connected)
	assert.Empty(t, sink.pkts())
	// Payloads go from one end's queue to the other's, never to the sink.
	require.NoError(t, a.Send(epoch, []byte{1}, &sink.Output))
	require.NoError(t, a.LoopbackSend([]byte{2, 2}))
	assert.Empty(t, sink.pkts())
	buf := make([]byte, 8)
	n, _, err := a.LoopbackQueue().Read(buf)
	require.NoError(t, err)
	assert.Equal(t, []byte{1}, buf[:n])
	n, _, err = a.Queue().Read(buf)
	require.NoError(t, err)
	assert.Equal(t, []byte{2, 2}, buf[:n])

	s.LoopbackLeft(a, &sink.Output)
	assert.Equal(t, ReasonPeerDisconnected, a.Reason())
	_, _, err = a.Queue().Read(buf)
	assert.Equal(t, &Error{ReasonPeerDisconnected}, err, "the server side reads the end")
	require.ErrorIs(t, a.Send(epoch, []byte{1}, &sink.Output), ErrClientGone)
	assert.Equal(t, 1, s.Stats().Connected)
	c, err := s.ConnectLoopback(3, [token.UserDataBytes]byte{}, &sink.Output)
	require.NoError(t, err)
	assert.Equal(t, a.Index(), c.Index(), "the slot was freed")
	s.Close(&sink.Output)
	assert.Empty(t, sink.pkts(), "no disconnect packets for loopback clients")
	_, err = s.ConnectLoopback(4, [token.UserDataBytes]byte{}, &sink.Output)
	require.ErrorIs(t, err, ErrClientGone)
}

// BenchmarkRefusedRequest: the server's cost for a valid connection
// request it refuses, with a near-empty history (a token already
// connected with) and with a full one (a new token). The two must be
// about the same: refusing does no sweep and no scan.
func BenchmarkRefusedRequest(b *testing.B) {
	const pool = 1024
	for _, bc := range []struct {
		name       string
		full       bool
		maxClients int
	}{
		{"slots=1/history=empty", false, 1},
		{"slots=1/history=full", true, 1},
		{"slots=1024/history=empty", false, 1024},
		{"slots=1024/history=full", true, 1024},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: bc.maxClients, Addrs: []netip.AddrPort{self}, Now: epoch, History: 4096})
			require.NoError(b, err)
			var sink countSink
			var reqs [][]byte
			if bc.full {
				fillHistory(b, s, 0, 4096, epoch)
				require.Equal(b, s.Stats().HistoryLimit, s.Stats().History)
				for i := range pool {
					reqs = append(reqs, requestOf(b, tokenWith(b, privKey, 100_000+i, epoch)))
				}
			} else {
				r := requestOf(b, tokenWith(b, privKey, 1, epoch))
				s.Receive(epoch, addrN(1), append([]byte(nil), r...), &sink.Output)
				reqs = append(reqs, r)
			}
			from := netip.MustParseAddrPort("10.70.0.1:1")
			buf := make([]byte, 1078) // a connection request
			sent := sink.n()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				copy(buf, reqs[i%len(reqs)])
				s.Receive(epoch, from, buf, &sink.Output)
			}
			b.StopTimer()
			require.Equal(b, sent, sink.n(), "refused requests are not answered")
		})
	}
}
