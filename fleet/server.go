package fleet

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gonetcode/netcode"
)

// Source is the game server a Server registers: a *netcode.Listener.
type Source interface {
	Addr() net.Addr
	MaxClients() int
	Stats() netcode.ServerStats
	Drain()
}

// ServerConfig configures a server's registration.
type ServerConfig struct {
	// Client is the registry; required.
	Client redis.UniversalClient
	// Prefix begins the keys; "" means DefaultPrefix.
	Prefix string
	// ID names the server in its region; "" means 16 random hex digits.
	ID string
	// Addrs are the "host:port" addresses tokens should name the server
	// by (its netcode.ServerConfig.PublicAddr, for one). Empty means the
	// Listener's address, which must then be a concrete one, not a
	// wildcard.
	Addrs []string
	// ProtocolID is the server's protocol id (netcode.ServerConfig's).
	ProtocolID uint64
	// Region is what backends choose servers by; "" means DefaultRegion.
	Region string
	// Tags are further properties backends may ask for ("ranked",
	// "map=dust"): up to 32, each up to 64 printable ASCII bytes without
	// spaces, commas or braces.
	Tags []string
	// Version is written in the entry; "" means netcode.Version.
	Version string
	// Heartbeat is how often the entry is refreshed; 0 means
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// TTL is how long the entry outlives its last heartbeat; 0 means
	// DefaultTTL. It must exceed Heartbeat.
	TTL time.Duration
	// MaxBackoff bounds the wait between heartbeats that fail (Redis
	// unreachable or failing over): the first retry follows after an
	// eighth of Heartbeat, and the wait doubles on each failure up to
	// MaxBackoff, each wait jittered by ±25% so that servers that lost
	// Redis together do not come back in step. 0 means Heartbeat: a
	// server then retries no more often than it heartbeats, and is back
	// in the registry within one heartbeat of Redis answering again.
	MaxBackoff time.Duration
	// Logger receives a line when the registry becomes unreachable and
	// when it is reachable again; nil is silent.
	Logger *slog.Logger
}

// Server is a game server's presence in the registry. Make one with
// Register. Drain the game server through Server.Drain rather than
// Listener.Drain, so that the registry and the backends know at once; a
// Listener drained directly is marked at the next heartbeat. The
// heartbeat goroutine runs until Close.
type Server struct {
	src  Source
	c    redis.UniversalClient
	k    keys
	cfg  ServerConfig
	info Info // fixed fields; Connected and Draining are filled per beat
	log  *slog.Logger

	draining   atomic.Bool
	beatMu     sync.Mutex    // serializes beats: the loop's and Drain's
	shards     atomic.Int32  // the region's shard count, as last learnt
	left       []string      // the shards moved from, to leave at a later beat; guarded by beatMu
	beats      atomic.Uint64 // heartbeats written
	failures   atomic.Uint64 // heartbeats that failed
	conflicts  atomic.Uint64 // heartbeats that replaced another instance's entry
	conflicted atomic.Bool   // the last heartbeat did

	now     chan struct{} // capacity 1: beat now (Drain)
	closing chan struct{}
	done    chan struct{} // closed when the heartbeat goroutine has exited
	once    sync.Once
}

// Register adds src to the registry and keeps it there with a heartbeat
// until Close. It writes the first heartbeat before it returns; if Redis
// cannot be reached it still returns the Server (the game server keeps
// serving and the heartbeat retries with backoff), with the error.
func Register(ctx context.Context, src Source, cfg ServerConfig) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("netcode/fleet: ServerConfig.Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.ID == "" {
		cfg.ID = randomHex()
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.Version == "" {
		cfg.Version = netcode.Version
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = cfg.Heartbeat
	}
	switch {
	case cfg.Heartbeat < time.Millisecond || cfg.TTL <= cfg.Heartbeat:
		return nil, fmt.Errorf("netcode/fleet: heartbeat %v and TTL %v: want 1 ms <= heartbeat < TTL", cfg.Heartbeat, cfg.TTL)
	case cfg.MaxBackoff < cfg.Heartbeat/8:
		return nil, fmt.Errorf("netcode/fleet: MaxBackoff %v below an eighth of the heartbeat %v", cfg.MaxBackoff, cfg.Heartbeat)
	}
	for _, check := range []error{checkName("id", cfg.ID), checkName("region", cfg.Region), checkTags(cfg.Tags)} {
		if check != nil {
			return nil, check
		}
	}
	addrs := slices.Clone(cfg.Addrs)
	if len(addrs) == 0 {
		ap, err := netip.ParseAddrPort(src.Addr().String())
		if err != nil || ap.Addr().IsUnspecified() || ap.Port() == 0 {
			return nil, fmt.Errorf("netcode/fleet: the Listener's address %v is not one a token can name: set ServerConfig.Addrs", src.Addr())
		}
		addrs = []string{ap.String()}
	}
	if len(addrs) > MaxCount {
		return nil, fmt.Errorf("netcode/fleet: %d addresses, at most %d", len(addrs), MaxCount)
	}
	for i, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !unicast(ap) {
			return nil, fmt.Errorf("netcode/fleet: address %q is not a unicast ip:port", a)
		}
		addrs[i] = ap.String()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		src: src,
		c:   cfg.Client,
		k:   regionKeys(cfg.Prefix, cfg.Region),
		cfg: cfg,
		info: Info{
			ID:         cfg.ID,
			Addrs:      addrs,
			ProtocolID: cfg.ProtocolID,
			Region:     cfg.Region,
			Tags:       slices.Clone(cfg.Tags),
			MaxClients: src.MaxClients(),
			Version:    cfg.Version,
			Started:    time.Now().UTC().Truncate(time.Second),
			Instance:   randomHex(),
		},
		log:     log.With("id", cfg.ID, "region", cfg.Region),
		now:     make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	rctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	n, _, err := readShards(rctx, cfg.Client, s.k)
	cancel()
	if err != nil {
		n = 1 // the first heartbeat that gets through says
	}
	s.shards.Store(int32(n))
	err = s.beat(ctx)
	go s.loop(err)
	return s, err
}

// randomHex returns 16 random hex digits.
func randomHex() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the server's id in the registry.
func (s *Server) ID() string { return s.info.ID }

// Info returns the entry the next heartbeat writes.
func (s *Server) Info() Info {
	i := s.info
	st := s.src.Stats()
	i.Connected = st.Connected
	i.Draining = s.draining.Load() || st.Draining
	return i
}

// Heartbeats returns how many heartbeats were written, and how many
// failed.
func (s *Server) Heartbeats() (written, failed uint64) { return s.beats.Load(), s.failures.Load() }

// Conflicts returns how many heartbeats found the entry written by another
// registration under the same id since this one's previous heartbeat:
// another process claims the id (a misconfigured twin, or a hostile
// writer). The first of a run is logged at WARN.
func (s *Server) Conflicts() uint64 { return s.conflicts.Load() }

// callTimeout bounds one call to Redis: up to a second (a loaded or
// failing-over Redis), but never past the TTL, when the entry is gone
// anyway.
func (s *Server) callTimeout() time.Duration {
	return min(max(s.cfg.Heartbeat, time.Second), s.cfg.TTL)
}

// key is the hash the entry is in: its shard's.
func (s *Server) key() string { return s.k.shard(shardOf(s.info.ID, int(s.shards.Load()))) }

// beat writes the entry once; if the shard's hash says the region has
// another shard count now, it moves the entry to its new shard at once,
// and removes it from the old one at the next beat: a reader reading the
// shards one after the other while the server moves finds it in one of
// them.
func (s *Server) beat(ctx context.Context) error {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	body, err := json.Marshal(s.Info())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	key := s.key()
	other, shards, err := s.write(ctx, key, body)
	if err == nil && shards == 0 && s.shards.Load() > 1 {
		// The hash holds no shard count: Redis lost it (restarted empty).
		// Put the count back, so that readers read this shard.
		err = SetShards(ctx, s.c, s.cfg.Prefix, s.cfg.Region, int(s.shards.Load()))
	}
	if err == nil && shards != 0 && shards != int(s.shards.Load()) {
		s.shards.Store(int32(shards))
		if moved := s.key(); moved != key {
			// The entry leaves key at a later beat whether or not this
			// write succeeds: the next beat writes it in its new shard
			// (key() says which) either way. Every shard moved from is
			// kept until left, so that moves in a row leave none behind.
			if !slices.Contains(s.left, key) {
				s.left = append(s.left, key)
			}
			other, _, err = s.write(ctx, moved, body)
			s.log.Info("netcode/fleet: moved to another shard", "shards", shards, "key", moved, "err", err)
		}
	} else if err == nil && len(s.left) > 0 {
		err = s.leave(ctx, key)
	}
	if err != nil {
		reloadOnFailure(s.c, err)
		s.failures.Add(1)
		return fmt.Errorf("netcode/fleet: heartbeat of %s: %w", s.info.ID, err)
	}
	// The first beat may replace the entry of this id's previous process
	// (a restart): only a later one is a conflict.
	other = other && s.beats.Load() > 0
	if other {
		s.conflicts.Add(1)
		if !s.conflicted.Load() {
			s.log.Warn("netcode/fleet: another registration wrote this server's entry: two writers claim the id", "instance", s.info.Instance)
		}
	}
	s.conflicted.Store(other)
	s.beats.Add(1)
	return nil
}

// leave removes the entry from the shards it moved from, but the one it
// is in now (key: it may have moved back), keeping those it could not
// for the next beat.
func (s *Server) leave(ctx context.Context, key string) error {
	var err error
	kept := s.left[:0]
	for _, k := range s.left {
		if k == key {
			continue
		}
		if derr := s.c.HDel(ctx, k, s.info.ID).Err(); derr != nil {
			kept = append(kept, k)
			err = cmp.Or(err, derr)
		}
	}
	s.left = kept
	return err
}

// write runs the heartbeat script on key; it reports whether the entry
// replaced was another registration's, and the shard count the hash
// holds (0 if none).
func (s *Server) write(ctx context.Context, key string, body []byte) (other bool, shards int, err error) {
	res, err := heartbeatScript.Run(ctx, s.c, []string{key},
		s.info.ID, s.cfg.TTL.Milliseconds(), body, (regionKeyTTLs * s.cfg.TTL).Milliseconds(),
		`"instance":"`+s.info.Instance+`"`).Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) != 3 {
		return false, 0, fmt.Errorf("netcode/fleet: the heartbeat script answered %d values", len(res))
	}
	other = res[1] == int64(1)
	if v, _ := res[2].(string); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= MaxShards {
			shards = n
		}
	}
	return other, shards, nil
}

// loop heartbeats until Close; failed is the first beat's error.
func (s *Server) loop(failed error) {
	defer close(s.done)
	fails := 0
	next := func(err error) time.Duration {
		if err == nil {
			if fails > 0 {
				s.log.Info("netcode/fleet: registry reachable again", "failed_heartbeats", fails)
			}
			fails = 0
			return s.cfg.Heartbeat
		}
		if fails == 0 {
			s.log.Warn("netcode/fleet: registry unreachable; the server keeps serving and retries", "err", err)
		}
		fails++
		d := (s.cfg.Heartbeat / 8) << min(fails-1, 16)
		if d > s.cfg.MaxBackoff || d <= 0 {
			d = s.cfg.MaxBackoff
		}
		// Jitter: servers that lost Redis together do not come back in step.
		return d*3/4 + rand.N(d/2+1)
	}
	t := time.NewTimer(next(failed))
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closing
		cancel()
	}()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		case <-s.now:
			t.Stop()
		}
		t.Reset(next(s.beat(ctx)))
	}
}

// Drain drains the Listener (it denies new clients from now on) and marks
// the entry draining: it writes the entry and publishes the drain on the
// region's channel before it returns. What is promised, once Drain has
// returned nil:
//   - a Chooser made afterwards, or a List, never names the server;
//   - a running Chooser, in this process or another, stops naming it when
//     the message reaches it (usually within a millisecond, but not
//     promised: Drain does not wait for the subscribers), and at the
//     latest once it has finished the first read it began after Drain
//     returned — within 2 × ChooserConfig.Refresh (500 ms by default) plus
//     one read's round trip, while Redis answers;
//   - a client whose token still names the server first is denied at once
//     and moves on to the token's next server.
//
// The heartbeat goes on, so the entry stays, draining, until Close. If
// Redis cannot be reached the Listener is drained all the same, the
// heartbeat writes the mark once Redis is back, and Drain returns the
// error.
func (s *Server) Drain(ctx context.Context) error {
	s.src.Drain()
	s.draining.Store(true)
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	err := s.beat(ctx)
	if err == nil {
		err = s.c.Publish(ctx, s.k.events, eventDrain+s.info.ID).Err()
		reloadOnFailure(s.c, err)
	}
	if err != nil {
		select {
		case s.now <- struct{}{}:
		default:
		}
	}
	return err
}

// Close stops the heartbeat and removes the entry (and tells the
// backends), so that no new token names the server. It does not close the
// Listener. If Redis cannot be reached the entry expires after the TTL.
func (s *Server) Close() error {
	first := false
	s.once.Do(func() {
		first = true
		close(s.closing)
	})
	if !first {
		return ErrClosed
	}
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout())
	defer cancel()
	s.beatMu.Lock()
	keys := append([]string{s.key()}, s.left...) // in a Cluster, other slots: a call each
	s.beatMu.Unlock()
	var err error
	for _, k := range keys {
		err = cmp.Or(err, s.c.HDel(ctx, k, s.info.ID).Err())
	}
	if err == nil {
		err = s.c.Publish(ctx, s.k.events, eventGone+s.info.ID).Err()
	}
	if err != nil {
		return fmt.Errorf("netcode/fleet: removing %s: %w", s.info.ID, err)
	}
	return nil
}
