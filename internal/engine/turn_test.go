package engine

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadTurnYield runs a socket's read turn on simulated time: the
// reader gives it up to a waiting Read; while a pull goes on, however
// long, the reader waits for its end with no timer; it takes the turn back
// between one and two graces after the last pull ended (not if another
// began within a grace), at once when a pull asks it to, and at stop once
// the pull in progress has ended.
func TestReadTurnYield(t *testing.T) {
	cases := []struct {
		name     string
		giveBack bool // the pull asks the reader to take the turn back
		stop     bool // the reader is stopped while the pull goes on
		again    bool // a pull begins again within a grace of the first's end
	}{
		{name: "grace"},
		{name: "pulls again within a grace", again: true},
		{name: "give back", giveBack: true},
		{name: "stop", stop: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReadTurn(true, transport.Conn(nil))
				stop := make(chan struct{})
				took := make(chan bool, 1)
				taken := make(chan bool)
				go func() { // the reader: it takes the turn, then yields it
					taken <- rt.take(stop)
					took <- rt.yield(stop)
				}()
				require.True(t, <-taken)
				rt.wait(1) // a Read waits
				require.True(t, rt.wanted())
				<-rt.freed
				require.True(t, rt.tryTake(), "the turn is free for the Read")
				rt.wait(-1)

				time.Sleep(10 * time.Second) // a long pull
				synctest.Wait()
				assert.True(t, rt.watch.Load(), "the reader waits for the pull's end, with no timer")
				if tc.stop {
					close(stop)
					synctest.Wait()
					require.Empty(t, took, "the reader waits for the pull to end")
					rt.release(false)
					require.False(t, <-took)
					require.False(t, rt.tryTake(), "the reader holds the turn")
					return
				}
				if tc.again {
					// A Read that comes back within a grace (a client
					// at 10 Hz) keeps the turn from the reader: its
					// take stops the grace its last pull's end armed.
					rt.release(false)
					time.Sleep(pullGrace / 2)
					require.True(t, rt.tryTake(), "the turn is free for the Read again")
					time.Sleep(10 * time.Second)
					synctest.Wait()
					require.Empty(t, took, "the reader took the turn during a pull")
					assert.True(t, rt.watch.Load(), "the reader waits for the pull's end")
				}
				start := time.Now()
				rt.release(tc.giveBack)
				require.True(t, <-took)
				waited := time.Since(start)
				if tc.giveBack {
					assert.Zero(t, waited)
				} else {
					assert.GreaterOrEqual(t, waited, pullGrace)
					assert.Less(t, waited, 2*pullGrace)
				}
				require.False(t, rt.tryTake(), "the reader holds the turn")
			})
		})
	}
}

// TestReadTurnSolo: a solo turn (a Listener's socket) is wanted while one
// Read waits, not several, and a pull that ends with several waiting hands
// the turn back to the reader instead of to them.
func TestReadTurnSolo(t *testing.T) {
	for _, solo := range []bool{false, true} {
		rt := newReadTurn(solo, transport.Conn(nil))
		rt.wait(2)
		assert.Equal(t, !solo, rt.wanted(), "solo %v", solo)
		require.True(t, rt.tryTake())
		rt.release(false)
		assert.Equal(t, solo, len(rt.back) == 1, "solo %v: back", solo)
		assert.Equal(t, !solo, len(rt.freed) == 1, "solo %v: freed", solo)
	}
}

// TestManyTurnOnePeer: a Listener's reader (a Many socket's) gives its
// socket to a Read only after a batch from one address (one client
// sending), and a Read that reads datagrams from several gives it back.
func TestManyTurnOnePeer(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:1000")
	b := netip.MustParseAddrPort("127.0.0.1:1001")
	cases := []struct {
		name  string
		addrs []netip.AddrPort
		want  bool
	}{
		{"one datagram", []netip.AddrPort{a}, true},
		{"a train from one client", []netip.AddrPort{a, a, a}, true},
		{"two clients", []netip.AddrPort{a, a, b}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := make([]transport.Message, len(tc.addrs))
			for i, ap := range tc.addrs {
				ms[i].Addr = ap
			}
			assert.Equal(t, tc.want, fromOnePeer(ms))
			s := NewSocket(nil, Many, 1, discard{}, nil)
			s.receive(ms) // records whether the batch came from one peer
			s.rt.wait(1)
			assert.Equal(t, tc.want, socketTurn{s}.Wanted())
		})
	}
}

// scriptedSock is a socket whose reads each return one datagram and say
// in turn whether they waited for it; it records how many messages each
// read was given.
type scriptedSock struct {
	transport.Conn
	waited []bool
	lens   []int
}

func (s *scriptedSock) ReadBatch(ms []transport.Message) (int, error) {
	s.lens = append(s.lens, len(ms))
	return 1, nil
}

func (s *scriptedSock) ReadWaited() bool { return s.waited[len(s.lens)-1] }

// TestPullReadLone: pulls read one datagram only after loneRun reads in
// a row that each waited for their one datagram, and a whole batch again
// after a read that found its datagram there (a burst).
func TestPullReadLone(t *testing.T) {
	sock := &scriptedSock{waited: []bool{true, true, true, false, true, true, true}}
	rt := newReadTurn(false, sock)
	ms := transport.NewMessages(8)
	for range sock.waited {
		n, err := rt.pullRead(sock, ms)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	assert.Equal(t, []int{8, 8, 1, 1, 8, 8, 1}, sock.lens)
}

// discard is a Receiver that drops what it is given.
type discard struct{}

func (discard) Receive([]transport.Message) {}

// deadlineSock is scriptedSock with read deadlines.
type deadlineSock struct{ scriptedSock }

func (*deadlineSock) SetReadDeadline(time.Time) error { return nil }

// ending is a Receiver whose datagram ends its Conn (a peer's DISCONNECT).
type ending struct{ done chan struct{} }

func (e ending) Receive([]transport.Message) { close(e.done) }

// TestPullEndedGivesBack: a pull on a Listener's socket (Many) that ends
// its Conn hands the turn back to the reader at once, not after the grace
// the reader leaves a Read that may come back (no Read of an ended Conn
// does, and other peers' datagrams may wait: TestDialWakeUpNotLost in
// package cute saw 40 ms); a pull that leaves its Conn up, or one on a
// dialed Conn's socket (One), does not.
func TestPullEndedGivesBack(t *testing.T) {
	cases := []struct {
		name string
		role Role
		ends bool // the datagram read ends the Conn
		back bool
	}{
		{"many, Conn ends", Many, true, true},
		{"many, Conn up", Many, false, false},
		{"one, Conn ends", One, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := &deadlineSock{scriptedSock{waited: []bool{true}}}
			done := make(chan struct{})
			var recv Receiver = discard{}
			if tc.ends {
				recv = ending{done}
			}
			s := NewSocket(sock, tc.role, 4, recv, make(chan struct{}))
			r := s.NewReader(func() int { return 0 }, done, nil)
			pulled, err := r.Pull()
			require.NoError(t, err)
			require.True(t, pulled, "the turn was free: the Read pulled")
			assert.Equal(t, tc.back, len(s.rt.back) == 1, "the reader is asked to take the turn back")
		})
	}
}
