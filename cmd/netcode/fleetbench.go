package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/fleet"
)

// runFleetBench is `netcode fleet bench`: a simulated fleet against a
// real Redis or Cluster, measured as an operator would size one.
func runFleetBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fleet bench", "-registry URL [flags]\n\nRegisters -servers simulated game servers (no sockets: entries that heartbeat)\nin -shards shards of one region, runs a token backend over HTTP on loopback\nwhose Chooser reads them, sends it -rate token requests per second for\n-duration, and prints the choice's and the request's p50/p99 and the Redis\ncommands per token. It writes under -prefix, apart from a live fleet's keys,\nand removes its servers when done.", stdout, stderr)
	url := fs.String("registry", "", "Redis URL (a single node, Sentinel or Cluster, as serve -registry takes) (required)")
	servers := fs.Int("servers", 1000, "simulated servers")
	shards := fs.Int("shards", 1, "shards of the region (fleet.SetShards)")
	perSecond := fs.Int("rate", 1000, "token requests per second (open loop)")
	duration := fs.Duration("duration", 10*time.Second, "how long to send requests")
	limit := fs.String("limit", "redis", "per-user rate limit: redis (fleet.RateLimiter, one call per token) or memory")
	prefix := fs.String("prefix", "netcode:fleetbench", "key prefix: apart from a live fleet's (netcode:fleet)")
	region := fs.String("region", "bench", "region of the simulated servers")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *url == "":
		return errors.New("-registry is required")
	case *servers < 1 || *perSecond < 1 || *duration <= 0:
		return errors.New("-servers, -rate and -duration must be positive")
	case *limit != "redis" && *limit != "memory":
		return fmt.Errorf("-limit %q: redis or memory", *limit)
	}
	quietRedis(slog.New(slog.DiscardHandler))
	// The servers' client and the backend's, apart, so that the backend's
	// commands are counted alone.
	srvRdb, err := fleet.NewClient(*url)
	if err != nil {
		return err
	}
	defer srvRdb.Close()
	rdb, err := fleet.NewClient(*url)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := fleet.SetShards(ctx, srvRdb, *prefix, *region, *shards); err != nil {
		return fmt.Errorf("setting %d shards in %s: %w", *shards, redactURL(*url), err)
	}

	start := time.Now()
	regs, err := registerSims(ctx, srvRdb, *servers, *prefix, *region)
	defer func() {
		inParallel(len(regs), func(i int) error { return regs[i].Close() })
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "registered %d servers in %d shards in %v\n", *servers, *shards, time.Since(start).Round(time.Millisecond))

	ch, err := fleet.NewChooser(ctx, fleet.ChooserConfig{Client: rdb, Prefix: *prefix, ProtocolID: defaultProtocolID, Regions: []string{*region}})
	if err != nil {
		return err
	}
	defer ch.Close()
	for len(ch.Servers(*region)) < *servers {
		if time.Since(start) > time.Minute {
			return fmt.Errorf("the Chooser sees %d of %d servers after a minute", len(ch.Servers(*region)), *servers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lim backend.Limiter
	if *limit == "redis" {
		if lim, err = fleet.NewRateLimiter(rdb, *prefix, 10, 10); err != nil {
			return err
		}
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	var choice latencies
	h, err := backend.NewHandler(&backend.Config{
		ProtocolID: defaultProtocolID,
		PrivateKey: key,
		Authenticate: func(r *http.Request) (backend.Identity, error) {
			id, err := strconv.ParseUint(r.Header.Get("X-User"), 10, 64)
			if err != nil || id == 0 {
				return backend.Identity{}, backend.ErrUnauthorized
			}
			return backend.Identity{ClientID: id}, nil
		},
		Limiter: lim,
		ChooseServers: func(r *http.Request, id backend.Identity) ([]backend.Server, error) {
			t0 := time.Now()
			s, err := ch.ChooseServers(r, id)
			choice.add(time.Since(t0))
			return s, err
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	var cmds commandCounter
	rdb.AddHook(&cmds)
	beats0, reads0 := beatsOf(regs), ch.Stats().Reads
	var total latencies
	var failed atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	n := int(duration.Seconds() * float64(*perSecond))
	interval := time.Second / time.Duration(*perSecond)
	start = time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/token", nil)
			req.Header.Set("X-User", strconv.Itoa(i+1))
			t0 := time.Now()
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, err.Error())
				return
			}
			total.add(time.Since(t0))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sent := cmds.total()
	beats, reads := beatsOf(regs)-beats0, ch.Stats().Reads-reads0
	tokens := total.len()
	fmt.Fprintf(stdout, "%d token requests in %v (%.0f/s), %d failed", tokens+int(failed.Load()), elapsed.Round(time.Millisecond),
		float64(tokens+int(failed.Load()))/elapsed.Seconds(), failed.Load())
	if f := firstFailure.Load(); f != nil {
		fmt.Fprintf(stdout, " (the first: %v)", f)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "choice:  p50 %v  p99 %v  max %v\n", choice.pct(0.5), choice.pct(0.99), choice.pct(1))
	fmt.Fprintf(stdout, "request: p50 %v  p99 %v  max %v (HTTP on loopback, limit in %s)\n", total.pct(0.5), total.pct(0.99), total.pct(1), *limit)
	if tokens > 0 {
		fmt.Fprintf(stdout, "redis:   %.2f commands per token from the backend (the rate limit's, and %d reads of the region: a GET and %d shard scripts each), %.0f heartbeats/s from the servers\n",
			float64(sent)/float64(tokens), reads, *shards, float64(beats)/elapsed.Seconds())
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "load average: %s\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	return nil
}

// registerSims registers n simulated servers, 64 at a time; a server
// whose first heartbeat failed counts, as it retries.
func registerSims(ctx context.Context, rdb redis.UniversalClient, n int, prefix, region string) ([]*fleet.Server, error) {
	regs := make([]*fleet.Server, n)
	err := inParallel(n, func(i int) error {
		src := &simSource{addr: &net.UDPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), Port: 40000}, connected: i % 60}
		r, err := fleet.Register(ctx, src, fleet.ServerConfig{Client: rdb, Prefix: prefix, ProtocolID: defaultProtocolID, Region: region, ID: fmt.Sprint("sim", i)})
		if regs[i] = r; r != nil {
			return nil // a first heartbeat that failed (a loaded Redis) is retried
		}
		return err
	})
	return slices.DeleteFunc(regs, func(r *fleet.Server) bool { return r == nil }), err
}

// inParallel calls f(0) to f(n-1), 64 at a time, and returns the first
// error.
func inParallel(n int, f func(int) error) error {
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// simSource is a game server that exists only in the registry.
type simSource struct {
	addr      net.Addr
	connected int
}

func (s *simSource) Addr() net.Addr  { return s.addr }
func (s *simSource) MaxClients() int { return 64 }
func (s *simSource) Stats() netcode.ServerStats {
	return netcode.ServerStats{Connected: s.connected}
}
func (s *simSource) Drain() {}

func beatsOf(regs []*fleet.Server) uint64 {
	n := uint64(0)
	for _, r := range regs {
		w, _ := r.Heartbeats()
		n += w
	}
	return n
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// pct returns the p-quantile (0 to 1), rounded to the microsecond.
func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return l.d[int(p*float64(len(l.d)-1))].Round(time.Microsecond)
}

// commandCounter counts the commands a client sends (a go-redis hook).
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) total() int64 { return c.n.Load() }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
