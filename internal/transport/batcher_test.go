package transport

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calls counts a Batcher's calls; its datagrams go to and come from a
// real socket, one by one.
type calls struct{ reads, writes int }

func (c *calls) read(pc net.PacketConn, ms []Message) (int, error) {
	c.reads++
	return newSingle(pc, CapabilitiesOf(pc)).ReadBatch(ms)
}

func (c *calls) write(pc net.PacketConn, ms []Message) (int, error) {
	c.writes++
	return newSingle(pc, CapabilitiesOf(pc)).WriteBatch(ms)
}

// batchingAP and batchingPlain are Batchers, with and without the
// netip.AddrPort methods of *net.UDPConn.
type batchingAP struct {
	apOnly
	*calls
}

func (b batchingAP) ReadBatch(ms []Message) (int, error)  { return b.read(b.apOnly, ms) }
func (b batchingAP) WriteBatch(ms []Message) (int, error) { return b.write(b.apOnly, ms) }

type batchingPlain struct {
	hidden
	*calls
}

func (b batchingPlain) ReadBatch(ms []Message) (int, error)  { return b.read(b.hidden, ms) }
func (b batchingPlain) WriteBatch(ms []Message) (int, error) { return b.write(b.hidden, ms) }

// hookedAP and hookedPlain offer those Batchers to New as a Mux does,
// through an embedded Batched.
type hookedAP struct {
	apOnly
	Batched
}

type hookedPlain struct {
	hidden
	Batched
}

// TestNewUsesBatcher: New hands batches to a connection's own batched I/O,
// whatever else it has, and single writes to its one-datagram path.
func TestNewUsesBatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(*net.UDPConn, *calls) net.PacketConn
		single Conn
	}{
		{"with AddrPort methods", func(uc *net.UDPConn, c *calls) net.PacketConn {
			return hookedAP{apOnly{uc}, Batched{B: batchingAP{apOnly{uc}, c}}}
		}, &apConn{}},
		{"plain PacketConn", func(uc *net.UDPConn, c *calls) net.PacketConn {
			return hookedPlain{hidden{uc}, Batched{B: batchingPlain{hidden{uc}, c}}}
		}, &genericConn{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := new(calls)
			pc := tc.wrap(listenUDP(t, "udp4", "127.0.0.1:0"), b)
			c := New(pc)
			defer c.Close()
			require.IsType(t, &batcherConn{}, c)
			assert.IsType(t, tc.single, c.(*batcherConn).Conn)

			exchange(t, c)
			assert.Equal(t, 1, b.writes, "WriteTo takes the one-datagram path")
			assert.Equal(t, 1, b.reads)
			assert.Equal(t, pc.LocalAddr(), c.LocalAddr())
		})
	}
}

// countingAP counts a hooked connection's netip.AddrPort calls.
type countingAP struct {
	apOnly
	reads, writes *int
}

func (c countingAP) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	*c.reads++
	return c.apOnly.ReadFromUDPAddrPort(b)
}

func (c countingAP) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	*c.writes++
	return c.apOnly.WriteToUDPAddrPort(b, addr)
}

// TestNewUsesHookedAddrPort: a connection that offers the netip.AddrPort
// methods through its Batched (P), as the bridge's Mux and Conn do, and not
// as methods of its own, is read and written through them.
func TestNewUsesHookedAddrPort(t *testing.T) {
	var reads, writes int
	uc := listenUDP(t, "udp4", "127.0.0.1:0")
	c := New(hookedPlain{hidden{uc}, Batched{P: countingAP{apOnly{uc}, &reads, &writes}}})
	defer c.Close()
	require.IsType(t, &apConn{}, c)

	exchange(t, c)
	assert.Equal(t, 2, writes, "the batch of one and the single write")
	assert.Equal(t, 1, reads)
}

// exchange sends c's peer, a fresh socket, a batch of one datagram and a
// single one, and reads its answer in a batch.
func exchange(t *testing.T, c Conn) {
	t.Helper()
	peer := New(listenUDP(t, "udp4", "127.0.0.1:0"))
	defer peer.Close()
	n, err := c.WriteBatch([]Message{{Buf: []byte("batch"), Addr: addrOf(t, peer)}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, c.WriteTo([]byte("single"), addrOf(t, peer)))

	require.NoError(t, peer.WriteTo([]byte("to it"), addrOf(t, c)))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	ms := newMsgs(4)
	n, err = c.ReadBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, "to it", string(ms[0].Buf))
	assert.Equal(t, addrOf(t, peer), ms[0].Addr)
}
