package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/gonetcode/netcode/backend"
)

// RateLimiter is a per-user token rate held in Redis, so that it holds
// across every backend replica: set it as backend.Config.Limiter. It is
// the generic cell rate algorithm of github.com/go-redis/redis_rate, one
// script call per request on the user's own key. When Redis cannot be
// reached, Allow returns the error and the backend falls back to its
// in-memory limiter (per replica) for that request.
type RateLimiter struct {
	lim    *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
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
	res, err := l.lim.Allow(ctx, l.prefix+strconv.FormatUint(clientID, 10), l.limit)
	if err != nil {
		return false, 0, fmt.Errorf("netcode/fleet: rate limit: %w", err)
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, max(res.RetryAfter, 0), nil
}
