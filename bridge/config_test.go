package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonetcode/netcode"
)

// TestRelaySocketBuffer: the relay's own Dialer asks for a modest socket
// buffer per session, Config.SocketBuffer if set; a Dialer given keeps its
// own. Either way the relay's Dialer gives up on a token no server answers
// after HandshakeTimeout (RequestTimeout), the given one is left as it is.
func TestRelaySocketBuffer(t *testing.T) {
	given := &netcode.Dialer{Socket: netcode.SocketConfig{Buffer: 1 << 20}}
	tests := []struct {
		name string
		cfg  Config
		want int
	}{
		{"default", Config{}, 256 << 10},
		{"set", Config{SocketBuffer: 64 << 10}, 64 << 10},
		{"negative is the default", Config{SocketBuffer: -1}, 256 << 10},
		{"dialer given", Config{Dialer: given, SocketBuffer: 64 << 10}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(&tt.cfg)
			defer h.Close()
			assert.Equal(t, tt.want, h.dialer.Socket.Buffer)
			assert.Equal(t, defaultHandshakeTimeout, h.dialer.RequestTimeout)
			if tt.cfg.Dialer != nil {
				assert.Zero(t, tt.cfg.Dialer.RequestTimeout, "the caller's Dialer changed")
			}
		})
	}
}
