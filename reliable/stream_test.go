package reliable

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStreamNetsim(t *testing.T) {
	tests := []struct {
		loss float64
		size int
	}{
		{0, 1 << 20},
		{0.05, 1 << 20},
		{0.20, 1 << 20},
		{0, 16 << 20},
		{0.05, 16 << 20},
		{0.20, 16 << 20},
	}
	for _, tc := range tests {
		if raceEnabled && tc.size > 1<<20 && tc.loss != 0.20 {
			continue // for time: the race detector slows this tenfold
		}
		t.Run(fmt.Sprintf("loss%.0f%%_%dKiB", tc.loss*100, tc.size>>10), func(t *testing.T) {
			a, b := simPair(t, int64(tc.size)+int64(tc.loss*1000), lossy(tc.loss))
			sa, err := NewStream(a, nil)
			require.NoError(t, err)
			sb, err := NewStream(b, nil)
			require.NoError(t, err)
			want := make([]byte, tc.size)
			pattern(want, tc.size)
			errc := make(chan error, 1)
			go func() {
				_, err := sa.Write(want)
				if err == nil {
					err = sa.Close()
				}
				errc <- err
			}()
			t0 := time.Now()
			got, err := io.ReadAll(sb)
			require.NoError(t, err)
			t.Logf("read in %v", time.Since(t0))
			require.NoError(t, <-errc)
			t.Logf("closed in %v", time.Since(t0))
			assert.True(t, bytes.Equal(want, got), "got %d bytes, want %d", len(got), len(want))
			require.NoError(t, sb.Close())
		})
	}
}

func streamPair(t testing.TB, loss float64, cfg *Config) (*Stream, *Stream) {
	t.Helper()
	a, b := simPair(t, 3, lossy(loss))
	sa, err := NewStream(a, cfg)
	require.NoError(t, err)
	sb, err := NewStream(b, cfg)
	require.NoError(t, err)
	return sa, sb
}

func TestStreamSemantics(t *testing.T) {
	t.Run("close then EOF", func(t *testing.T) {
		sa, sb := streamPair(t, 0.05, nil)
		_, err := sa.Write([]byte("last words"))
		require.NoError(t, err)
		require.NoError(t, sa.Close())
		got, err := io.ReadAll(sb)
		require.NoError(t, err)
		assert.Equal(t, "last words", string(got))
		_, err = sb.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF, "EOF again")
		_, err = sa.Write([]byte("x"))
		assert.ErrorIs(t, err, net.ErrClosed)
		_, err = sa.Read(make([]byte, 1))
		assert.ErrorIs(t, err, net.ErrClosed)
		assert.ErrorIs(t, sa.Close(), net.ErrClosed)
		require.NoError(t, sb.Close())
	})
	t.Run("half close", func(t *testing.T) {
		sa, sb := streamPair(t, 0, nil)
		_, err := sa.Write([]byte("question"))
		require.NoError(t, err)
		require.NoError(t, sa.CloseWrite())
		_, err = sa.Write([]byte("more"))
		assert.Error(t, err)
		q, err := io.ReadAll(sb)
		require.NoError(t, err)
		assert.Equal(t, "question", string(q))
		_, err = sb.Write([]byte("answer"))
		require.NoError(t, err)
		require.NoError(t, sb.Close())
		a, err := io.ReadAll(sa)
		require.NoError(t, err)
		assert.Equal(t, "answer", string(a))
		require.NoError(t, sa.Close())
	})
	t.Run("deadlines", func(t *testing.T) {
		// The peer never reads what is written last: Close gives up
		// after Linger.
		sa, sb := streamPair(t, 0, &Config{Linger: 50 * time.Millisecond})
		require.NoError(t, sb.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		_, err := sb.Read(make([]byte, 10))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		assert.True(t, ne.Timeout())
		// A passed deadline fails Read even with data waiting, as in net.
		_, err = sa.Write([]byte("data"))
		require.NoError(t, err)
		_, err = sb.Read(make([]byte, 10))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.NoError(t, sb.SetReadDeadline(time.Time{}))
		buf := make([]byte, 10)
		n, err := io.ReadAtLeast(sb, buf, 4)
		require.NoError(t, err)
		assert.Equal(t, "data", string(buf[:n]))

		// The peer does not read: Write fills the window and the send
		// buffer, then times out, reporting what it queued.
		require.NoError(t, sa.SetWriteDeadline(time.Now().Add(200*time.Millisecond)))
		big := make([]byte, 8<<20)
		n, err = sa.Write(big)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.Less(t, n, len(big))
		assert.Greater(t, n, 0)
		closeBoth(t, sa, sb)
	})
}
