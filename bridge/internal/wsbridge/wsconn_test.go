package wsbridge

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingConn records every write.
type countingConn struct {
	net.Conn
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func TestBatchConn(t *testing.T) {
	msg := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	tests := []struct {
		name   string
		hold   bool
		msgs   [][]byte
		writes []int // sizes of the writes to the connection
	}{
		{"not holding: one write each", false, [][]byte{msg(10, 1), msg(20, 2)}, []int{10, 20}},
		{"holding: one write", true, [][]byte{msg(10, 1), msg(20, 2), msg(1310, 3)}, []int{1340}},
		{"holding past the bound", true, [][]byte{msg(BatchBytes-10, 1), msg(20, 2), msg(30, 3)}, []int{BatchBytes - 10, 50}},
		{"a message larger than the bound", true, [][]byte{msg(10, 1), msg(BatchBytes+1, 2), msg(5, 3)}, []int{10, BatchBytes + 1, 5}},
		{"holding nothing", true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := &countingConn{}
			c := &BatchConn{Conn: cc}
			if tt.hold {
				c.Hold()
			}
			var want []byte
			for _, m := range tt.msgs {
				n, err := c.Write(m)
				require.NoError(t, err)
				require.Equal(t, len(m), n)
				want = append(want, m...)
			}
			require.NoError(t, c.Flush())
			var sizes []int
			var got []byte
			for _, w := range cc.writes {
				sizes = append(sizes, len(w))
				got = append(got, w...)
			}
			assert.Equal(t, tt.writes, sizes)
			assert.Equal(t, want, got, "the bytes, in order")
			assert.Nil(t, c.pending, "the buffer is back in the pool")

			// After the flush, writes go straight through again.
			_, err := c.Write(msg(3, 9))
			require.NoError(t, err)
			assert.Len(t, cc.writes, len(tt.writes)+1)
		})
	}

	t.Run("release", func(t *testing.T) {
		cc := &countingConn{}
		c := &BatchConn{Conn: cc}
		c.Hold()
		_, err := c.Write(msg(10, 1))
		require.NoError(t, err)
		c.Release()
		assert.Nil(t, c.pending)
		assert.Empty(t, cc.writes, "an ended session's batch is dropped")
	})
}
