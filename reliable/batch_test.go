package reliable

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/require"
)

// TestStreamBatchedWrites runs Streams over netcode on real UDP, IPv4 and
// IPv6, on every path of the transport: a Stream over a *netcode.Conn
// hands it its datagrams in batches (the Conn seals them and sends each
// train in one system call where the socket can), and 8 MiB each way,
// both at once, arrive whole and in order, the receive windows (left at
// their default, so auto-tuned) within their maximum. Streams over a connection
// without batched writes (netsim's, in the other tests) write one
// datagram at a time.
func TestStreamBatchedWrites(t *testing.T) {
	const size = 8 << 20
	for _, p := range transport.Paths {
		for _, f := range families {
			t.Run(fmt.Sprint(p, "/", f.name), func(t *testing.T) {
				skipWithoutIPv6(t, f.network)
				defer transport.ForcePath(transport.ForcePath(p))
				nc, ns, stop := netcodeConns(t, f.network, f.addr)
				defer stop()
				cli, err := NewStream(nc, nil)
				require.NoError(t, err)
				srv, err := NewStream(ns, nil)
				require.NoError(t, err)
				require.NotNil(t, cli.cn.bw, "the dialed Conn's batched write")
				require.NotNil(t, srv.cn.bw, "the server Conn's batched write")

				type result struct {
					got []byte
					err error
				}
				read := func(s *Stream, into chan<- result) {
					got, err := io.ReadAll(s)
					into <- result{got, err}
				}
				up, down := make(chan result, 1), make(chan result, 1)
				go read(srv, up)
				go read(cli, down)
				for i, s := range []*Stream{cli, srv} {
					go func() {
						b := make([]byte, size)
						pattern(b, i)
						_, _ = s.Write(b)
						_ = s.CloseWrite()
					}()
				}
				for i, ch := range []chan result{up, down} {
					r := <-ch
					require.NoError(t, r.err)
					want := make([]byte, size)
					pattern(want, i)
					require.True(t, bytes.Equal(want, r.got), "direction %d: %d bytes, not the %d sent", i, len(r.got), size)
				}
				for _, s := range []*Stream{cli, srv} {
					s.cn.mu.Lock()
					rc := &s.cn.c.chans[0].rcv
					w, most := rc.window, rc.maxWindow
					s.cn.mu.Unlock()
					t.Logf("receive window: %d chunks of at most %d", w, most)
					require.LessOrEqual(t, w, most, "the auto-tuned window past its maximum")
				}
				closeBoth(t, cli, srv)
			})
		}
	}
}
