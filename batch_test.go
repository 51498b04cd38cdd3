package netcode_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/testing/trainconn"
	"github.com/stretchr/testify/require"
)

// writeBatch hands ps to c's batched write, the way package reliable
// finds it.
func writeBatch(t testing.TB, c *netcode.Conn, ps [][]byte) (int, error) {
	t.Helper()
	bw := msgconn.BatchWriterOf(c)
	require.NotNil(t, bw, "a *netcode.Conn has a batched write")
	return bw.WriteBatch(ps)
}

// batchPayloads returns n payloads, each marked with its index: mostly
// full-size (they make GSO trains), with shorter ones, which end a train,
// every seventh.
func batchPayloads(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		size := netcode.MaxPayloadBytes
		if i%7 == 3 {
			size = 1 + i
		}
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j)
		}
		p[0] = byte(i)
		ps[i] = p
	}
	return ps
}

// TestWriteBatch, over real UDP, IPv4 and IPv6, on every transport path:
// a batch written on either side's Conn, over several trains, arrives
// whole and in order; a batch with a payload Write refuses sends nothing,
// with Write's error; the write deadline and Close fail it as they fail
// Write.
func TestWriteBatch(t *testing.T) {
	onEachPath(t, func(t *testing.T, network, addr string) {
		l := listen(t, network, addr, nil)
		cli, srv := pair(t, l)
		ps := batchPayloads(150)
		for _, dir := range []struct {
			name     string
			from, to *netcode.Conn
		}{{"client to server", cli, srv}, {"server to client", srv, cli}} {
			n, err := writeBatch(t, dir.from, ps)
			require.NoError(t, err, dir.name)
			require.Equal(t, len(ps), n, dir.name)
			for i, p := range ps {
				got, err := readWithin(t, dir.to, 5*time.Second)
				require.NoError(t, err, "%s: payload %d", dir.name, i)
				require.Equal(t, p, got, "%s: payload %d", dir.name, i)
			}
		}

		for _, c := range []*netcode.Conn{cli, srv} {
			n, err := writeBatch(t, c, [][]byte{{1}, make([]byte, netcode.MaxPayloadBytes+1)})
			require.ErrorIs(t, err, netcode.ErrPayloadTooLarge)
			require.Zero(t, n)
			n, err = writeBatch(t, c, [][]byte{{1}, {}})
			require.ErrorIs(t, err, netcode.ErrEmptyPayload)
			require.Zero(t, n)
			require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
			n, err = writeBatch(t, c, [][]byte{{1}})
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Zero(t, n)
			require.NoError(t, c.SetWriteDeadline(time.Time{}))
		}
		// None of the refused batches sent anything.
		send(t, cli, srv, []byte("after"))
		send(t, srv, cli, []byte("after"))

		require.NoError(t, cli.Close())
		_, err := writeBatch(t, cli, ps[:2])
		require.ErrorIs(t, err, net.ErrClosed)
		require.NoError(t, srv.Close())
		_, err = writeBatch(t, srv, ps[:2])
		require.ErrorIs(t, err, net.ErrClosed)
	})
}

// TestWriteBatchLeavesTogether, over real UDP, IPv4 and IPv6: a batch
// of as many payloads as one GSO train carries reaches the socket in one
// batched write, from a dialed Conn and from the server's, which a socket
// with GSO sends as one train in one system call.
func TestWriteBatchLeavesTogether(t *testing.T) {
	const train = 40 // 40 × 1200 bytes: one train
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			if f.network == "udp6" {
				requireIPv6(t)
			}
			spc := trainconn.New(t, f.network, f.addr)
			l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			var cpc *trainconn.Conn
			d := &netcode.Dialer{ListenPacket: func(_ context.Context, network, _ string) (net.PacketConn, error) {
				cpc = trainconn.New(t, network, f.addr)
				return cpc, nil
			}}
			cli, srv := dialWith(t, d, l, mint(t, l.Addr()))
			trade(t, cli, srv) // confirmed: the server's Sends add no keep-alive
			ps := batchPayloads(train)
			for _, dir := range []struct {
				name     string
				from, to *netcode.Conn
				pc       *trainconn.Conn
			}{{"client to server", cli, srv, cpc}, {"server to client", srv, cli, spc}} {
				n, err := writeBatch(t, dir.from, ps)
				require.NoError(t, err, dir.name)
				require.Equal(t, train, n, dir.name)
				for i := range ps {
					got, err := readWithin(t, dir.to, 5*time.Second)
					require.NoError(t, err, "%s: payload %d", dir.name, i)
					require.Equal(t, ps[i], got, "%s: payload %d", dir.name, i)
				}
				require.GreaterOrEqual(t, dir.pc.LargestBatch(), train, "%s: the batch reached the socket in one write", dir.name)
			}
		})
	}
}

// TestWriteBatchAllocations checks that batched writes, like Write, cost
// no allocation per payload in steady state, on either side, whichever
// path the transport takes, and whether the dialed Conn reads its
// socket datagram by datagram or, once a bulk transfer attached, takes
// trains coalesced (GRO, on the best path).
func TestWriteBatchAllocations(t *testing.T) {
	race.Skip(t)
	for _, bulk := range []bool{false, true} {
		t.Run(fmt.Sprint("bulk=", bulk), func(t *testing.T) {
			onEachPath(t, func(t *testing.T, network, addr string) {
				l := listen(t, network, addr, nil)
				cli, srv := pair(t, l)
				if bulk {
					msgconn.MarkBulk(cli, 0)
				}
				cbw, sbw := msgconn.BatchWriterOf(cli), msgconn.BatchWriterOf(srv)
				ps := batchPayloads(16)
				buf := make([]byte, netcode.MaxPayloadBytes)
				step := func() {
					for _, c := range []struct {
						bw msgconn.BatchWriter
						to *netcode.Conn
					}{{cbw, srv}, {sbw, cli}} {
						if _, err := c.bw.WriteBatch(ps); err != nil {
							t.Fatal(err)
						}
						for range ps {
							if _, err := c.to.Read(buf); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				for range 50 { // grow the Outputs to a train, and the read slots
					step()
				}
				allocs := testing.AllocsPerRun(200, step)
				t.Logf("%.3f allocations per 32 payloads", allocs)
				// As for Write: the ticker and the runtime's timers may
				// allocate now and then.
				require.Less(t, allocs, 0.1)
			})
		})
	}
}

// TestBulkRaisesReadQueue, over real UDP, IPv4 and IPv6, on every path:
// a Conn told it carries bulk traffic of up to N payloads in flight
// (msgconn.MarkBulk, as package reliable does with its windows) holds N
// in its read queue, on either side, where the default queue holds 256
// and drops the rest; what it holds is read whole and in order.
func TestBulkRaisesReadQueue(t *testing.T) {
	const burst = 600
	for _, tc := range []struct {
		name  string
		bulk  int // MarkBulk's payloads; 0: not called
		kept  int
		drops bool
	}{
		{"default queue", 0, 256, true},
		{"raised", burst, burst, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onEachPath(t, func(t *testing.T, network, addr string) {
				l := listen(t, network, addr, nil)
				cli, srv := pair(t, l)
				if tc.bulk > 0 {
					msgconn.MarkBulk(cli, tc.bulk)
					msgconn.MarkBulk(srv, tc.bulk)
				}
				ps := batchPayloads(burst)
				for _, c := range [][2]*netcode.Conn{{cli, srv}, {srv, cli}} {
					from, to := c[0], c[1]
					n, err := writeBatch(t, from, ps)
					require.NoError(t, err)
					require.Equal(t, burst, n)
					require.Eventually(t, func() bool { return to.Buffered()+int(to.Dropped()) >= burst },
						10*time.Second, time.Millisecond, "queued %d, dropped %d", to.Buffered(), to.Dropped())
					require.Equal(t, tc.kept, to.Buffered())
					require.Equal(t, tc.drops, to.Dropped() > 0)
					for i := range tc.kept {
						got, err := readWithin(t, to, 5*time.Second)
						require.NoError(t, err)
						require.Equal(t, ps[i], got, "payload %d", i)
					}
				}
			})
		})
	}
}
