package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/fleet"
)

// player is one client of the end-to-end test: it gets a token from a
// backend, connects, echoes every 100 ms, and starts over on any error.
type player struct {
	id uint64

	mu         sync.Mutex
	server     string    // where it is connected now ("" between connections)
	lastEcho   time.Time // the last echo that came back
	reconnects int
}

func (p *player) state() (string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.server, p.lastEcho
}

func (p *player) run(ctx context.Context, backends []string) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		tok, err := fetchToken(ctx, backends[(int(p.id)+attempt)%len(backends)], p.id)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		c, err := netcode.DialContext(ctx, tok)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		p.mu.Lock()
		p.server = c.RemoteAddr().String()
		if attempt > 0 {
			p.reconnects++
		}
		p.mu.Unlock()
		for i := 0; ctx.Err() == nil; i++ {
			if echoOnce(c, fmt.Sprint(p.id, " ", i)) != nil {
				break
			}
			p.mu.Lock()
			p.lastEcho = time.Now()
			p.mu.Unlock()
			sleepCtx(ctx, 100*time.Millisecond)
		}
		c.Close()
		p.mu.Lock()
		p.server = ""
		p.mu.Unlock()
	}
}

// sleepCtx paces a player; it returns early when ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TestFleet is the fleet end to end over real UDP and a real Redis: 3
// game servers (one in a child process), 2 token backends, 200 clients.
// A server killed with SIGKILL leaves new tokens within the TTL and its
// clients land on the others; a drained one is never named; Redis
// restarted empty and the fleet re-forms; every client ends up echoing.
func TestFleet(t *testing.T) {
	redisSrv, rdb := startRedis(t)
	a := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "a"})
	b := startServer(t, "udp4", fleet.ServerConfig{Client: rdb, ID: "b"})
	child, cAddr := startChild(t, redisSrv.URL(), "c")
	var urls []string
	var backends []*tokenBackend
	for range 2 {
		be := startBackend(t, rdb, nil)
		backends = append(backends, be)
		urls = append(urls, be.srv.URL)
		waitFor(t, 10*time.Second, "a backend sees the 3 servers", func() bool { return len(be.ch.Servers("test")) == 3 })
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	players := make([]*player, 200)
	for i := range players {
		players[i] = &player{id: uint64(i + 1)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			players[i].run(ctx, urls)
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	// everyEchoed waits until every player echoed after since.
	everyEchoed := func(what string, since time.Time) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() bool {
			for _, p := range players {
				if _, last := p.state(); !last.After(since) {
					return false
				}
			}
			return true
		})
	}
	everyEchoed("every player connected and echoing", time.Time{})
	on := map[string]int{}
	for _, p := range players {
		s, _ := p.state()
		on[s]++
	}
	t.Logf("200 players: %v", on)
	assert.Positive(t, on[cAddr.String()], "the least loaded got players")

	// Kill c: it leaves new tokens within the TTL; its players land on a or b.
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	names := func(be *tokenBackend, s netip.AddrPort) bool {
		got, err := be.ch.Choose(fleet.Query{})
		return err == nil && slices.ContainsFunc(got, func(x backend.Server) bool { return x.Addr == s })
	}
	for _, be := range backends {
		waitFor(t, testTTL+10*time.Second, "the killed server leaves new tokens", func() bool { return !names(be, cAddr) })
	}
	t.Logf("the killed server left both backends' tokens %v after SIGKILL (TTL %v)", time.Since(killed).Round(time.Millisecond), testTTL)
	everyEchoed("every player echoing again after the kill", time.Now())
	for _, p := range players {
		s, _ := p.state()
		assert.NotEqual(t, cAddr.String(), s, "player %d still on the killed server", p.id)
	}

	// Drain b: once the message is in, no token names it.
	events := []uint64{backends[0].ch.Stats().Events, backends[1].ch.Stats().Events}
	require.NoError(t, b.reg.Drain(context.Background()))
	for i, be := range backends {
		waitFor(t, 10*time.Second, "the drain reaches the backend", func() bool { return be.ch.Stats().Events > events[i] })
		for range 100 {
			assert.False(t, names(be, b.addr), "a drained server named")
		}
	}

	// Restart Redis empty: the live servers come back, the dead one does not.
	redisSrv.Restart()
	restarted := time.Now()
	waitFor(t, 10*time.Second, "a and b back in the registry", func() bool {
		l := listed(rdb)
		return l["a"] != nil && l["b"] != nil
	})
	t.Logf("the fleet re-formed %v after Redis restarted empty", time.Since(restarted).Round(time.Millisecond))
	l := listed(rdb)
	assert.Nil(t, l["c"], "the killed server stays gone")
	assert.True(t, l["b"].Draining, "b is still draining")
	for _, be := range backends {
		waitFor(t, 10*time.Second, "the backend names a after the restart", func() bool { return names(be, a.addr) })
		assert.False(t, names(be, b.addr))
	}
	everyEchoed("every player echoing after the Redis restart", time.Now())
	reconnects := 0
	for _, p := range players {
		p.mu.Lock()
		reconnects += p.reconnects
		p.mu.Unlock()
	}
	t.Logf("%d reconnects in all (the killed server's players)", reconnects)
	assert.LessOrEqual(t, reconnects, on[cAddr.String()]+20, "only the killed server's players had to reconnect, give or take a few timed out by a loaded machine")
}
