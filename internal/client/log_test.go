package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockCheck is a slog.Handler that fails the test if the Client's lock is
// held when the logger is called. The test drives the Client from one
// goroutine, so a lock it cannot take is held by the caller.
type lockCheck struct {
	t    *testing.T
	c    *Client
	msgs []string
}

func (h *lockCheck) check() {
	if h.c == nil {
		return // New: the Client is not built yet, nor shared
	}
	if !h.c.mu.TryLock() {
		h.t.Error("the logger was called with the Client's lock held")
		return
	}
	h.c.mu.Unlock()
}

func (h *lockCheck) Enabled(context.Context, slog.Level) bool { h.check(); return true }
func (h *lockCheck) Handle(_ context.Context, r slog.Record) error {
	h.check()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *lockCheck) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lockCheck) WithGroup(string) slog.Handler      { return h }

// TestLoggerNeverCalledUnderTheLock: the Client's state changes and
// server changes are logged by Client.Log, after the call, never under
// its lock; nothing is logged until the adapter asks.
func TestLoggerNeverCalledUnderTheLock(t *testing.T) {
	h := &lockCheck{t: t}
	c := New(epoch, testToken(t, srvA, srvB), slog.New(h))
	h.c = c
	assert.Equal(t, []string{"netcode: connecting", "netcode: client state"}, h.msgs, "New logs its own start")
	h.msgs = nil
	var out Output
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	now := epoch
	c.Update(now, &out)
	c.Receive(now, srvA, srv.denied(), &out)
	c.Update(now, &out) // on to the next server
	require.Equal(t, srvB, c.ServerAddr())
	assert.Len(t, out.Records, 1, "the records wait in the Output")
	assert.Empty(t, h.msgs, "until Log writes them")
	c.Log(&out)
	c.Update(now, &out)
	c.Receive(now, srvB, srv.challenge(), &out)
	c.Log(&out)
	now = now.Add(10 * time.Millisecond)
	c.Update(now, &out)
	c.Receive(now, srvB, srv.keepAlive(), &out)
	c.Log(&out)
	require.Equal(t, Connected, c.State())
	c.Disconnect(&out)
	c.Log(&out)
	assert.Equal(t, []string{"netcode: connecting", "netcode: client state", "netcode: client state", "netcode: client state"}, h.msgs)
}
