package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gonetcode/netcode/backend"
)

// Query is what a token asks of its servers.
type Query struct {
	// Region is the region to choose in; "" means the Chooser's first
	// region.
	Region string
	// Tags are tags every chosen server must have.
	Tags []string
	// Count is how many servers to name, at most 32; 0 means
	// ChooserConfig.Count.
	Count int
}

// ChooserConfig configures a Chooser.
type ChooserConfig struct {
	// Client is the registry; required.
	Client redis.UniversalClient
	// Prefix begins the keys; "" means DefaultPrefix.
	Prefix string
	// ProtocolID is the game's protocol id: only servers with it are
	// named.
	ProtocolID uint64
	// Regions are the regions the Chooser reads and chooses in; empty
	// means DefaultRegion alone. A query for another region finds no
	// server.
	Regions []string
	// Count is how many servers a token names, 1 to 32, tried by the
	// client in order; 0 means DefaultCount.
	Count int
	// Refresh is how often every region is reread (one script call per
	// region); 0 means DefaultRefresh. Drains and departures arrive over
	// pub/sub at once; Refresh bounds how stale a load figure, a new
	// server or an expiry is.
	Refresh time.Duration
	// Grace is how long the Chooser keeps choosing from the last entries
	// it read when Redis cannot be reached; after it, ChooseServers
	// answers backend.ErrNoServers (503 with Retry-After) until a read
	// succeeds. 0 means DefaultGrace; a negative value means 2 × Refresh.
	Grace time.Duration
	// Query maps a token request to its query (a region from the user's
	// profile, tags from a match request); nil asks every token for
	// Count servers of the first region, with no tags. An error is
	// answered as the backend answers ChooseServers' errors.
	Query func(r *http.Request, id backend.Identity) (Query, error)
	// Logger receives a line when the registry becomes unreachable and
	// when it is reachable again; nil is silent.
	Logger *slog.Logger
}

// ChooserStats are a Chooser's counters.
type ChooserStats struct {
	// Servers is the number of live entries in its regions, as last read.
	Servers int
	// Reads counts region reads; ReadErrors the reads that failed.
	Reads, ReadErrors uint64
	// Events counts drain and departure messages received.
	Events uint64
	// Choices counts queries answered with servers; NoServers the queries
	// that found none (or hit the end of the grace period).
	Choices, NoServers uint64
	// Refused counts entries skipped by the reads as malformed or outside
	// the protocol's limits (see the package's trust boundary); Conflicts
	// the entries that claimed another server's id, and the ids seen
	// switching back to an earlier registration (two writers of one id).
	// Each read counts again what it skips.
	Refused, Conflicts uint64
	// Stale is how long ago the oldest region was last read successfully
	// (or the Chooser made, for a region never read).
	Stale time.Duration
}

// Chooser names servers from the registry for backend.Config's
// ChooseServers. Make one with NewChooser; it owns two goroutines (the
// reader and the pub/sub listener) until Close.
type Chooser struct {
	c       redis.UniversalClient
	cfg     ChooserConfig
	log     *slog.Logger
	regions map[string]*region // fixed after NewChooser
	created time.Time

	reads, readErrors, events, choices, noServers, refused, conflicts atomic.Uint64

	closing chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// region is one region's copy of the registry.
type region struct {
	name string
	k    keys
	snap atomic.Pointer[snapshot]

	mu     sync.Mutex             // guards recent; never held while calling Redis
	recent map[string]regionEvent // drain and gone messages of the last few reads, by id
}

// regionEvent is a drain or gone message, kept so that a read begun
// before it and installed after it does not undo it.
type regionEvent struct {
	gone bool
	at   time.Time
}

// snapshot is a region's entries as read at one time.
type snapshot struct {
	at      time.Time // when the read began (local clock)
	servers []*entry
	byID    map[string]*entry
}

// entry is a server in a snapshot, with what is learned between reads.
type entry struct {
	Info
	addrs []netip.AddrPort
	// capacity is MaxClients clamped to the region's median: what the
	// load is a fraction of, so that no entry ranks first by claiming
	// more slots than its peers.
	capacity int
	// prevInstance is the registration this id had before Instance, to
	// notice two writers taking turns.
	prevInstance string
	pending      atomic.Int32 // tokens that named it first, not yet seen in Connected
	draining     atomic.Bool  // a drain message arrived, or the entry said so
	gone         atomic.Bool  // a gone message arrived
}

// pendingWindow is how long a token that named a server first counts
// against it when the server's own Connected does not show the client: it
// is forgotten linearly over the window. A client connects within a
// second or two of its token, and the server's next heartbeat shows it.
// An entry that never reports its clients (one that lies that it is
// empty) thus fills up on its own tokens, and is named first at most as
// often as a server of the region's median capacity could take clients
// in each window.
const pendingWindow = 5 * time.Second

// NewChooser checks cfg, reads every region once (an error there is
// returned with a working Chooser: it answers ErrNoServers until a read
// succeeds) and starts the background reads.
func NewChooser(ctx context.Context, cfg ChooserConfig) (*Chooser, error) {
	if cfg.Client == nil {
		return nil, errors.New("netcode/fleet: ChooserConfig.Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if len(cfg.Regions) == 0 {
		cfg.Regions = []string{DefaultRegion}
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Count < 1 || cfg.Count > MaxCount {
		return nil, fmt.Errorf("netcode/fleet: Count %d: want 1 to %d", cfg.Count, MaxCount)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Refresh < time.Millisecond {
		return nil, fmt.Errorf("netcode/fleet: Refresh %v below 1 ms", cfg.Refresh)
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Grace < 0 {
		cfg.Grace = 2 * cfg.Refresh
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ch := &Chooser{c: cfg.Client, cfg: cfg, log: log, regions: map[string]*region{}, created: time.Now(), closing: make(chan struct{})}
	var channels, names []string
	for _, name := range cfg.Regions {
		if err := checkName("region", name); err != nil {
			return nil, err
		}
		if ch.regions[name] != nil {
			continue
		}
		names = append(names, name)
		rg := &region{name: name, k: regionKeys(cfg.Prefix, name), recent: map[string]regionEvent{}}
		rg.snap.Store(&snapshot{})
		ch.regions[name] = rg
		channels = append(channels, rg.k.events)
	}
	ch.cfg.Regions = names
	// Subscribe before the first read. A drain published before the
	// subscription takes effect is in the entry the next read brings.
	ps := cfg.Client.Subscribe(context.Background(), channels...)
	err := ch.readAll(ctx)
	ch.wg.Add(2)
	go ch.listen(ps)
	go ch.readLoop(err != nil)
	return ch, err
}

// Close stops the Chooser's goroutines. Choose then answers ErrClosed.
func (ch *Chooser) Close() error {
	first := false
	ch.once.Do(func() {
		first = true
		close(ch.closing)
	})
	ch.wg.Wait()
	if !first {
		return ErrClosed
	}
	return nil
}

// readAll reads every region once; the error is the first failure.
func (ch *Chooser) readAll(ctx context.Context) error {
	var first error
	for _, name := range ch.cfg.Regions {
		rg := ch.regions[name]
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, max(ch.cfg.Refresh, time.Second))
		rr, err := readRegion(rctx, ch.c, rg.k)
		cancel()
		ch.reads.Add(1)
		if err != nil {
			reloadOnFailure(ch.c, err)
			ch.readErrors.Add(1)
			if first == nil {
				first = fmt.Errorf("netcode/fleet: reading region %s: %w", name, err)
			}
			continue
		}
		ch.refused.Add(uint64(rr.bad))
		flips := rg.install(start, rr.infos, ch.cfg.Refresh)
		if c := rr.conflicts + flips; c > 0 {
			if ch.conflicts.Add(uint64(c)) == uint64(c) {
				ch.log.Warn("netcode/fleet: registry entries claim another server's id: two writers of one id (counted in ChooserStats.Conflicts)", "region", name, "conflicts", c)
			}
		}
	}
	return first
}

// readLoop rereads the regions every Refresh until Close.
func (ch *Chooser) readLoop(failing bool) {
	defer ch.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ch.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(ch.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ch.closing:
			return
		case <-t.C:
		}
		err := ch.readAll(ctx)
		switch {
		case err != nil && !failing:
			ch.log.Warn("netcode/fleet: registry unreachable; choosing from the last entries read for the grace period", "grace", ch.cfg.Grace, "err", err)
		case err == nil && failing:
			ch.log.Info("netcode/fleet: registry reachable again")
		}
		failing = err != nil
	}
}

// listen applies drain and gone messages until Close. go-redis
// resubscribes by itself after a lost connection.
func (ch *Chooser) listen(ps *redis.PubSub) {
	defer ch.wg.Done()
	defer ps.Close()
	msgs := ps.Channel()
	for {
		select {
		case <-ch.closing:
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			ch.events.Add(1)
			for _, rg := range ch.regions {
				if rg.k.events == m.Channel {
					rg.event(m.Payload)
				}
			}
		}
	}
}

// event applies one message to the region's snapshot and remembers it.
func (rg *region) event(payload string) {
	var ev regionEvent
	id, ok := strings.CutPrefix(payload, eventDrain)
	if !ok {
		if id, ok = strings.CutPrefix(payload, eventGone); !ok {
			return
		}
		ev.gone = true
	}
	ev.at = time.Now()
	rg.mu.Lock()
	rg.recent[id] = ev
	rg.mu.Unlock()
	if e := rg.snap.Load().byID[id]; e != nil {
		e.apply(ev)
	}
}

func (e *entry) apply(ev regionEvent) {
	if ev.gone {
		e.gone.Store(true)
	} else {
		e.draining.Store(true)
	}
}

// install replaces the region's snapshot with entries read from start on,
// reapplying the messages that arrived since start, carrying each
// server's pending tokens over (less the clients its Connected gained,
// less their age's share of pendingWindow) and clamping capacities to the
// region's median. It returns how many ids went back to an earlier
// registration since the last read (two writers taking turns).
func (rg *region) install(start time.Time, infos []*Info, refresh time.Duration) (flips int) {
	old := rg.snap.Load()
	s := &snapshot{at: start, servers: make([]*entry, 0, len(infos)), byID: make(map[string]*entry, len(infos))}
	caps := make([]int, 0, len(infos))
	for _, info := range infos {
		e := &entry{Info: *info}
		for _, a := range info.Addrs {
			if ap, err := netip.ParseAddrPort(a); err == nil {
				e.addrs = append(e.addrs, ap)
			}
		}
		if len(e.addrs) == 0 || s.byID[info.ID] != nil {
			continue
		}
		e.draining.Store(info.Draining)
		if o := old.byID[info.ID]; o != nil {
			e.carry(o, start.Sub(old.at))
			if e.Instance != o.Instance && e.Instance == o.prevInstance {
				flips++
			}
		}
		s.servers = append(s.servers, e)
		s.byID[info.ID] = e
		if e.MaxClients > 0 {
			caps = append(caps, e.MaxClients)
		}
	}
	// The lower median: one entry, however large its claim, cannot move it
	// past an honest peer's.
	if len(caps) > 0 {
		slices.Sort(caps)
		median := caps[(len(caps)-1)/2]
		for _, e := range s.servers {
			e.capacity = min(e.MaxClients, median)
		}
	}
	rg.mu.Lock()
	for id, ev := range rg.recent {
		switch {
		case ev.at.Before(start.Add(-4 * refresh)):
			delete(rg.recent, id) // every read since has seen it
		case !ev.at.Before(start.Add(-refresh)):
			// It may have crossed this read: keep applying it. A gone
			// server that heartbeats again (a restart with the same id)
			// is seen as live at the next read after that.
			if e := s.byID[id]; e != nil {
				e.apply(ev)
			}
		}
	}
	rg.snap.Store(s)
	rg.mu.Unlock()
	return flips
}

// carry takes over what the previous read's entry o of the same id knew,
// age before this read: its pending tokens, less the clients Connected
// gained and the share of pendingWindow that passed (at least one), when
// it is the same registration; the registration before, when not.
func (e *entry) carry(o *entry, age time.Duration) {
	if e.Instance != o.Instance {
		e.prevInstance = o.Instance
		return
	}
	e.prevInstance = o.prevInstance
	p := int64(o.pending.Load()) - int64(max(e.Connected-o.Connected, 0))
	if p <= 0 {
		return
	}
	p -= max(1, p*int64(age)/int64(pendingWindow))
	if p > 0 {
		e.pending.Store(int32(min(p, MaxMaxClients)))
	}
}

// ChooseServers is backend.Config's ChooseServers: it maps the request to
// a Query (ChooserConfig.Query) and chooses.
func (ch *Chooser) ChooseServers(r *http.Request, id backend.Identity) ([]backend.Server, error) {
	var q Query
	if ch.cfg.Query != nil {
		var err error
		if q, err = ch.cfg.Query(r, id); err != nil {
			return nil, err
		}
	}
	return ch.Choose(q)
}

// Choose names up to q.Count servers of q.Region with the protocol id and
// q.Tags, not draining and with a free slot, least loaded first, ties
// broken at random: each server's addresses, in order, as many as fit in a
// token. It answers an error wrapping backend.ErrNoServers when none fits,
// or when the registry has been unreachable for longer than the grace
// period. It makes no Redis call.
func (ch *Chooser) Choose(q Query) ([]backend.Server, error) {
	select {
	case <-ch.closing:
		return nil, ErrClosed
	default:
	}
	if q.Region == "" {
		q.Region = ch.cfg.Regions[0]
	}
	if q.Count == 0 {
		q.Count = ch.cfg.Count
	}
	if q.Count < 0 || q.Count > MaxCount {
		return nil, fmt.Errorf("netcode/fleet: Query.Count %d: want 1 to %d", q.Count, MaxCount)
	}
	rg := ch.regions[q.Region]
	if rg == nil {
		ch.noServers.Add(1)
		return nil, fmt.Errorf("%w: region %q is not among the Chooser's regions", backend.ErrNoServers, q.Region)
	}
	s := rg.snap.Load()
	if age := time.Since(s.at); age > ch.cfg.Grace {
		ch.noServers.Add(1)
		if s.at.IsZero() {
			return nil, fmt.Errorf("%w: region %s not read from the registry yet", backend.ErrNoServers, q.Region)
		}
		return nil, fmt.Errorf("%w: region %s last read from the registry %v ago, past the grace period", backend.ErrNoServers, q.Region, age.Round(time.Millisecond))
	}
	var buf [MaxCount]*entry
	best := choose(buf[:0], s.servers, ch.cfg.ProtocolID, q.Tags, q.Count)
	if len(best) == 0 {
		ch.noServers.Add(1)
		return nil, fmt.Errorf("%w: no server in region %s with a free slot", backend.ErrNoServers, q.Region)
	}
	ch.choices.Add(1)
	// The client lands on the first server it reaches: count it there
	// until the server's own figure shows it.
	if best[0].pending.Load() < MaxMaxClients {
		best[0].pending.Add(1)
	}
	return addrsOf(best), nil
}

// addrsOf lists the addresses of the chosen servers, in order, each
// server's in its own order, as many as fit in a token: each server gets
// an equal share of the token's MaxCount slots (at least one), so that no
// entry's long list crowds the others out; slots a server leaves unused
// go to the servers after it.
func addrsOf(best []*entry) []backend.Server {
	out := make([]backend.Server, 0, MaxCount)
	for i, e := range best {
		share := max((MaxCount-len(out))/(len(best)-i), 1)
		for _, a := range e.addrs[:min(len(e.addrs), share)] {
			if len(out) == MaxCount {
				return out
			}
			out = append(out, backend.Server{Addr: a})
		}
	}
	return out
}

// choose appends to best (empty, with capacity for count) the count
// least-loaded servers that qualify, least loaded first. Load is the
// share of the clamped capacity taken, counting the tokens named first
// and not yet seen in Connected;
// equal loads are ordered at random. One pass, O(len(servers) × count) at
// worst, with no allocation.
func choose(best, servers []*entry, protocolID uint64, tags []string, count int) []*entry {
	var keys [MaxCount]struct {
		load float64
		tie  uint64
	}
	for _, e := range servers {
		if e.ProtocolID != protocolID || e.MaxClients <= 0 || e.draining.Load() || e.gone.Load() || !e.HasTags(tags) {
			continue
		}
		taken := e.Connected + int(e.pending.Load())
		if taken >= e.MaxClients {
			continue
		}
		load := float64(taken) / float64(max(e.capacity, 1))
		tie := rand.Uint64()
		// Find e's place among the best so far, from the end.
		i := len(best)
		for i > 0 && (keys[i-1].load > load || keys[i-1].load == load && keys[i-1].tie > tie) {
			i--
		}
		if i >= count {
			continue
		}
		if len(best) < count {
			best = append(best, nil)
		}
		copy(best[i+1:], best[i:len(best)-1])
		copy(keys[i+1:len(best)], keys[i:len(best)-1])
		best[i] = e
		keys[i].load, keys[i].tie = load, tie
	}
	return best
}

// Servers returns the entries of a region as last read, with what the
// Chooser learned since (drains; departures are left out), in the order
// read.
func (ch *Chooser) Servers(region string) []Info {
	rg := ch.regions[region]
	if rg == nil {
		return nil
	}
	s := rg.snap.Load()
	out := make([]Info, 0, len(s.servers))
	for _, e := range s.servers {
		if e.gone.Load() {
			continue
		}
		i := e.Info
		i.Draining = e.draining.Load()
		out = append(out, i)
	}
	return out
}

// Stats returns the Chooser's counters.
func (ch *Chooser) Stats() ChooserStats {
	st := ChooserStats{
		Reads:      ch.reads.Load(),
		ReadErrors: ch.readErrors.Load(),
		Events:     ch.events.Load(),
		Choices:    ch.choices.Load(),
		NoServers:  ch.noServers.Load(),
		Refused:    ch.refused.Load(),
		Conflicts:  ch.conflicts.Load(),
	}
	now := time.Now()
	for _, rg := range ch.regions {
		s := rg.snap.Load()
		st.Servers += len(s.servers)
		at := s.at
		if at.IsZero() {
			at = ch.created // never read
		}
		if age := now.Sub(at); age > st.Stale {
			st.Stale = age
		}
	}
	return st
}
