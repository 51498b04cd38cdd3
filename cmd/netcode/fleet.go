package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gonetcode/netcode/fleet"
)

// registryFlags are serve's flags for the fleet registry.
type registryFlags struct {
	url, region, tags, id string
}

func addRegistryFlags(fs *flagSet) *registryFlags {
	f := &registryFlags{}
	fs.StringVar(&f.url, "registry", "", "register this server in the fleet registry at this Redis URL (redis://HOST:PORT[/DB], rediss://, redis+sentinel://HOST:PORT/MASTER, or redis://HOST:PORT?addr=HOST2:PORT2 for a Cluster), so that token backends name it; off if empty")
	fs.StringVar(&f.region, "region", fleet.DefaultRegion, "with -registry: the region backends choose this server by")
	fs.StringVar(&f.tags, "tags", "", "with -registry: comma-separated tags backends may ask for (ranked,map=dust)")
	fs.StringVar(&f.id, "id", "", "with -registry: this server's id in the registry (default: random)")
	return f
}

// registration is a server's presence in the registry, with its client.
type registration struct {
	rdb redis.UniversalClient
	srv *fleet.Server
	log *slog.Logger
}

// register adds l (a *netcode.Listener, or a Cute one through
// fleet.CuteSource) to the registry the flags name; nil without
// -registry. Redis being unreachable is not an error: the server serves,
// and the heartbeat registers it once Redis answers.
func (f *registryFlags) register(ctx context.Context, l fleet.Source, proto uint64, public string, log *slog.Logger) (*registration, error) {
	if f.url == "" {
		return nil, nil
	}
	tags, err := fleet.ParseTags(f.tags)
	if err != nil {
		return nil, err
	}
	rdb, err := fleet.NewClient(f.url)
	if err != nil {
		return nil, err
	}
	quietRedis(log)
	cfg := fleet.ServerConfig{Client: rdb, ID: f.id, ProtocolID: proto, Region: f.region, Tags: tags, Logger: log}
	if public != "" {
		cfg.Addrs = []string{public}
	}
	srv, err := fleet.Register(ctx, l, cfg)
	if srv == nil {
		rdb.Close()
		return nil, err
	}
	if err != nil {
		log.Warn("registry unreachable; serving anyway, and registering once it answers", "registry", redactURL(f.url), "id", srv.ID(), "region", f.region, "err", err)
	} else {
		log.Info("registered in the fleet", "registry", redactURL(f.url), "id", srv.ID(), "region", f.region, "tags", f.tags)
	}
	return &registration{rdb: rdb, srv: srv, log: log}, nil
}

// drain marks the server draining in the registry (and drains the
// Listener); without a registration it drains l, either dialect's.
func (r *registration) drain(l interface{ Drain() }) {
	if r == nil {
		l.Drain()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.srv.Drain(ctx); err != nil {
		r.log.Warn("could not mark the server draining in the registry; backends drop it when its entry expires", "err", err)
	}
}

// close removes the server from the registry. Redis being unreachable is
// not an error of the server's: the entry expires after its TTL, which
// the warning says.
func (r *registration) close() error {
	if r == nil {
		return nil
	}
	if err := r.srv.Close(); err != nil {
		r.log.Warn("could not remove the server from the registry; its entry expires within the TTL", "ttl", fleet.DefaultTTL, "err", err)
	}
	return r.rdb.Close()
}

// quietRedis sends go-redis's own log lines (each failed dial, while Redis
// is down) to log at debug level instead of stderr: the fleet package
// says once at Warn level that the registry is unreachable. go-redis's
// logger is a global its pools' goroutines read unlocked, and a client's
// dials may outlive its Close: it is set once per process, and each run
// only swaps the slog.Logger it forwards to (the tests run the command
// several times in one process).
func quietRedis(log *slog.Logger) {
	redisLog.Store(log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

var (
	redisLog     atomic.Pointer[slog.Logger] // where go-redis's lines go
	redisLogOnce sync.Once
)

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if log := redisLog.Load(); log != nil && log.Enabled(ctx, slog.LevelDebug) {
		log.DebugContext(ctx, fmt.Sprintf(format, v...))
	}
}

// redactURL hides a password in a Redis URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return u
	}
	if name, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + name + ":xxxxx@" + host
	}
	return u
}

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "bench" {
		return runFleetBench(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("fleet", "-registry URL [-region R[,R...]] [-shards N]\n       netcode fleet bench -registry URL [flags]\n\nLists the game servers registered in the fleet registry (netcode serve -registry)\nas a table, one line per server, least loaded first in each region. With\n-shards N it splits the one -region into N shards first (fleet.SetShards).\nfleet bench measures a simulated fleet: netcode fleet bench -h.", stdout, stderr)
	url := fs.String("registry", "", "Redis URL of the fleet registry (required)")
	regions := fs.String("region", "", "comma-separated regions to list (default: every region found)")
	prefix := fs.String("prefix", fleet.DefaultPrefix, "key prefix of the registry")
	shards := fs.Int("shards", 0, "split the -region (one) into this many shards first; servers move at their next heartbeat (0: leave as is)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *shards != 0 && (*regions == "" || strings.Contains(*regions, ",")) {
		return errors.New("-shards needs one -region")
	}
	if *url == "" {
		return errors.New("-registry is required: the Redis URL of the fleet registry (redis://host:6379/0), as netcode serve -registry was given")
	}
	rdb, err := fleet.NewClient(*url)
	if err != nil {
		return err
	}
	defer rdb.Close()
	quietRedis(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *shards != 0 {
		if err := fleet.SetShards(ctx, rdb, *prefix, *regions, *shards); err != nil {
			return fmt.Errorf("setting %d shards of region %s in %s: %w", *shards, *regions, redactURL(*url), err)
		}
	}
	var names []string
	if *regions != "" {
		names = strings.Split(*regions, ",")
	} else if names, err = fleet.Regions(ctx, rdb, *prefix); err != nil {
		return fmt.Errorf("listing regions in %s: %w", redactURL(*url), err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tID\tADDRESSES\tPROTOCOL\tCLIENTS\tSTATE\tVERSION\tTAGS\tEXPIRES IN")
	servers, clients, slots, draining := 0, 0, 0, 0
	now := time.Now()
	for _, r := range names {
		infos, err := fleet.List(ctx, rdb, *prefix, strings.TrimSpace(r))
		if err != nil {
			return fmt.Errorf("reading region %s from %s: %w", r, redactURL(*url), err)
		}
		sortByLoad(infos)
		for _, i := range infos {
			state := "ready"
			switch {
			case i.Draining:
				state = "draining"
				draining++
			case i.Free() == 0:
				state = "full"
			}
			servers++
			clients += i.Connected
			slots += i.MaxClients
			fmt.Fprintf(tw, "%s\t%s\t%s\t%#x\t%d/%d\t%s\t%s\t%s\t%v\n", i.Region, i.ID, strings.Join(i.Addrs, ","), i.ProtocolID,
				i.Connected, i.MaxClients, state, i.Version, strings.Join(i.Tags, ","), i.Expires.Sub(now).Round(100*time.Millisecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s in %s, %d of %d slots taken, %d draining\n", plural(servers, "server"), plural(len(names), "region"), clients, slots, draining)
	return nil
}

// plural says "1 server", "2 servers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sortByLoad orders servers as a backend prefers them: least loaded
// first, draining ones last.
func sortByLoad(infos []*fleet.Info) {
	key := func(i *fleet.Info) float64 {
		if i.Draining || i.MaxClients <= 0 {
			return 2
		}
		return float64(i.Connected) / float64(i.MaxClients)
	}
	slices.SortStableFunc(infos, func(a, b *fleet.Info) int { return cmp.Compare(key(a), key(b)) })
}
