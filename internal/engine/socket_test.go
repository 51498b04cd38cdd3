package engine

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPullDeadline checks the socket deadline a pulling Read reads with,
// on simulated time: a dialed Conn's (One) is its Conn's read deadline;
// a Listener's (Many) is the Conn's deadline when that comes within
// pullBound, else pullBound from now, a deadline already set being kept
// while more than half of pullBound is left and not past the Conn's.
func TestPullDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		at := func(d time.Duration) time.Time { return now.Add(d) }
		cases := []struct {
			name     string
			role     Role
			rdl, cur time.Time // the Conn's read deadline, the socket's
			want     time.Time
		}{
			{name: "one, no deadline", role: One, cur: at(pullBound), want: time.Time{}},
			{name: "one, a deadline far off", role: One, rdl: at(time.Hour), want: at(time.Hour)},
			{name: "many, none set", role: Many, want: at(pullBound)},
			{name: "many, the Conn's deadline sooner", role: Many, rdl: at(pullBound / 4), cur: at(pullBound), want: at(pullBound / 4)},
			{name: "many, the Conn's deadline passed", role: Many, rdl: at(-time.Second), want: at(-time.Second)},
			{name: "many, the socket's kept", role: Many, cur: at(pullBound * 3 / 4), want: at(pullBound * 3 / 4)},
			{name: "many, the socket's kept under a later Conn deadline", role: Many, rdl: at(time.Hour), cur: at(pullBound * 3 / 4), want: at(pullBound * 3 / 4)},
			{name: "many, the socket's less than half left", role: Many, cur: at(pullBound / 4), want: at(pullBound)},
			{name: "many, the socket's past (a Stop)", role: Many, cur: time.Unix(1, 0), want: at(pullBound)},
			{name: "many, the socket's beyond the bound", role: Many, cur: at(2 * pullBound), want: at(pullBound)},
		}
		for _, c := range cases {
			s := &Socket{role: c.role, sockDL: c.cur}
			got := s.pullDeadline(c.rdl)
			assert.True(t, got.Equal(c.want), "%s: got %v, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
	})
}
