package backend_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonetcode/netcode/backend"
)

// scriptedLimiter answers Allow from a list, one answer per call.
type scriptedLimiter struct {
	answers []limiterAnswer
	users   []uint64
}

type limiterAnswer struct {
	ok   bool
	wait time.Duration
	err  error
}

func (l *scriptedLimiter) Allow(_ context.Context, user uint64) (bool, time.Duration, error) {
	l.users = append(l.users, user)
	a := l.answers[0]
	l.answers = l.answers[1:]
	return a.ok, a.wait, a.err
}

// TestSharedLimiter: Config.Limiter replaces the in-memory limit; when it
// fails, the in-memory limit answers instead (Burst 3 here).
func TestSharedLimiter(t *testing.T) {
	down := errors.New("registry down")
	lim := &scriptedLimiter{answers: []limiterAnswer{
		{ok: true}, {ok: true}, {ok: true}, {ok: true}, // past the in-memory burst of 3: the shared limit rules
		{ok: false, wait: 2500 * time.Millisecond},
		{err: down}, {err: down}, {err: down}, {err: down},
	}}
	h := newHandler(t, func(c *backend.Config) { c.Limiter = lim })
	for i, want := range []struct {
		code  int
		retry string
	}{
		{http.StatusOK, ""}, {http.StatusOK, ""}, {http.StatusOK, ""}, {http.StatusOK, ""},
		{http.StatusTooManyRequests, "3"},
		// The shared limiter fails: the in-memory bucket, untouched so far, allows 3.
		{http.StatusOK, ""}, {http.StatusOK, ""}, {http.StatusOK, ""},
		{http.StatusTooManyRequests, "1"},
	} {
		w := do(h, http.MethodPost, "Bearer alice", "")
		assert.Equal(t, want.code, w.Code, "request %d", i)
		assert.Equal(t, want.retry, w.Header().Get("Retry-After"), "request %d", i)
	}
	assert.Len(t, lim.users, 9)
	assert.Equal(t, lim.users[0], lim.users[8], "limited by client id")
}
