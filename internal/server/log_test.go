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
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockCheck is a slog.Handler that fails the test if any lock of its
// server's core is held when the logger is called: the server's own locks
// and those of every client it knows. The test drives the core from one
// goroutine, so a lock it cannot take is held by the caller.
type lockCheck struct {
	t     *testing.T
	s     *Server
	mu    sync.Mutex
	calls int
	recs  []slog.Record
}

func (h *lockCheck) check() {
	h.t.Helper()
	h.calls++
	s := h.s
	for name, m := range map[string]interface {
		TryLock() bool
		Unlock()
	}{"Server.tick": &s.tick, "Server.mainMu": &s.mainMu, "deadlineWheel.mu": &s.wheel.mu} {
		if !m.TryLock() {
			h.t.Errorf("the logger was called with %s held", name)
			continue
		}
		m.Unlock()
	}
	if !s.mu.TryLock() {
		h.t.Error("the logger was called with Server.mu held")
		return
	}
	defer s.mu.Unlock()
	clients := map[*Client]bool{}
	for _, c := range s.byAddr {
		clients[c] = true
	}
	for _, c := range s.slots {
		if c != nil {
			clients[c] = true
		}
	}
	for _, e := range s.gone.byAddr {
		clients[e.c] = true
	}
	for c := range clients {
		if !c.rmu.TryLock() {
			h.t.Errorf("the logger was called with client %v's receive lock held", c.addr)
		} else {
			c.rmu.Unlock()
		}
		if !c.sendLocked.mu.TryLock() {
			h.t.Errorf("the logger was called with client %v's send lock held", c.addr)
		} else {
			c.sendLocked.mu.Unlock()
		}
	}
}

func (h *lockCheck) Enabled(context.Context, slog.Level) bool { h.check(); return true }
func (h *lockCheck) Handle(_ context.Context, r slog.Record) error {
	h.check()
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *lockCheck) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lockCheck) WithGroup(string) slog.Handler      { return h }

// whys returns the "why" of every record with message msg.
func (h *lockCheck) whys(msg string) []string {
	var out []string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "why" {
				out = append(out, a.Value.String())
			}
			return true
		})
	}
	return out
}

// TestLoggerNeverCalledUnderACoreLock drives a server core through every
// path that logs (connections, refusals of each kind, payloads, a timeout,
// a kick, a peer's disconnect, loopback clients, Close) with a logger
// that fails if it is called while a lock of the core is held. The core
// only records; Server.Log, called after each call, writes.
func TestLoggerNeverCalledUnderACoreLock(t *testing.T) {
	h := &lockCheck{t: t}
	hs := newHarness(t, Config{MaxClients: 2, Logger: slog.New(h)})
	h.s = hs.srv
	s := hs.srv

	// Connect, exchange, reuse the token from the same address and from
	// another.
	tok := tokenWith(t, privKey, 1, hs.now)
	c := hs.dial(tok, addrN(1), 20)
	require.Equal(t, client.Connected, c.State())
	var out client.Output
	c.Disconnect(&out)
	for _, m := range out.Datagrams {
		s.Receive(hs.now, addrN(1), m.Buf, &hs.out.Output)
	}
	s.Log(&hs.out.Output)
	hs.dial(tok, addrN(1), 3)
	hs.dial(tok, addrN(2), 3)
	// Refusals before any lock.
	s.Receive(hs.now, addrN(3), requestOf(t, tokenWith(t, crypto.Key{9: 9}, 3, hs.now)), &hs.out.Output)
	s.Receive(hs.now, addrN(6), request(t, other), &hs.out.Output)
	s.Log(&hs.out.Output)
	// A connection that times out, one that is kicked, loopback clients.
	c2 := hs.dial(tokenWith(t, privKey, 4, hs.now), addrN(4), 20)
	require.Equal(t, client.Connected, c2.State())
	s.Update(hs.now.Add(time.Minute), &hs.out.Output)
	s.Log(&hs.out.Output)
	hs.now = hs.now.Add(time.Minute)
	c3 := hs.dial(tokenWith(t, privKey, 5, hs.now), addrN(5), 20)
	require.Equal(t, client.Connected, c3.State())
	s.Disconnect(s.ClientByIndex(c3.ClientIndex()), &hs.out.Output)
	s.Log(&hs.out.Output)
	lb, err := s.ConnectLoopback(77, [token.UserDataBytes]byte{}, &hs.out.Output)
	require.NoError(t, err)
	s.LoopbackLeft(lb, &hs.out.Output)
	_, err = s.ConnectLoopback(78, [token.UserDataBytes]byte{}, &hs.out.Output)
	require.NoError(t, err)
	s.Close(&hs.out.Output)
	s.Log(&hs.out.Output)

	assert.Equal(t, []string{refusedReusedHere, refusedReusedThere, refusedKey, refusedNotInToken}, h.whys(refusedMsg))
	assert.Len(t, h.whys("netcode: client disconnected"), 5, "peer, timeout, kick, loopback end, Close")
	assert.Greater(t, h.calls, 10)
}

// TestRefusalsLogged: every refused connection request is logged at Debug
// (a token used again from its own address at Info) with its reason: once
// per address and second, or once per token for a reused token; a reused
// token counts once in TokenReuseRefused, however often it is resent.
func TestRefusalsLogged(t *testing.T) {
	mint := func(t *testing.T, n int, created time.Time, edit func(*token.Params)) []byte {
		p := token.Params{
			ProtocolID:     protocolID,
			ClientID:       uint64(2000 + n),
			PrivateKey:     privKey,
			ServerAddrs:    []netip.AddrPort{self},
			ExpireSeconds:  60,
			TimeoutSeconds: 5,
		}
		if edit != nil {
			edit(&p)
		}
		tok, err := tokentest.GenerateWith(p, uint64(created.Unix()), [crypto.TokenNonceBytes]byte{0: byte(n), 1: byte(n >> 8), 23: 2}, crypto.Key{0: byte(n), 2: 3}, crypto.Key{0: byte(n), 2: 4})
		require.NoError(t, err)
		return tok
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, h *harness) // before the refused requests
		tok   func(t *testing.T, h *harness) []byte
		from  netip.AddrPort
		why   string
		info  bool // logged at Info, not Debug
		each  bool // logged again a second later (per address and second)
		stat  func(Stats) uint64
		count uint64 // the stat after 2 x 10 requests
	}{
		{name: "bad key", tok: func(t *testing.T, h *harness) []byte {
			return mint(t, 1, h.now, func(p *token.Params) { p.PrivateKey = crypto.Key{3: 3} })
		}, why: refusedKey, each: true, stat: func(s Stats) uint64 { return s.Ignored }, count: 20},
		{name: "protocol id", tok: func(t *testing.T, h *harness) []byte {
			return mint(t, 1, h.now, func(p *token.Params) { p.ProtocolID = 99 })
		}, why: refusedProtocolID, each: true, stat: func(s Stats) uint64 { return s.Ignored }, count: 20},
		{name: "expired", tok: func(t *testing.T, h *harness) []byte {
			return mint(t, 1, h.now.Add(-time.Hour), nil) // 60 s tokens minted an hour ago
		}, why: refusedExpired, each: true, stat: func(s Stats) uint64 { return s.Ignored }, count: 20},
		{name: "not in token", tok: func(t *testing.T, h *harness) []byte {
			return mint(t, 1, h.now, func(p *token.Params) { p.ServerAddrs = []netip.AddrPort{other} })
		}, why: refusedNotInToken, each: true, stat: func(s Stats) uint64 { return s.AddressNotInToken }, count: 20},
		{name: "reused from the same address", setup: func(t *testing.T, h *harness) {
			c := h.dial(mint(t, 1, h.now, nil), addrN(7), 20)
			require.Equal(t, client.Connected, c.State())
			var out client.Output
			c.Disconnect(&out)
			for _, m := range out.Datagrams {
				h.srv.Receive(h.now, addrN(7), m.Buf, &h.out.Output)
			}
		}, tok: func(t *testing.T, h *harness) []byte { return mint(t, 1, h.now, nil) },
			from: addrN(7), why: refusedReusedHere, info: true,
			stat: func(s Stats) uint64 { return s.TokenReuseRefused }, count: 1},
		{name: "reused from another address", setup: func(t *testing.T, h *harness) {
			h.srv.Receive(h.now, addrN(8), requestOf(t, mint(t, 1, h.now, nil)), &h.out.Output)
		}, tok: func(t *testing.T, h *harness) []byte { return mint(t, 1, h.now, nil) },
			why: refusedReusedThere, stat: func(s Stats) uint64 { return s.TokenReuseRefused }, count: 1},
		{name: "history full", setup: func(t *testing.T, h *harness) {
			fillHistory(t, h.srv, 100, h.srv.Stats().HistoryLimit, h.now)
		}, tok: func(t *testing.T, h *harness) []byte { return mint(t, 1, h.now, nil) },
			why: refusedHistoryFull, each: true, stat: func(s Stats) uint64 { return s.HistoryFull }, count: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := &lockCheck{t: t}
			h := newHarness(t, Config{MaxClients: 1, History: 64, Logger: slog.New(lc)})
			lc.s = h.srv
			if tt.setup != nil {
				tt.setup(t, h)
				h.srv.Log(&h.out.Output)
				h.out.Reset()
			}
			from := tt.from
			if !from.IsValid() {
				from = addrN(50)
			}
			before := tt.stat(h.srv.Stats())
			lc.recs = nil
			req := requestOf(t, tt.tok(t, h))
			for range 2 {
				for range 10 {
					h.srv.Receive(h.now, from, append([]byte(nil), req...), &h.out.Output)
					h.srv.Log(&h.out.Output)
				}
				h.now = h.now.Add(time.Second)
			}
			assert.Empty(t, h.out.Datagrams, "refused requests are not answered")
			want := []string{tt.why}
			if tt.each {
				want = append(want, tt.why)
			}
			require.Equal(t, want, lc.whys(refusedMsg))
			level := slog.LevelDebug
			if tt.info {
				level = slog.LevelInfo
			}
			for _, r := range lc.recs {
				assert.Equal(t, level, r.Level)
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "from" {
						assert.Equal(t, from.String(), a.Value.String(), "the record names the sender")
					}
					return true
				})
			}
			assert.Equal(t, tt.count, tt.stat(h.srv.Stats())-before)
		})
	}
}

// TestRefusalLogBounded: refusals from many addresses log at most
// refusalsPerSecond records a second.
func TestRefusalLogBounded(t *testing.T) {
	var l refusalLog
	n := 0
	for i := range 1000 {
		if l.allow(addrN(i), 5) {
			n++
		}
	}
	assert.Equal(t, refusalsPerSecond, n)
	assert.True(t, l.allow(addrN(1), 6), "a new second")
	assert.False(t, l.allow(addrN(1), 6), "once per address and second")
}
