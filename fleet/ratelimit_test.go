package fleet_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/fleet"
)

// deadlineHook records, for every command sent, how long its context
// gave it (0 for none).
type deadlineHook struct {
	mu    sync.Mutex
	given []time.Duration
}

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var d time.Duration
		if dl, ok := ctx.Deadline(); ok {
			d = time.Until(dl)
		}
		h.mu.Lock()
		h.given = append(h.given, d)
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *deadlineHook) calls() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.given...)
}

// TestRateLimiterFailsFast: with Redis killed, the backend keeps issuing
// tokens through the Chooser's grace period, limiting in memory, and the
// rate limiter waits on Redis at most once per Retry, each call bounded by
// Timeout (read from the contexts its calls carry, not timed).
func TestRateLimiterFailsFast(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	hook := new(deadlineHook)
	limRdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	limRdb.AddHook(hook)
	defer limRdb.Close()
	lim, err := fleet.NewRateLimiter(limRdb, "", 1000, 1000)
	require.NoError(t, err)
	const retry = 200 * time.Millisecond
	lim.Retry = retry
	be := startBackend(t, rdb, func(c *fleet.ChooserConfig, b *backend.Config) {
		c.Grace = time.Minute // the limiter is under test, not the grace
		b.Limiter = lim
	})
	waitFor(t, 10*time.Second, "the backend names a", func() bool { return len(be.ch.Servers("test")) == 1 })
	_, err = fetchToken(context.Background(), be.srv.URL, 1)
	require.NoError(t, err)
	before := len(hook.calls())
	require.Positive(t, before, "the limit is in Redis while it runs")

	redisSrv.Stop()
	start := time.Now()
	const requests = 40
	var slowest time.Duration
	for i := range requests {
		t0 := time.Now()
		_, err := fetchToken(context.Background(), be.srv.URL, uint64(100+i))
		slowest = max(slowest, time.Since(t0))
		require.Equal(t, http.StatusOK, statusOf(err), "request %d after the kill: %v", i, err)
	}
	elapsed := time.Since(start)
	calls := hook.calls()[before:]
	t.Logf("Redis killed: %d of %d token requests issued in %v (slowest %v); the limiter called Redis %d times (Retry %v)",
		requests, requests, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond), len(calls), retry)
	for _, d := range calls {
		assert.Positive(t, d, "every call to Redis has a deadline")
		assert.LessOrEqual(t, d, fleet.DefaultLimitTimeout, "no call may wait past the limiter's Timeout")
	}
	// Probes: the first request, then at most one per Retry (each through
	// redis_rate's EVALSHA, and EVAL after a NOSCRIPT).
	assert.LessOrEqual(t, len(calls), 2*(1+int(elapsed/retry)+1), "the limiter does not call a dead Redis on every request")

	// A Redis that accepts and never answers (a hung one): the call still
	// ends at the Timeout, with a client from fleet.NewClient (which
	// honours context deadlines on the socket). The timing is not
	// asserted, but it shows in the test's duration: it was 5 s.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hang, err := fleet.NewClient("redis://" + ln.Addr().String())
	require.NoError(t, err)
	defer hang.Close()
	hangHook := new(deadlineHook)
	hang.(*redis.Client).AddHook(hangHook)
	lim2, err := fleet.NewRateLimiter(hang, "", 1, 1)
	require.NoError(t, err)
	_, _, err = lim2.Allow(context.Background(), 1)
	require.ErrorIs(t, err, fleet.ErrLimiterUnavailable)
	_, _, err = lim2.Allow(context.Background(), 1)
	require.ErrorIs(t, err, fleet.ErrLimiterUnavailable, "within Retry: no call")
	hc := hangHook.calls()
	require.NotEmpty(t, hc)
	assert.LessOrEqual(t, len(hc), 2, "one probe (EVALSHA, EVAL), then no call within Retry")
	for _, d := range hc {
		assert.LessOrEqual(t, d, fleet.DefaultLimitTimeout)
	}
}
