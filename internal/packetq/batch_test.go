package packetq

import (
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func msgs(n, size int) []transport.Message {
	ms := make([]transport.Message, n)
	for i := range ms {
		ms[i].Buf = make([]byte, 0, size) // only the capacity counts
	}
	return ms
}

func TestReadBatch(t *testing.T) {
	tests := []struct {
		name   string
		queued int
		batch  int
		want   []int // datagrams returned by each call until the queue is empty
	}{
		{"all in one call", 5, 8, []int{5}},
		{"exactly a batch", 8, 8, []int{8}},
		{"several calls", 10, 4, []int{4, 4, 2}},
		{"one at a time", 3, 1, []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(16)
			defer q.Close()
			for i := range tt.queued {
				require.True(t, q.Push(ap(i), []byte{byte(i), 2, 3}))
			}
			next := 0
			for _, want := range tt.want {
				ms := msgs(tt.batch, 8)
				n, err := q.ReadBatch(ms)
				require.NoError(t, err)
				require.Equal(t, want, n)
				for _, m := range ms[:n] {
					assert.Equal(t, []byte{byte(next), 2, 3}, m.Buf, "in order")
					assert.Equal(t, ap(next), m.Addr)
					next++
				}
			}
			assert.Zero(t, q.Len())
		})
	}
}

func TestReadBatchEdges(t *testing.T) {
	q := New(4)
	n, err := q.ReadBatch(nil)
	require.NoError(t, err, "an empty batch does not block")
	assert.Zero(t, n)

	// Truncated to each buffer's capacity, whatever its length.
	require.True(t, q.Push(ap(1), []byte("0123456789")))
	ms := msgs(2, 4)
	n, err = q.ReadBatch(ms)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, "0123", string(ms[0].Buf))

	// End: what is queued, then the error.
	require.True(t, q.Push(ap(2), []byte("last")))
	q.End(io.EOF)
	n, err = q.ReadBatch(msgs(2, 8))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = q.ReadBatch(msgs(2, 8))
	assert.Equal(t, io.EOF, err)
	q.Close()
	_, err = q.ReadBatch(msgs(2, 8))
	assert.ErrorIs(t, err, net.ErrClosed)
}

func TestReadBatchBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(8)
		defer q.Close()
		got := make(chan int, 1)
		go func() {
			n, err := q.ReadBatch(msgs(8, 8))
			assert.NoError(t, err)
			got <- n
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("returned with nothing queued")
		default:
		}
		q.Push(ap(1), []byte("wake"))
		assert.Equal(t, 1, <-got)

		q.SetReadDeadline(time.Now().Add(time.Second))
		start := time.Now()
		_, err := q.ReadBatch(msgs(8, 8))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

func TestReadBatchAllocs(t *testing.T) {
	race.Skip(t)
	q := New(64)
	defer q.Close()
	msg := make([]byte, 1200)
	ms := msgs(16, 1500)
	for range 64 { // grow the ring and warm the pool
		q.Push(ap(1), msg)
	}
	for q.Len() > 0 {
		_, _ = q.ReadBatch(ms)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for range 16 {
			q.Push(ap(1), msg)
		}
		_, _ = q.ReadBatch(ms)
	})
	assert.Zero(t, allocs)
}
