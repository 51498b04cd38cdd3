package reliable

import (
	"bytes"
	"fmt"
	"io"
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
