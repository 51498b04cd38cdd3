package stacks

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parkOnChannel(c chan struct{}) { <-c }

func TestBlocked(t *testing.T) {
	c := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		parkOnChannel(c)
	}()
	require.Eventually(t, func() bool { return Blocked("chan receive", "stacks.parkOnChannel", "stacks.TestBlocked") },
		10*time.Second, time.Millisecond, "the goroutine never showed as blocked in a channel receive")
	assert.False(t, Blocked("IO wait", "stacks.parkOnChannel"), "reported in the wrong state")
	assert.False(t, Blocked("chan receive", "stacks.parkOnChannel", "stacks.noSuchFunction"), "reported a goroutine that does not run every function named")
	close(c)
	<-done
}

func TestCount(t *testing.T) {
	c := make(chan struct{})
	done := make(chan struct{})
	const parked = 3
	for range parked {
		go func() {
			defer func() { done <- struct{}{} }()
			parkOnChannel(c)
		}()
	}
	require.Eventually(t, func() bool { return Count("stacks.parkOnChannel") == parked },
		10*time.Second, time.Millisecond, "the goroutines never all showed")
	assert.Zero(t, Count("stacks.parkOnChannel", "stacks.noSuchFunction"))
	close(c)
	for range parked {
		<-done
	}
	assert.Zero(t, Count("stacks.parkOnChannel"))
}

// TestSettled checks that a running timer callback unsettles the count,
// and that the count is every goroutine; Lasting counts all but it.
func TestSettled(t *testing.T) {
	c := make(chan struct{})
	done := make(chan struct{})
	time.AfterFunc(0, func() {
		defer close(done)
		parkOnChannel(c)
	})
	// The counts below come from separate snapshots, so they agree only
	// while no goroutine starts or ends. So this waits on its own
	// goroutine (require.Eventually runs its condition in goroutines of
	// its own, which may still be exiting when it returns) until the
	// callback runs and the earlier tests' goroutines, which may still be
	// exiting past their last send, have ended.
	poll(t, func() bool {
		return Blocked("chan receive", "stacks.parkOnChannel", TimerCallback) &&
			Count("stacks.TestBlocked")+Count("stacks.TestCount")+Count("assert.Eventually") == 0
	}, "the callback never showed as running, alone")
	n, settled := Settled(TimerCallback)
	assert.False(t, settled, "a timer callback is running")
	assert.Equal(t, runtime.NumGoroutine(), n)
	assert.Equal(t, n-1, Lasting(TimerCallback), "every goroutine but the callback")
	assert.Equal(t, n, Lasting("stacks.noSuchFunction"))
	_, settled = Settled("stacks.noSuchFunction")
	assert.True(t, settled, "nothing transient by that name")
	close(c)
	<-done
	require.Eventually(t, func() bool { _, settled := Settled(TimerCallback); return settled },
		10*time.Second, time.Millisecond, "the callback never ended")
}

// poll calls cond on the test's goroutine, every millisecond for up to 10
// s, until it holds; it fails the test with msg if it never does.
func poll(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal(msg)
		}
	}
}
