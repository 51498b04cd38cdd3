package fleet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/testing/redistest"
	"github.com/gonetcode/netcode/token"
)

// Short timings, so that expiries happen within a test's patience; the
// defaults are 1 s, 3 s and 250 ms. The TTL leaves a loaded
// CI machine (-race, 2 cores) room for late heartbeats.
const (
	testHeartbeat = 100 * time.Millisecond
	testTTL       = 2 * time.Second
	testRefresh   = 50 * time.Millisecond
	// testTimeout is the connections' timeout in the tests' tokens: how
	// long a client of a killed server takes to notice.
	testTimeout = 2
)

const protocolID = 0x666c656574746573

var testKey = crypto.Key{7, 7, 7, 1, 2, 3}

// childEnv, when set to a Redis URL, makes the test binary a game server
// registered there (runChild) instead of running tests: the process the
// tests kill with SIGKILL.
const childEnv = "NETCODE_FLEET_TEST_CHILD"

func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		os.Exit(runChild(url, os.Getenv(childEnv+"_ID")))
	}
	// go-redis logs dial failures through its own global logger: the
	// tests stop Redis on purpose.
	redis.SetLogger(quietLogger{})
	// go-redis's pool probes a refused address from a goroutine that
	// notices its pool closed within a second.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// quietLogger discards go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// runChild serves an echo server registered in Redis until killed; it
// prints "ready ADDR" once registered.
func runChild(url, id string) int {
	rdb, err := fleet.NewClient(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: testKey})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := fleet.Register(context.Background(), l, fleet.ServerConfig{
		Client: rdb, ID: id, ProtocolID: protocolID, Region: "test", Heartbeat: testHeartbeat, TTL: testTTL,
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %s\n", l.Addr())
	echo(l)
	return 0
}

// startChild runs a registered game server in a child process and
// returns it with its address; the test's cleanup kills it.
func startChild(t *testing.T, url, id string) (*exec.Cmd, netip.AddrPort) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+url, childEnv+"_ID="+id)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	lines := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
	}()
	select {
	case line := <-lines:
		a, ok := strings.CutPrefix(line, "ready ")
		require.True(t, ok, "child said %q", line)
		return cmd, netip.MustParseAddrPort(a)
	case <-done:
		t.Fatal("the child server exited before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("the child server was not ready within 30 s")
	}
	return nil, netip.AddrPort{}
}

// startRedis starts a redis-server and returns it with a client.
func startRedis(t *testing.T) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	srv := redistest.Start(t)
	rdb, err := fleet.NewClient(srv.URL())
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

// echo answers every payload of every client until the Listener closes.
func echo(l *netcode.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// gameServer is a registered echo server in this process.
type gameServer struct {
	l    *netcode.Listener
	reg  *fleet.Server
	addr netip.AddrPort
}

// startServer listens on network's loopback address, echoes and
// registers; cfg's Client, ProtocolID, Heartbeat and TTL default to the
// tests'. The test's cleanup closes both.
func startServer(t *testing.T, network string, cfg fleet.ServerConfig) *gameServer {
	t.Helper()
	host := "127.0.0.1:0"
	if network == "udp6" {
		host = "[::1]:0"
	}
	l, err := netcode.Listen(network, host, &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: testKey})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); echo(l) }()
	if cfg.ProtocolID == 0 {
		cfg.ProtocolID = protocolID
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = testHeartbeat
	}
	if cfg.TTL == 0 {
		cfg.TTL = testTTL
	}
	if cfg.Region == "" {
		cfg.Region = "test"
	}
	reg, err := fleet.Register(context.Background(), l, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		reg.Close()
		l.Close()
		<-done
	})
	return &gameServer{l: l, reg: reg, addr: netip.MustParseAddrPort(l.Addr().String())}
}

// tokenBackend is a token backend choosing from the registry.
type tokenBackend struct {
	ch  *fleet.Chooser
	h   *backend.Handler
	srv *httptest.Server
}

// startBackend runs a backend handler over HTTP with a Chooser of region
// "test"; mod may change either configuration.
func startBackend(t *testing.T, rdb redis.UniversalClient, mod func(*fleet.ChooserConfig, *backend.Config)) *tokenBackend {
	t.Helper()
	ccfg := fleet.ChooserConfig{Client: rdb, ProtocolID: protocolID, Regions: []string{"test"}, Refresh: testRefresh}
	bcfg := backend.Config{
		ProtocolID:     protocolID,
		PrivateKey:     testKey,
		Authenticate:   userHeader,
		TimeoutSeconds: testTimeout,
		Rate:           1000,
		Burst:          1000,
	}
	if mod != nil {
		mod(&ccfg, &bcfg)
	}
	ch, err := fleet.NewChooser(context.Background(), ccfg)
	require.NoError(t, err)
	bcfg.ChooseServers = ch.ChooseServers
	h, err := backend.NewHandler(&bcfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ch.Close()
	})
	return &tokenBackend{ch: ch, h: h, srv: srv}
}

// userHeader authenticates "X-User: N" as client N.
func userHeader(r *http.Request) (backend.Identity, error) {
	id, err := strconv.ParseUint(r.Header.Get("X-User"), 10, 64)
	if err != nil || id == 0 {
		return backend.Identity{}, backend.ErrUnauthorized
	}
	return backend.Identity{ClientID: id}, nil
}

// errStatus is a token request answered other than 200.
type errStatus struct {
	code       int
	retryAfter string
}

func (e *errStatus) Error() string {
	return fmt.Sprintf("HTTP %d (Retry-After %q)", e.code, e.retryAfter)
}

// fetchToken asks the backend for user's token.
func fetchToken(ctx context.Context, url string, user uint64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-User", strconv.FormatUint(user, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &errStatus{resp.StatusCode, resp.Header.Get("Retry-After")}
	}
	return body, nil
}

// statusOf returns the HTTP status of a fetchToken error (200 for nil).
func statusOf(err error) int {
	var es *errStatus
	if errors.As(err, &es) {
		return es.code
	}
	if err == nil {
		return http.StatusOK
	}
	return 0
}

// named returns the servers a token names, in order.
func named(t testing.TB, tok []byte) []netip.AddrPort {
	t.Helper()
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	return ct.ServerAddrs
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// limit; it returns how long it took.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// listed returns the ids of region "test" in the registry (nil when Redis
// cannot be reached).
func listed(rdb redis.UniversalClient) map[string]*fleet.Info {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	infos, err := fleet.List(ctx, rdb, "", "test")
	if err != nil {
		return nil
	}
	out := map[string]*fleet.Info{}
	for _, i := range infos {
		out[i.ID] = i
	}
	return out
}

// echoOnce writes a payload and reads it back.
func echoOnce(c *netcode.Conn, payload string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(payload)); err != nil {
		return err
	}
	buf := make([]byte, netcode.MaxPayloadBytes)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) == payload {
			return nil
		}
	}
}

// hasIPv6 reports whether the machine has an IPv6 loopback.
func hasIPv6() bool {
	c, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		return false
	}
	c.Close()
	return true
}
