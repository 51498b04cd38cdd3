package transport

import (
	"bytes"
	"log/slog"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsListenTags (IPv4 and IPv6): the sockets Options.Listen opens
// for a Listener or a dialed Conn of either dialect carry DSCP 46 with
// PacketTagging, and 0 without; Apply tags a caller's socket, says so at
// Warn where it cannot (naming the dialect), and refuses a Control hook
// and a Buffer for a transport that is not a UDP socket.
func TestOptionsListenTags(t *testing.T) {
	forFamilies(t, func(t *testing.T, network, addr string) {
		for _, tagging := range []bool{true, false} {
			want := 0
			if tagging {
				want = ExpeditedForwarding
			}
			controlled := 0
			o := &Options{PacketTagging: tagging, Dialect: "cute", Control: func(string, string, syscall.RawConn) error {
				controlled++
				return nil
			}}
			ucs, err := o.Listen(network, addr, 1)
			require.NoError(t, err)
			require.Len(t, ucs, 1)
			got, err := TrafficClass(ucs[0])
			require.NoError(t, err)
			assert.Equal(t, want, got, "tagging %v", tagging)
			assert.Equal(t, 1, controlled)
			assert.ErrorContains(t, o.Apply(ucs[0]), "cute: SocketConfig.Control applies only to sockets cute opens")
			ucs[0].Close()
		}

		var logs bytes.Buffer
		o := &Options{PacketTagging: true, Dialect: "netcode", Log: slog.New(slog.NewTextHandler(&logs, nil))}
		pc, err := net.ListenPacket(network, addr)
		require.NoError(t, err)
		defer pc.Close()
		require.NoError(t, o.Apply(pc))
		got, err := TrafficClass(pc)
		require.NoError(t, err)
		assert.Equal(t, ExpeditedForwarding, got)
		assert.Empty(t, logs.String())
		require.NoError(t, o.Apply(hidden{pc.(*net.UDPConn)}))
		assert.Contains(t, logs.String(), "level=WARN msg=\"netcode: packet tagging refused; packets go untagged\"")
		o.Buffer = 1 << 16
		assert.ErrorContains(t, o.Apply(hidden{pc.(*net.UDPConn)}), "netcode: SocketConfig.Buffer needs a UDP socket")
	})
}
