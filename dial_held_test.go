package netcode_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/stretchr/testify/require"
)

// TestHeldWrites, over real UDP, IPv4 and IPv6, on every path of the
// transport: the Writes a dialed Conn makes while payloads wait in its
// read queue (held for a train where the socket is connected) all reach
// the server, in order, whatever sends them: the Write that finds the
// queue empty, a Read that finds it empty, Close (before its disconnect),
// or, with nothing of these, the writer's stopping (its next wait). Each
// case but the last holds with no dispatch (engine.Dispatch), so that only
// what it names can send.
func TestHeldWrites(t *testing.T) {
	cases := []struct {
		name     string
		dispatch bool
		// after, run on the client once it has read one of two payloads
		// and written "held", makes "held" leave.
		after func(t *testing.T, cli *netcode.Conn)
	}{
		{"next Write", false, func(t *testing.T, cli *netcode.Conn) {
			_, err := readWithin(t, cli, 5*time.Second)
			require.NoError(t, err)
			_, err = cli.Write([]byte("after"))
			require.NoError(t, err)
			require.Zero(t, netcode.HeldWrites(cli), "held after a Write that found the read queue empty")
		}},
		{"Read", false, func(t *testing.T, cli *netcode.Conn) {
			_, err := readWithin(t, cli, 5*time.Second)
			require.NoError(t, err)
			_, err = readWithin(t, cli, time.Millisecond) // nothing comes: it waits, after sending
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Zero(t, netcode.HeldWrites(cli), "held after a Read that found the read queue empty")
		}},
		{"Close", false, func(t *testing.T, cli *netcode.Conn) {
			require.NoError(t, cli.Close())
		}},
		{"writer waits", true, func(*testing.T, *netcode.Conn) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			onEachPath(t, func(t *testing.T, network, addr string) {
				if !tc.dispatch {
					defer netcode.NoHeldDispatch()()
				}
				l := listen(t, network, addr, nil)
				cli, srv := pair(t, l)
				for i := range 2 {
					_, err := srv.Write([]byte(fmt.Sprint("to client ", i)))
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { return cli.Buffered() == 2 }, 5*time.Second, time.Millisecond)
				_, err := readWithin(t, cli, 5*time.Second)
				require.NoError(t, err)
				_, err = cli.Write([]byte("held"))
				require.NoError(t, err)
				tc.after(t, cli)
				got, err := readWithin(t, srv, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, "held", string(got))
				switch tc.name {
				case "next Write":
					got, err = readWithin(t, srv, 5*time.Second)
					require.NoError(t, err)
					require.Equal(t, "after", string(got))
				case "Close":
					_, err = readWithin(t, srv, 5*time.Second)
					require.ErrorIs(t, err, io.EOF)
				}
			})
		})
	}
}

// echoShapes are the two ways a client answers what it reads: from the
// goroutine that reads (echoUntilError), or as a game loop does, a reader
// goroutine handing each payload to a writer goroutine (echoByTwo), whose
// Writes find the read queue already empty.
var echoShapes = []struct {
	name string
	echo func(net.Conn)
}{
	{"reader writes", echoUntilError},
	{"reader and writer", echoByTwo},
}

// echoByTwo writes back every payload c reads, as echoUntilError does, but
// from a goroutine of its own that the reader hands each payload to, with
// no allocation per payload, until a read or a write fails.
func echoByTwo(c net.Conn) {
	const bufs = 64
	free := make(chan []byte, bufs)
	for range bufs {
		free <- make([]byte, netcode.MaxPayloadBytes)
	}
	work := make(chan []byte, bufs)
	go func() { // the writer
		for b := range work {
			_, err := c.Write(b)
			free <- b[:cap(b)]
			if err != nil {
				for range work { // let the reader end
				}
				return
			}
		}
	}()
	defer close(work)
	for {
		b := <-free
		n, err := c.Read(b)
		if err != nil {
			return
		}
		work <- b[:n]
	}
}

// TestHeldWritesBurst, over real UDP, IPv4 and IPv6, on every path: a
// Conn answering a burst of payloads one by one, a client's or a
// server's, from the goroutine that reads them or from another, gets
// every answer to its peer complete and in order, and the Conn keeps
// working at one payload at a time after. A Write from the reading
// goroutine is held while the read queue holds more; on a client, a
// Write from the writer goroutine while more payloads were received than
// answered; the last answer sends the train.
func TestHeldWritesBurst(t *testing.T) {
	echoedOnEachPath(t, func(t *testing.T, peer *netcode.Conn) {
		for round := range 3 {
			const burst = 40 // more than a train holds
			for i := range burst {
				_, err := peer.Write([]byte(fmt.Sprint(round, "/", i)))
				require.NoError(t, err)
			}
			for i := range burst {
				got, err := readWithin(t, peer, 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint(round, "/", i), string(got))
			}
			send(t, peer, peer, []byte("one at a time"))
		}
	})
}

// echoedOnEachPath runs test, with the client echoing and with the
// server Conn echoing, for each of echoShapes and on every path
// (onEachPath), with the other side of the pair, peer, which sends the
// bursts.
func echoedOnEachPath(t *testing.T, test func(t *testing.T, peer *netcode.Conn)) {
	for _, echoer := range []string{"client", "server"} {
		for _, shape := range echoShapes {
			t.Run(echoer+" echoes/"+shape.name, func(t *testing.T) {
				onEachPath(t, func(t *testing.T, network, addr string) {
					l := listen(t, network, addr, nil)
					cli, srv := pair(t, l)
					if echoer == "server" {
						cli, srv = srv, cli
					}
					go shape.echo(cli)
					test(t, srv)
				})
			})
		}
	}
}

// TestHeldWritesAllocations checks that held Writes keep the hot path's
// promise: once warm, a burst answered through held Writes, a client's
// or a server Conn's, costs no allocation (counted for the whole
// process), on every path, whichever goroutine answers (the train's
// dispatch goroutine included).
func TestHeldWritesAllocations(t *testing.T) {
	race.Skip(t)
	echoedOnEachPath(t, func(t *testing.T, peer *netcode.Conn) {
		const burst = 8
		msg := make([]byte, 100)
		buf := make([]byte, netcode.MaxPayloadBytes)
		round := func() {
			for range burst {
				if _, err := peer.Write(msg); err != nil {
					t.Fatal(err)
				}
			}
			for range burst {
				if _, err := peer.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range 100 { // warm the pools and the held buffer
			round()
		}
		allocs := testing.AllocsPerRun(500, round)
		t.Logf("%.3f allocations per burst of %d echoes", allocs, burst)
		// As TestSteadyStateAllocations: one in ten round trips at most.
		require.Less(t, allocs, 0.1*burst)
	})
}
