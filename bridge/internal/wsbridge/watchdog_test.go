package wsbridge

import (
	"errors"
	"fmt"
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
			assert.Equal(t, tt.want, WatchPeriod(tt.ceiling, tt.timeouts...))
		})
	}
}

func TestWatchdogTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatchdog(10*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond)
		assert.False(t, w.IdleFor(w.Now()))
		time.Sleep(100 * time.Millisecond)
		assert.True(t, w.IdleFor(w.Now()), "silent for the idle timeout")
		w.Active()
		assert.False(t, w.IdleFor(w.Now()))
		assert.False(t, w.Stalled(w.Now()), "no write in progress")
		w.writeStart.Store(w.Now() + 1)
		time.Sleep(49 * time.Millisecond)
		assert.False(t, w.Stalled(w.Now()))
		time.Sleep(time.Millisecond)
		assert.True(t, w.Stalled(w.Now()), "a write in progress for the write timeout")

		off := NewWatchdog(10*time.Millisecond, -1, 0)
		off.writeStart.Store(off.Now() + 1)
		time.Sleep(time.Hour)
		assert.False(t, off.IdleFor(off.Now()), "disabled")
		assert.False(t, off.Stalled(off.Now()), "disabled")
	})
}

func TestWatchdogRunsUntilCheckSaysStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatchdog(10*time.Millisecond, -1, -1)
		var checks atomic.Int32
		var at []int64
		w.Run(func(now int64) bool {
			at = append(at, now)
			return checks.Add(1) < 3
		})
		time.Sleep(time.Second)
		assert.Equal(t, int32(3), checks.Load())
		assert.Equal(t, []int64{int64(10 * time.Millisecond), int64(20 * time.Millisecond), int64(30 * time.Millisecond)}, at)
		w.Stop()
	})
}

func TestWatchdogStopWaitsForCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatchdog(10*time.Millisecond, -1, -1)
		var checks atomic.Int32
		release := make(chan struct{})
		w.Run(func(int64) bool {
			checks.Add(1)
			<-release
			return true // would rearm, but stop comes first
		})
		time.Sleep(15 * time.Millisecond)
		synctest.Wait() // the first check is blocked
		stopped := make(chan struct{})
		go func() {
			w.Stop()
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
		code, reason := ReadEnd(tt.err)
		assert.Equal(t, tt.code, code, "%v", tt.err)
		if tt.code == websocket.StatusNormalClosure || tt.code == 4000 {
			assert.Empty(t, reason, "the peer closed: nothing to tell it")
		} else {
			assert.NotEmpty(t, reason)
		}
	}
}

func TestOffers(t *testing.T) {
	const Subprotocol, TransportSubprotocol = "netcode.relay.v1", "netcode.transport.v1"
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
		assert.Equal(t, tt.want, Offers(r, Subprotocol), "%q", tt.header)
	}
}
