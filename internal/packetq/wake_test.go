package packetq

import (
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTryAndWake: TryReadMessage never waits, ReadMessageUntil waits for
// a datagram or its wake channel, and both keep ReadMessage's errors.
func TestTryAndWake(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(q *Queue, wake chan struct{})
		try   error // TryReadMessage's error
		until error // ReadMessageUntil's, after setup
	}{
		{"empty", func(q *Queue, wake chan struct{}) { wake <- struct{}{} }, ErrEmpty, ErrWoken},
		{"queued", func(q *Queue, _ chan struct{}) { q.Push(ap(1), []byte("x")); q.Push(ap(1), []byte("y")) }, nil, nil},
		{"ended", func(q *Queue, _ chan struct{}) { q.End(net.ErrClosed) }, net.ErrClosed, net.ErrClosed},
		{"deadline", func(q *Queue, _ chan struct{}) {
			q.Push(ap(1), []byte("x"))
			q.SetReadDeadline(time.Now().Add(-time.Second))
		}, os.ErrDeadlineExceeded, os.ErrDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := New(4)
				defer q.Close()
				wake := make(chan struct{}, 1)
				tc.setup(q, wake)
				b := make([]byte, 8)
				_, _, err := q.TryReadMessage(b)
				require.ErrorIs(t, err, tc.try)
				_, _, err = q.ReadMessageUntil(b, wake)
				require.ErrorIs(t, err, tc.until)
			})
		})
	}

	// A wait ends with the datagram that arrives, or the wake.
	synctest.Test(t, func(t *testing.T) {
		q := New(4)
		defer q.Close()
		wake := make(chan struct{}, 1)
		got := make(chan error, 2)
		go func() {
			_, _, err := q.ReadMessageUntil(make([]byte, 8), wake)
			got <- err
		}()
		synctest.Wait()
		require.Empty(t, got, "waits")
		q.Push(ap(1), []byte("x"))
		require.NoError(t, <-got)
		go func() {
			_, _, err := q.ReadMessageUntil(make([]byte, 8), wake)
			got <- err
		}()
		synctest.Wait()
		wake <- struct{}{}
		require.ErrorIs(t, <-got, ErrWoken)
	})
}
