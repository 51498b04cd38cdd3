package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trainOf returns n datagrams of one size to rx, marked with wave and
// index: a train that GSO sends as one super-datagram.
func trainOf(t *testing.T, rx Conn, wave, n int) []Message {
	ms := make([]Message, n)
	for i := range ms {
		ms[i] = Message{Buf: fmt.Appendf(nil, "wave %03d datagram %03d", wave, i), Addr: addrOf(t, rx)}
	}
	return ms
}

// TestAskGRO, over real UDP, IPv4 and IPv6: a socket asked for GRO while
// its reader waits in a read (the loop of ReadBatch calls a dialed Conn
// uses, and the owned loop) turns GRO on at its next read, without the
// ask waiting for it; every datagram of the waves of trains sent before
// and after arrives once and intact, and the trains that arrive after it
// come coalesced. Where the kernel refuses UDP_GRO the reads stay as
// they were and lose nothing. Off PathBest the ask is refused.
func TestAskGRO(t *testing.T) {
	if !kernelHasGRO(t) {
		t.Skip("the kernel has no UDP GRO")
	}
	loops := []struct {
		name string
		run  func(c Conn, stop <-chan struct{}, handle func([]Message)) error
	}{
		{"ReadBatch", func(c Conn, stop <-chan struct{}, handle func([]Message)) error {
			return ReadLoopInto(c, NewMessages(4), stop, handle, nil)
		}},
		{"owned", func(c Conn, stop <-chan struct{}, handle func([]Message)) error {
			return ReadLoopOwned(c, 4, stop, handle, nil)
		}},
	}
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, loop := range loops {
			for _, refused := range []bool{false, true} {
				t.Run(fmt.Sprint(fam.network, "/", loop.name, "/refused=", refused), func(t *testing.T) {
					rx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
					tx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
					defer tx.Close()
					groFault = refused
					defer func() { groFault = false }()
					got := make(chan string, 1024)
					done := make(chan error, 1)
					go func() {
						done <- loop.run(rx, make(chan struct{}), func(ms []Message) {
							for _, m := range ms {
								got <- string(m.Buf)
							}
						})
					}()
					wave := func(w, n int) {
						t.Helper()
						ms := trainOf(t, rx, w, n)
						k, err := tx.WriteBatch(ms)
						require.NoError(t, err)
						require.Equal(t, n, k)
						for i := range ms {
							select {
							case m := <-got:
								require.Equal(t, string(ms[i].Buf), m)
							case <-time.After(5 * time.Second):
								t.Fatalf("wave %d: received %d of %d", w, i, n)
							}
						}
					}
					wave(0, 1) // the reader is in its loop
					require.True(t, AskGRO(rx, 4), "the ask never waits for the read in progress")
					wave(1, 40) // the read after its first turns GRO on
					assert.Equal(t, !refused, GRO(rx))
					for w := 2; w < 12; w++ {
						wave(w, 1+w%3*20)
					}
					require.NoError(t, rx.Close())
					require.NoError(t, <-done, "closing the socket ends the loop cleanly")
					g := rx.(*mmsgConn).gro
					if refused {
						assert.Nil(t, g)
						return
					}
					assert.Positive(t, g.coalesced, "trains arrive coalesced")
					assert.LessOrEqual(t, len(g.slots), 4)
				})
			}
		}
	}
	for _, p := range []Path{PathMmsg, PathPlain} {
		c := onPath(p)(listenUDP(t, "udp4", "127.0.0.1:0"))
		assert.False(t, AskGRO(c, 4), "GRO on %v", p)
		assert.False(t, GRO(c))
		c.Close()
	}
}

// TestGROSlotsGrow: a socket asked for GRO reads with one slot, and adds
// one, up to what it asked, each time a read finds every slot filled by
// a train; a read hands out what the slots took, in order.
func TestGROSlotsGrow(t *testing.T) {
	if !kernelHasGRO(t) {
		t.Skip("the kernel has no UDP GRO")
	}
	rx := onPath(PathBest)(listenUDP(t, "udp4", "127.0.0.1:0"))
	defer rx.Close()
	tx := onPath(PathBest)(listenUDP(t, "udp4", "127.0.0.1:0"))
	defer tx.Close()
	require.True(t, AskGRO(rx, 2))
	in := newMsgs(64)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
	read := func() []string {
		t.Helper()
		for i := range in {
			in[i].Buf = in[i].Buf[:cap(in[i].Buf)]
		}
		n, err := rx.ReadBatch(in)
		require.NoError(t, err)
		var s []string
		for _, m := range in[:n] {
			s = append(s, string(m.Buf))
		}
		return s
	}
	var want []string
	for _, w := range []int{0, 1} { // one datagram: no train, no growth
		ms := trainOf(t, rx, w, 1)
		_, err := tx.WriteBatch(ms)
		require.NoError(t, err)
		want = append(want, string(ms[0].Buf))
	}
	// The first read turns GRO on: the socket's datagrams so far were
	// queued before, one by one.
	assert.Equal(t, want[:1], read())
	assert.Equal(t, want[1:], read())
	g := rx.(*mmsgConn).gro
	require.NotNil(t, g)
	assert.Len(t, g.slots, 1)
	for _, slots := range []int{2, 2} {
		want = want[:0]
		for w := range 3 {
			ms := trainOf(t, rx, w, 10)
			_, err := tx.WriteBatch(ms)
			require.NoError(t, err)
			for _, m := range ms {
				want = append(want, string(m.Buf))
			}
		}
		var got []string
		for len(got) < len(want) {
			got = append(got, read()...)
		}
		assert.Equal(t, want, got)
		assert.Len(t, g.slots, slots)
	}
	assert.Positive(t, g.coalesced)
}
