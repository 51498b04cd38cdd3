package packetq

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ap(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), uint16(1000+i))
}

func TestOrderBoundsAndDrops(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		raise     int // Raise's limit, if not 0
		push      int
		wantKept  int
		wantDrops uint64
	}{
		{"under the bound", 8, 0, 5, 5, 0},
		{"at the bound", 8, 0, 8, 8, 0},
		{"over the bound", 4, 0, 10, 4, 6},
		{"growing ring", 100, 0, 100, 100, 0},
		{"zero limit means one", 0, 0, 3, 1, 2},
		{"raised bound", 4, 10, 12, 10, 2},
		{"a lower raise keeps the bound", 8, 4, 10, 8, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(tt.limit)
			defer q.Close()
			if tt.raise != 0 {
				q.Raise(tt.raise)
			}
			kept := 0
			for i := range tt.push {
				if q.Push(ap(i), []byte{byte(i), 1, 2}) {
					kept++
				}
			}
			assert.Equal(t, tt.wantKept, kept)
			assert.Equal(t, tt.wantKept, q.Len())
			assert.Equal(t, tt.wantDrops, q.Dropped())
			buf := make([]byte, 8)
			for i := range tt.wantKept {
				n, from, err := q.Read(buf)
				require.NoError(t, err)
				assert.Equal(t, []byte{byte(i), 1, 2}, buf[:n], "first in, first out")
				assert.Equal(t, ap(i), from)
			}
			assert.Zero(t, q.Len())
		})
	}
}

func TestShortBuffers(t *testing.T) {
	q := New(4)
	defer q.Close()
	msg := bytes.Repeat([]byte{7}, 100)
	require.True(t, q.Push(ap(1), msg))
	require.True(t, q.Push(ap(2), msg))
	// Message semantics: the datagram stays for a larger buffer.
	_, _, err := q.ReadMessage(make([]byte, 10))
	require.ErrorIs(t, err, io.ErrShortBuffer)
	n, _, err := q.ReadMessage(make([]byte, 100))
	require.NoError(t, err)
	assert.Equal(t, 100, n)
	// Datagram semantics: truncated, as a socket read.
	n, _, err = q.Read(make([]byte, 10))
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Zero(t, q.Len())
	// Too large for any queue: counted, never queued.
	assert.False(t, q.Push(ap(3), make([]byte, MaxBytes+1)))
	assert.Equal(t, uint64(1), q.Dropped())
}

func TestEndDrainsThenFails(t *testing.T) {
	q := New(4)
	defer q.Close()
	require.True(t, q.Push(ap(1), []byte("a")))
	require.True(t, q.End(io.EOF))
	assert.False(t, q.End(errors.New("again")), "the first end wins")
	assert.False(t, q.Push(ap(2), []byte("b")), "no push after End")
	assert.Zero(t, q.Dropped(), "refusing after End is not a drop")
	assert.Equal(t, io.EOF, q.Err())
	select {
	case <-q.Done():
	default:
		t.Fatal("Done not closed by End")
	}
	buf := make([]byte, 4)
	n, _, err := q.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "a", string(buf[:n]))
	_, _, err = q.Read(buf)
	assert.Equal(t, io.EOF, err)
	assert.True(t, q.Close())
	assert.False(t, q.Close())
	_, _, err = q.Read(buf)
	assert.ErrorIs(t, err, net.ErrClosed)
}

func TestCloseDiscardsAndWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(4)
		errc := make(chan error, 1)
		go func() {
			_, _, err := q.Read(make([]byte, 4))
			errc <- err
		}()
		synctest.Wait() // the reader is blocked
		require.True(t, q.Close())
		assert.ErrorIs(t, <-errc, net.ErrClosed)
		assert.False(t, q.Push(ap(1), []byte("late")))
		assert.ErrorIs(t, q.Err(), net.ErrClosed)
	})
}

func TestReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(4)
		defer q.Close()
		start := time.Now()
		q.SetReadDeadline(start.Add(time.Second))
		_, _, err := q.Read(make([]byte, 4))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "woken at the deadline")
		assert.True(t, q.ReadDeadlineExpired())

		// Passed: fails even with a datagram queued, which is kept.
		require.True(t, q.Push(ap(1), []byte("kept")))
		_, _, err = q.Read(make([]byte, 4))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		q.SetReadDeadline(time.Time{})
		n, _, err := q.Read(make([]byte, 4))
		require.NoError(t, err)
		assert.Equal(t, 4, n)

		// A later deadline set while a read blocks still wakes it.
		errc := make(chan error, 1)
		go func() {
			_, _, err := q.Read(make([]byte, 4))
			errc <- err
		}()
		synctest.Wait()
		q.SetReadDeadline(time.Now().Add(time.Minute))
		time.Sleep(time.Minute)
		assert.ErrorIs(t, <-errc, os.ErrDeadlineExceeded)

		// A push wakes a blocked reader.
		q.SetReadDeadline(time.Time{})
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 8)
			n, _, _ := q.Read(buf)
			got <- string(buf[:n])
		}()
		synctest.Wait()
		q.Push(ap(2), []byte("wake"))
		assert.Equal(t, "wake", <-got)
	})
}

// TestConcurrent: many pushers and readers; every datagram is read once or
// counted as dropped.
func TestConcurrent(t *testing.T) {
	q := New(16)
	const pushers, each = 4, 2000
	var pushed sync.WaitGroup
	var readers sync.WaitGroup
	counts := make(chan int, 3)
	for range 3 {
		readers.Go(func() {
			buf := make([]byte, 8)
			n := 0
			for {
				if _, _, err := q.Read(buf); err != nil {
					counts <- n
					return
				}
				n++
			}
		})
	}
	for p := range pushers {
		pushed.Go(func() {
			for i := range each {
				q.Push(ap(p), []byte{byte(i)})
			}
		})
	}
	pushed.Wait()
	q.End(io.EOF)
	readers.Wait()
	close(counts)
	total := 0
	for n := range counts {
		total += n
	}
	assert.Equal(t, pushers*each, total+int(q.Dropped()))
}

func TestSteadyStateAllocs(t *testing.T) {
	race.Skip(t)
	q := New(64)
	defer q.Close()
	msg := make([]byte, 1200)
	buf := make([]byte, 1200)
	for range 64 { // grow the ring and warm the pool
		q.Push(ap(1), msg)
	}
	for range 64 {
		_, _, _ = q.Read(buf)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		q.Push(ap(1), msg)
		_, _, _ = q.Read(buf)
	})
	assert.Zero(t, allocs)
}
