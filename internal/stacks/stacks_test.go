package stacks

import (
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
	require.Eventually(t, func() bool { return Blocked("stacks.parkOnChannel", "chan receive") },
		10*time.Second, time.Millisecond, "the goroutine never showed as blocked in a channel receive")
	assert.False(t, Blocked("stacks.parkOnChannel", "IO wait"), "reported in the wrong state")
	assert.False(t, Blocked("stacks.noSuchFunction", "chan receive"), "reported a function no goroutine runs")
	close(c)
	<-done
}
