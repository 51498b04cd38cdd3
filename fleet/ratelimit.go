package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/gonetcode/netcode/backend"
)

// Bounds of a RateLimiter's calls when Redis fails.
const (
	// DefaultLimitTimeout bounds each RateLimiter call to Redis (dial,
	// go-redis's retries and the script): a token request waits at most
	// this long for the shared limit before the backend limits it in
	// memory instead.
	DefaultLimitTimeout = 100 * time.Millisecond
	// DefaultLimitRetry is how long a RateLimiter whose call failed answers
	// ErrLimiterUnavailable at once, without calling Redis, before it
	// tries Redis again (one request at a time).
	DefaultLimitRetry = time.Second
)

// ErrLimiterUnavailable is wrapped by the error of a RateLimiter's Allow
// while Redis is taken to be unreachable (within Retry of a failed call):
// the backend then limits in memory without waiting.
var ErrLimiterUnavailable = errors.New("netcode/fleet: rate limiter: Redis unreachable")

// RateLimiter is a per-user token rate held in Redis, so that it holds
// across every backend replica: set it as backend.Config.Limiter. It is
// the generic cell rate algorithm of github.com/go-redis/redis_rate, one
// script call per request on the user's own key.
//
// When Redis cannot be reached, Allow returns an error and the backend
// falls back to its in-memory limiter (per replica) for that request. It
// fails fast: a call waits at most Timeout, and after a failure Allow
// answers ErrLimiterUnavailable at once for Retry, letting one request at
// a time probe Redis after that. So while Redis is down, at most one token
// request per Retry waits, and none longer than Timeout — provided the
// client honours context deadlines on its socket, as NewClient's do
// (go-redis's ContextTimeoutEnabled); without it, a Redis that accepts
// and never answers holds that one request for the client's ReadTimeout.
type RateLimiter struct {
	// Timeout bounds each call to Redis; 0 means DefaultLimitTimeout.
	// Set it (and Retry) before the first Allow.
	Timeout time.Duration
	// Retry is how long Allow answers ErrLimiterUnavailable after a failed
	// call before it calls Redis again; 0 means DefaultLimitRetry.
	Retry time.Duration

	c      redis.UniversalClient
	lim    *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string

	// downUntil is when to call Redis again after a failure (UnixNano; 0
	// while Redis answers). A probe moves it on by Retry before calling,
	// so that concurrent requests do not all probe.
	downUntil atomic.Int64
}

// NewRateLimiter limits each user to r tokens per second in the long run
// and burst at once (backend.Config's Rate and Burst; 0 means
// backend.DefaultRate and DefaultBurst), under keys beginning with prefix
// ("" means DefaultPrefix).
func NewRateLimiter(c redis.UniversalClient, prefix string, r rate.Limit, burst int) (*RateLimiter, error) {
	if c == nil {
		return nil, errors.New("netcode/fleet: NewRateLimiter: nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if r == 0 {
		r = backend.DefaultRate
	}
	if burst == 0 {
		burst = backend.DefaultBurst
	}
	if r < 0 || r == rate.Inf || math.IsNaN(float64(r)) || burst < 0 {
		return nil, fmt.Errorf("netcode/fleet: rate %v and burst %d: want a finite positive rate and a burst >= 0", r, burst)
	}
	// One token per 1/r seconds, as x/time/rate counts.
	period := time.Duration(float64(time.Second) / float64(r))
	if period <= 0 {
		return nil, fmt.Errorf("netcode/fleet: rate %v too high", r)
	}
	return &RateLimiter{
		c:      c,
		lim:    redis_rate.NewLimiter(c),
		limit:  redis_rate.Limit{Rate: 1, Burst: burst, Period: period},
		prefix: prefix + ":rate:",
	}, nil
}

// Allow takes one token from the user's bucket; if there is none it says
// how long until there is.
func (l *RateLimiter) Allow(ctx context.Context, clientID uint64) (bool, time.Duration, error) {
	if l.limit.Burst == 0 {
		return false, l.limit.Period, nil
	}
	retry := cmp.Or(l.Retry, DefaultLimitRetry)
	if until := l.downUntil.Load(); until != 0 {
		now := time.Now().UnixNano()
		if now < until || !l.downUntil.CompareAndSwap(until, now+int64(retry)) {
			return false, 0, ErrLimiterUnavailable
		}
	}
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(l.Timeout, DefaultLimitTimeout))
	defer cancel()
	res, err := l.lim.Allow(cctx, l.prefix+strconv.FormatUint(clientID, 10), l.limit)
	if err != nil {
		if ctx.Err() == nil { // not the caller's cancellation: Redis's failure
			reloadOnFailure(l.c, err)
			l.downUntil.Store(time.Now().Add(retry).UnixNano())
		}
		return false, 0, fmt.Errorf("%w: %w", ErrLimiterUnavailable, err)
	}
	l.downUntil.Store(0)
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, max(res.RetryAfter, 0), nil
}
