package fleet_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/testing/redistest"
)

// simServer is a game server that exists only in the registry: the scale
// benchmark heartbeats a thousand of them.
type simServer struct {
	addr      net.Addr
	connected atomic.Int64
}

func (s *simServer) Addr() net.Addr  { return s.addr }
func (s *simServer) MaxClients() int { return 64 }
func (s *simServer) Stats() netcode.ServerStats {
	return netcode.ServerStats{Connected: int(s.connected.Load())}
}
func (s *simServer) Drain() {}

// BenchmarkFleet1000 is the fleet at scale, on this machine: 1,000
// registered servers heartbeating every second (TTL 3 s), and token
// requests at 1,000 per second (open loop: one every millisecond, each on
// its own goroutine) through a backend handler whose Chooser reads the
// registry every 250 ms and whose rate limit is in Redis. b.N is the
// number of requests; run it with -benchtime=10000x for 10 s:
//
//	go test -run '^$' -bench Fleet1000 -benchtime 10000x ./fleet
//
// It runs with the rate limit in Redis (one script call per token) and in
// the handler's memory, and reports the latency of the choice alone and of the whole HTTP
// request (p50, p99), the Redis commands per token (the rate limit's one,
// the Chooser's reads, and everything sent, heartbeats included), and,
// for the design not taken, the latency of reading the 1,000 entries,
// which a Chooser without its copy would pay on every token.
func BenchmarkFleet1000(b *testing.B) {
	b.Run("limit=redis", func(b *testing.B) { benchmarkFleet(b, true) })
	b.Run("limit=memory", func(b *testing.B) { benchmarkFleet(b, false) })
}

// benchmarkFleet is BenchmarkFleet1000 with the rate limit in Redis or in
// the handler's memory.
func benchmarkFleet(b *testing.B, redisLimit bool) {
	redisSrv := redistest.Start(b)
	rdb, err := fleet.NewClient(redisSrv.URL())
	require.NoError(b, err)
	defer rdb.Close()
	ctx := context.Background()

	const servers = 1000
	var regs []*fleet.Server
	for i := range servers {
		s := &simServer{addr: &net.UDPAddr{IP: net.IPv4(10, 0, byte(i/250), byte(1+i%250)), Port: 40000}}
		s.connected.Store(int64(i % 60))
		reg, err := fleet.Register(ctx, s, fleet.ServerConfig{Client: rdb, ProtocolID: protocolID, Region: "eu", ID: fmt.Sprint("sim", i)})
		require.NoError(b, err)
		regs = append(regs, reg)
	}
	defer func() {
		for _, r := range regs {
			r.Close()
		}
	}()
	ch, err := fleet.NewChooser(ctx, fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"eu"}})
	require.NoError(b, err)
	defer ch.Close()
	waitFor(b, time.Minute, "the Chooser sees every server", func() bool { return len(ch.Servers("eu")) == servers })
	var lim backend.Limiter // nil: in memory
	if redisLimit {
		if lim, err = fleet.NewRateLimiter(rdb, "", 10, 10); err != nil {
			b.Fatal(err)
		}
	}

	var mu sync.Mutex
	var choice, total []time.Duration
	h, err := backend.NewHandler(&backend.Config{
		ProtocolID:   protocolID,
		PrivateKey:   testKey,
		Authenticate: userHeader,
		Limiter:      lim,
		ChooseServers: func(r *http.Request, id backend.Identity) ([]backend.Server, error) {
			start := time.Now()
			s, err := ch.ChooseServers(r, id)
			d := time.Since(start)
			mu.Lock()
			choice = append(choice, d)
			mu.Unlock()
			return s, err
		},
	})
	require.NoError(b, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer client.CloseIdleConnections()

	var cmds commandCounter
	rdb.AddHook(&cmds)
	beatsBefore := heartbeats(regs)
	readsBefore := ch.Stats().Reads
	var failed atomic.Int64
	var failure atomic.Value // the first failure
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	var late time.Duration // the most the sender fell behind its schedule: a stall of the whole process
	for i := range b.N {
		if d := time.Until(start.Add(time.Duration(i) * time.Millisecond)); d > 0 {
			time.Sleep(d)
		} else {
			late = max(late, -d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
			req.Header.Set("X-User", strconv.Itoa(i+1))
			t0 := time.Now()
			resp, err := client.Do(req)
			d := time.Since(t0)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
				if err == nil {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
				failure.CompareAndSwap(nil, err.Error())
				if resp != nil {
					resp.Body.Close()
				}
				return
			}
			resp.Body.Close()
			mu.Lock()
			total = append(total, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sent := cmds.snapshot()
	beats := heartbeats(regs) - beatsBefore
	reads := ch.Stats().Reads - readsBefore

	require.Zero(b, failed.Load(), "failed token requests, the first: %v", failure.Load())
	pct := func(ds []time.Duration, p float64) float64 {
		slices.Sort(ds)
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	all := int64(0)
	for _, v := range sent {
		all += v
	}
	tokens := float64(len(total))
	// Every script call is an EVALSHA (an EVAL the first time).
	evals := sent["evalsha"] + sent["eval"]
	rateOps := float64(evals-int64(beats)-int64(reads)) / tokens
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(choice, 0.5), "choice-p50-ms")
	b.ReportMetric(pct(choice, 0.99), "choice-p99-ms")
	b.ReportMetric(pct(total, 0.5), "http-p50-ms")
	b.ReportMetric(pct(total, 0.9), "http-p90-ms")
	b.ReportMetric(pct(total, 0.99), "http-p99-ms")
	b.ReportMetric(pct(total, 1), "http-max-ms")
	b.ReportMetric(float64(late.Microseconds())/1000, "sender-late-max-ms")
	b.ReportMetric(rateOps, "ratelimit-ops/token")
	b.ReportMetric(float64(reads)/tokens, "read-ops/token")
	b.ReportMetric(float64(all)/tokens, "all-redis-cmds/token")
	// The alternative design: one registry read per token.
	var perToken []time.Duration
	for range 200 {
		t0 := time.Now()
		infos, err := fleet.List(ctx, rdb, "", "eu")
		perToken = append(perToken, time.Since(t0))
		require.NoError(b, err)
		require.Len(b, infos, servers)
	}
	if info, err := rdb.Info(ctx, "commandstats").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_hgetall") || strings.HasPrefix(line, "cmdstat_evalsha") || strings.HasPrefix(line, "cmdstat_hset") {
				b.Logf("redis-server's own cost: %s", strings.TrimSpace(line))
			}
		}
	}
	b.ReportMetric(pct(perToken, 0.5), "read-1000-p50-ms")
	b.ReportMetric(pct(perToken, 0.99), "read-1000-p99-ms")
	b.Logf("%d servers, %d tokens in %v: %d heartbeats, %d registry reads, %d Redis commands sent in all: %v", servers, len(total), elapsed.Round(time.Millisecond), beats, reads, all, sent)
}

func heartbeats(regs []*fleet.Server) uint64 {
	n := uint64(0)
	for _, r := range regs {
		w, _ := r.Heartbeats()
		n += w
	}
	return n
}

// commandCounter counts the commands a client sends, by name (a
// go-redis hook; the benchmark's whole process shares one client).
type commandCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *commandCounter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	for _, cmd := range cmds {
		c.n[cmd.Name()]++
	}
}

func (c *commandCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}
