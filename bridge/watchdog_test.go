package bridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
)

func TestWatchPeriod(t *testing.T) {
	tests := []struct {
		ceiling  time.Duration
		timeouts []time.Duration
		want     time.Duration
	}{
		{time.Second, []time.Duration{5 * time.Second, 30 * time.Second}, 625 * time.Millisecond},
		{time.Second, []time.Duration{80 * time.Second}, time.Second},
		{time.Second, []time.Duration{8 * time.Millisecond}, 5 * time.Millisecond},
		{time.Second, []time.Duration{-1, 0, 400 * time.Millisecond}, 50 * time.Millisecond},
		{500 * time.Millisecond, nil, 500 * time.Millisecond},
		{500 * time.Millisecond, []time.Duration{-1, -1}, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.ceiling, tt.timeouts), func(t *testing.T) {
			assert.Equal(t, tt.want, watchPeriod(tt.ceiling, tt.timeouts...))
		})
	}
}

func TestWatchdogTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchdog(10*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond)
		assert.False(t, w.idleFor(w.now()))
		time.Sleep(100 * time.Millisecond)
		assert.True(t, w.idleFor(w.now()), "silent for the idle timeout")
		w.active()
		assert.False(t, w.idleFor(w.now()))
		assert.False(t, w.stalled(w.now()), "no write in progress")
		w.writeStart.Store(w.now() + 1)
		time.Sleep(49 * time.Millisecond)
		assert.False(t, w.stalled(w.now()))
		time.Sleep(time.Millisecond)
		assert.True(t, w.stalled(w.now()), "a write in progress for the write timeout")

		off := newWatchdog(10*time.Millisecond, -1, 0)
		off.writeStart.Store(off.now() + 1)
		time.Sleep(time.Hour)
		assert.False(t, off.idleFor(off.now()), "disabled")
		assert.False(t, off.stalled(off.now()), "disabled")
	})
}

func TestWatchdogRunsUntilCheckSaysStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchdog(10*time.Millisecond, -1, -1)
		var checks atomic.Int32
		var at []int64
		w.run(func(now int64) bool {
			at = append(at, now)
			return checks.Add(1) < 3
		})
		time.Sleep(time.Second)
		assert.Equal(t, int32(3), checks.Load())
		assert.Equal(t, []int64{int64(10 * time.Millisecond), int64(20 * time.Millisecond), int64(30 * time.Millisecond)}, at)
		w.stop()
	})
}

func TestWatchdogStopWaitsForCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatchdog(10*time.Millisecond, -1, -1)
		var checks atomic.Int32
		release := make(chan struct{})
		w.run(func(int64) bool {
			checks.Add(1)
			<-release
			return true // would rearm, but stop comes first
		})
		time.Sleep(15 * time.Millisecond)
		synctest.Wait() // the first check is blocked
		stopped := make(chan struct{})
		go func() {
			w.stop()
			close(stopped)
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a check runs")
		default:
		}
		close(release)
		<-stopped
		time.Sleep(time.Second)
		assert.Equal(t, int32(1), checks.Load(), "no check after stop")
	})
}

func TestReadEnd(t *testing.T) {
	tests := []struct {
		err  error
		code websocket.StatusCode
	}{
		{websocket.CloseError{Code: websocket.StatusNormalClosure}, websocket.StatusNormalClosure},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: 4000, Reason: "x"}), 4000},
		{fmt.Errorf("read: %w", websocket.ErrMessageTooBig), websocket.StatusMessageTooBig},
		{errors.New("EOF"), websocket.StatusGoingAway},
	}
	for _, tt := range tests {
		code, reason := readEnd(tt.err)
		assert.Equal(t, tt.code, code, "%v", tt.err)
		if tt.code == websocket.StatusNormalClosure || tt.code == 4000 {
			assert.Empty(t, reason, "the peer closed: nothing to tell it")
		} else {
			assert.NotEmpty(t, reason)
		}
	}
}

func TestOffers(t *testing.T) {
	tests := []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{Subprotocol}, true},
		{[]string{"a, " + Subprotocol + " ,b"}, true},
		{[]string{"a", Subprotocol}, true},
		{[]string{Subprotocol + "x"}, false},
		{[]string{TransportSubprotocol}, false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "/", nil)
		for _, h := range tt.header {
			r.Header.Add("Sec-WebSocket-Protocol", h)
		}
		assert.Equal(t, tt.want, offers(r, Subprotocol), "%q", tt.header)
	}
}

// noDeadlines is a connection whose deadlines do nothing, so that only
// the watchdog can end a close on it.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error { return nil }

// TestWatchCutsAClose checks that the watchdogs cover a close: a session
// whose end began closeTimeout ago (the relay's) or muxEndGrace ago (a
// Mux's) and is still closing has its connection cut by the check, even
// where the connection's deadline did nothing; not before.
func TestWatchCutsAClose(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		watch func(bc *batchConn, endedAt int64) func(now int64) bool
	}{
		{"relay", closeTimeout, func(bc *batchConn, endedAt int64) func(int64) bool {
			s := &session{bc: bc}
			s.endedAt.Store(endedAt)
			return s.watch
		}},
		{"mux", muxEndGrace, func(bc *batchConn, endedAt int64) func(int64) bool {
			s := &muxSession{bc: bc, wd: newWatchdog(time.Second, -1, -1)}
			s.endedAt.Store(endedAt)
			return s.watch
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, peer := net.Pipe()
			defer peer.Close()
			bc := &batchConn{Conn: noDeadlines{ours}}
			start := int64(time.Minute)
			watch := tt.watch(bc, start+1)
			// A pipe's SetReadDeadline fails once it is closed.
			assert.True(t, watch(start+int64(tt.grace)-1), "the watchdog stops watching a close")
			assert.NoError(t, ours.SetReadDeadline(time.Time{}), "cut before the grace")
			assert.True(t, watch(start+int64(tt.grace)))
			assert.ErrorIs(t, ours.SetReadDeadline(time.Time{}), io.ErrClosedPipe, "not cut at the grace")
		})
	}
}
