package transport

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/stretchr/testify/assert"
)

// noDeadlines is a connection whose deadlines do nothing, so that only
// the Watchdog can end a close on it.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error { return nil }

// TestWatchCutsAClose checks that the watchdog covers a close: a session
// whose end began wsbridge.MuxEndGrace ago and is still closing has its connection cut by the check, even
// where the connection's deadline did nothing; not before.
func TestWatchCutsAClose(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		watch func(bc *wsbridge.BatchConn, endedAt int64) func(now int64) bool
	}{
		{"mux", wsbridge.MuxEndGrace, func(bc *wsbridge.BatchConn, endedAt int64) func(int64) bool {
			s := &muxSession{link: wsbridge.WSLink{BC: bc}, wd: wsbridge.NewWatchdog(time.Second, -1, -1)}
			s.endedAt.Store(endedAt)
			return s.watch
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, peer := net.Pipe()
			defer peer.Close()
			bc := &wsbridge.BatchConn{Conn: noDeadlines{ours}}
			start := int64(time.Minute)
			watch := tt.watch(bc, start+1)
			// A pipe's SetReadDeadline fails once it is closed.
			assert.True(t, watch(start+int64(tt.grace)-1), "the Watchdog stops watching a close")
			assert.NoError(t, ours.SetReadDeadline(time.Time{}), "cut before the grace")
			assert.True(t, watch(start+int64(tt.grace)))
			assert.ErrorIs(t, ours.SetReadDeadline(time.Time{}), io.ErrClosedPipe, "not cut at the grace")
		})
	}
}
