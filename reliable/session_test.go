package reliable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfChecking makes message i of n bytes (n >= 8): its index, its
// length, then a pattern from the index.
func selfChecking(i, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, uint32(i))
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	pattern(b[8:], i)
	return b
}

// checkMessage returns the index of a message made by selfChecking, or an
// error if it is not one.
func checkMessage(b []byte) (int, error) {
	if len(b) < 8 || int(binary.LittleEndian.Uint32(b[4:])) != len(b) {
		return 0, fmt.Errorf("message of %d bytes: bad length field", len(b))
	}
	i := int(binary.LittleEndian.Uint32(b))
	want := make([]byte, len(b)-8)
	pattern(want, i)
	if string(want) != string(b[8:]) {
		return i, fmt.Errorf("message %d: corrupted", i)
	}
	return i, nil
}

func sessionPair(t testing.TB, loss float64, ca, cb *Config) (*Session, *Session) {
	t.Helper()
	a, b := simPair(t, int64(loss*1000)+7, lossy(loss))
	sa, err := NewSession(a, ca)
	require.NoError(t, err)
	sb, err := NewSession(b, cb)
	require.NoError(t, err)
	return sa, sb
}

// closeBoth closes two sessions or streams at once, as the two ends of a
// test would, and checks the closes succeed.
func closeBoth(t testing.TB, a, b io.Closer) {
	t.Helper()
	var wg sync.WaitGroup
	var ea, eb error
	wg.Add(2)
	go func() { defer wg.Done(); ea = a.Close() }()
	go func() { defer wg.Done(); eb = b.Close() }()
	wg.Wait()
	assert.NoError(t, ea)
	assert.NoError(t, eb)
}

// TestSessionNetsim sends reliable messages of many sizes (one of 1 MiB)
// and unreliable ones (some fragmented) at once, over a link with loss,
// jitter, duplication and reordering: every reliable message arrives once,
// in order, intact; unreliable ones arrive at most once and never partial.
func TestSessionNetsim(t *testing.T) {
	for _, loss := range []float64{0, 0.05, 0.20} {
		t.Run(fmt.Sprintf("loss%.0f%%", loss*100), func(t *testing.T) {
			sa, sb := sessionPair(t, loss, nil, nil)
			rel, unrel := 0, 1
			sizes := []int{8, 100, 1100, 1200, 2500, 40000, 9, 5000, 70000}
			size := func(i int) int {
				if i == 6 {
					return DefaultMaxReliableMessage // one largest message
				}
				return sizes[i%len(sizes)]
			}
			const nRel = 60
			const nUnrel = 200
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range nRel {
					if err := sa.Channel(rel).Send(selfChecking(i, size(i))); err != nil {
						t.Errorf("reliable send %d: %v", i, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for i := range nUnrel {
					err := sa.Channel(unrel).Send(selfChecking(i, []int{8, 300, 1180, 3000, 9000}[i%5]))
					if err != nil && !errors.Is(err, ErrSendQueueFull) {
						t.Errorf("unreliable send %d: %v", i, err)
						return
					}
				}
			}()
			seen := map[int]bool{}
			unrelDone := make(chan error, 1)
			go func() {
				buf := make([]byte, 1<<16)
				for {
					n, err := sb.Channel(unrel).Receive(buf)
					if err != nil {
						unrelDone <- err
						return
					}
					i, err := checkMessage(buf[:n])
					if err == nil && seen[i] {
						err = fmt.Errorf("unreliable message %d twice", i)
					}
					if err != nil {
						unrelDone <- err
						return
					}
					seen[i] = true
				}
			}()
			buf := make([]byte, DefaultMaxReliableMessage)
			for i := range nRel {
				n, err := sb.Channel(rel).Receive(buf)
				require.NoError(t, err, "message %d", i)
				got, err := checkMessage(buf[:n])
				require.NoError(t, err)
				require.Equal(t, i, got, "out of order")
			}
			wg.Wait()
			closeBoth(t, sa, sb)
			assert.ErrorIs(t, <-unrelDone, net.ErrClosed)
			assert.NotEmpty(t, seen)
			t.Logf("%d of %d unreliable messages arrived; sender: %+v", len(seen), nUnrel, sa.Stats())
		})
	}
}

func TestLayoutMismatch(t *testing.T) {
	tests := []struct {
		name   string
		a, b   *Config
		stream bool
	}{
		{"one channel more", &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered}}}, nil, false},
		{"kinds swapped", &Config{Channels: []ChannelConfig{{Kind: Unreliable}, {Kind: ReliableOrdered}}}, nil, false},
		{"max message", &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 1000}, {Kind: Unreliable}}}, nil, false},
		{"stream against session", nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := simPair(t, 1, lossy(0))
			sa, err := NewSession(a, tc.a)
			require.NoError(t, err)
			var other interface {
				io.Closer
			}
			if tc.stream {
				s, err := NewStream(b, tc.b)
				require.NoError(t, err)
				other = s
				_, err = s.Read(make([]byte, 10))
				assert.ErrorIs(t, err, ErrConfigMismatch)
			} else {
				sb, err := NewSession(b, tc.b)
				require.NoError(t, err)
				other = sb
				_, err = sb.Channel(0).Receive(make([]byte, 10))
				assert.ErrorIs(t, err, ErrConfigMismatch)
			}
			_, err = sa.Channel(0).Receive(make([]byte, 10))
			assert.ErrorIs(t, err, ErrConfigMismatch)
			assert.ErrorIs(t, sa.Err(), ErrConfigMismatch)
			assert.Contains(t, err.Error(), "10.0.0.2:2000", "the error names the peer")
			closeBoth(t, sa, other)
		})
	}
}

func TestSendBackpressure(t *testing.T) {
	cfg := &Config{Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 10000, SendBuffer: 30000, WindowBytes: 8 * 1168}}}
	sa, sb := sessionPair(t, 0, cfg, cfg)
	ch := sa.Channel(0)
	require.NoError(t, ch.SetWriteDeadline(time.Now().Add(300*time.Millisecond)))
	sent := 0
	var err error
	for sent < 1000 {
		if err = ch.Send(selfChecking(sent, 10000)); err != nil {
			break
		}
		sent++
	}
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the receiver reads nothing: Send must block")
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	assert.Less(t, sent, 20)

	buf := make([]byte, 10000)
	for i := range sent {
		n, err := sb.Channel(0).Receive(buf)
		require.NoError(t, err)
		got, err := checkMessage(buf[:n])
		require.NoError(t, err)
		require.Equal(t, i, got)
	}
	// Nothing of the message that timed out was sent.
	require.NoError(t, sb.Channel(0).SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err = sb.Channel(0).Receive(buf)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	// With the deadline lifted, sending works again.
	require.NoError(t, ch.SetWriteDeadline(time.Time{}))
	require.NoError(t, ch.Send(selfChecking(sent, 10)))
	require.NoError(t, sb.Channel(0).SetReadDeadline(time.Time{}))
	n, err := sb.Channel(0).Receive(buf)
	require.NoError(t, err)
	got, err := checkMessage(buf[:n])
	require.NoError(t, err)
	assert.Equal(t, sent, got)
	closeBoth(t, sa, sb)
}

func TestChannelErrors(t *testing.T) {
	cfg := &Config{
		Channels: []ChannelConfig{{Kind: ReliableOrdered, MaxMessageSize: 100}, {Kind: Unreliable, MaxMessageSize: 100, Queue: 2}},
		SendRate: 1000, // 20 bytes per 10 ms tick: the unreliable queue fills
	}
	sa, sb := sessionPair(t, 0, cfg, cfg)
	assert.ErrorIs(t, sa.Channel(0).Send(make([]byte, 101)), ErrMessageTooLarge)
	assert.ErrorIs(t, sa.Channel(1).Send(make([]byte, 101)), ErrMessageTooLarge)
	assert.Nil(t, sa.Channel(2))
	var err error
	for range 100 {
		if err = sa.Channel(1).Send(make([]byte, 100)); err != nil {
			break
		}
	}
	assert.ErrorIs(t, err, ErrSendQueueFull)

	// A short buffer keeps the message for the next Receive.
	require.NoError(t, sa.Channel(0).Send([]byte("hello, reliable")))
	buf := make([]byte, 5)
	_, err = sb.Channel(0).Receive(buf)
	require.ErrorIs(t, err, io.ErrShortBuffer)
	buf = make([]byte, 100)
	n, err := sb.Channel(0).Receive(buf)
	require.NoError(t, err)
	assert.Equal(t, "hello, reliable", string(buf[:n]))
	// An empty message is a message.
	require.NoError(t, sa.Channel(0).Send(nil))
	n, err = sb.Channel(0).Receive(buf)
	require.NoError(t, err)
	assert.Zero(t, n)

	closeBoth(t, sa, sb)
	assert.ErrorIs(t, sa.Channel(0).Send([]byte{1}), net.ErrClosed)
	_, err = sa.Channel(1).Receive(buf)
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.ErrorIs(t, sa.Close(), net.ErrClosed)
}

func TestConfigErrors(t *testing.T) {
	a, _ := simPair(t, 1, lossy(0))
	for _, cfg := range []*Config{
		{MaxPacketBytes: 10},
		{Channels: []ChannelConfig{}},
		{Channels: []ChannelConfig{{Kind: 9}}},
		{Channels: []ChannelConfig{{Kind: Unreliable, MaxMessageSize: 1 << 20}}},
		{Channels: []ChannelConfig{{Kind: ReliableOrdered, WindowBytes: -1}}},
		{Channels: []ChannelConfig{{Kind: Unreliable, QueueBytes: -1}}},
	} {
		_, err := NewSession(a, cfg)
		assert.ErrorIs(t, err, errConfig, "%+v", cfg)
	}
}
