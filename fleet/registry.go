package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// heartbeatScript writes one server's entry with its expiry in Redis's
// clock and keeps the shard's hash alive for a few TTLs. It answers
// Redis's time; 1 when the entry it replaces was written by another
// registration (another instance), 0 otherwise; and the shard count
// SetShards left in the hash ("" if none).
// KEYS[1] the region's hash; ARGV: id, ttl ms, entry JSON, hash ttl ms,
// the entry's instance marker ("instance":"…").
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = redis.call('HGET', KEYS[1], ARGV[1])
local other = 0
if old and not string.find(old, ARGV[5], 1, true) then other = 1 end
redis.call('HSET', KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {now, other, redis.call('HGET', KEYS[1], '` + shardsField + `') or ''}
`)

// shardsField is the field of a shard's hash where SetShards leaves the
// region's shard count for the servers' heartbeats to find; an id never
// begins with a brace.
const shardsField = "{shards}"

// readScript returns Redis's time in ms and the region's live entries,
// each as its field (the server id) and its value, deleting the expired
// ones. KEYS[1] the region's hash.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 1) ~= '{' then
    local exp = tonumber(string.match(all[i + 1], '^(%d+) '))
    if exp and exp > now then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    else
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
return out
`)

// readResult is what one read of a region found.
type readResult struct {
	infos []*Info
	// bad counts entries refused as malformed or out of the protocol's
	// limits; conflicts those that claim an id other than the field they
	// are stored under (another server's id).
	bad, conflicts int
	// shards is the region's shard count, and prev the count before the
	// last SetShards: every shard below the larger was read.
	shards, prev int
}

// readRegion reads a region's live entries: its shard count (one GET),
// then each shard below the larger of the count and the one before it
// (one script call each, all at once), so that a server is found whether it has moved
// to its new shard yet or not; an id found in two shards counts once, with
// the later expiry. Refused entries are counted, not returned. Expires is
// set in the local clock, from the entry's expiry relative to Redis's
// time.
func readRegion(ctx context.Context, c redis.UniversalClient, k keys) (readResult, error) {
	var rr readResult
	var err error
	if rr.shards, rr.prev, err = readShards(ctx, c, k); err != nil {
		return rr, err
	}
	// The shards at once: in a Cluster they are on several masters.
	n := max(rr.shards, rr.prev)
	parts := make([]readResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = readShard(ctx, c, k.shard(i), k.region, &parts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return rr, err
	}
	seen := map[string]int{}
	for _, p := range parts {
		rr.bad += p.bad
		rr.conflicts += p.conflicts
		for _, info := range p.infos {
			if j, dup := seen[info.ID]; dup {
				// Moving between shards: keep the fresher entry.
				if info.Expires.After(rr.infos[j].Expires) {
					rr.infos[j] = info
				}
				continue
			}
			seen[info.ID] = len(rr.infos)
			rr.infos = append(rr.infos, info)
		}
	}
	return rr, nil
}

// readShards reads a region's shard count and the count before the last
// change ("N PREV"); 1 and 1 when it was never set.
func readShards(ctx context.Context, c redis.UniversalClient, k keys) (n, prev int, err error) {
	v, err := c.Get(ctx, k.count).Result()
	if errors.Is(err, redis.Nil) {
		return 1, 1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	a, b, _ := strings.Cut(v, " ")
	n, err1 := strconv.Atoi(a)
	prev, err2 := strconv.Atoi(b)
	if err1 != nil || n < 1 || n > MaxShards {
		return 1, 1, nil // not SetShards' writing: one shard
	}
	if err2 != nil || prev < 1 || prev > MaxShards {
		prev = n
	}
	return n, prev, nil
}

// readShard reads one shard's live entries into rr.
func readShard(ctx context.Context, c redis.UniversalClient, key, region string, rr *readResult) error {
	res, err := readScript.Run(ctx, c, []string{key}).Slice()
	if err != nil {
		return err
	}
	local := time.Now()
	if len(res)%2 != 1 {
		return fmt.Errorf("netcode/fleet: the read script answered %d values", len(res))
	}
	now, ok := res[0].(int64)
	if !ok {
		return fmt.Errorf("netcode/fleet: read script answered %T for the time", res[0])
	}
	for i := 1; i < len(res); i += 2 {
		field, _ := res[i].(string)
		s, _ := res[i+1].(string)
		info, ok := parseEntry(s, now, local)
		switch {
		case !ok || info.Region != region:
			rr.bad++
		case info.ID != field:
			rr.conflicts++
		default:
			rr.infos = append(rr.infos, info)
		}
	}
	return nil
}

// SetShards splits a region's registry into n hash-tagged shards (1 to
// MaxShards), each server in shard FNV-1a(id) mod n, so that in a Cluster
// a large region spreads over several masters and no one hash holds it
// all. Choosers and List read every shard; a running server moves to its
// new shard at its next heartbeat, and until it has, readers read the old
// shards too, so that no server goes missing. Run it again with the same
// n once a TTL has passed to stop reading the old shards after a
// reduction. prefix "" means DefaultPrefix.
func SetShards(ctx context.Context, c redis.UniversalClient, prefix, region string, n int) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := checkName("region", region); err != nil {
		return err
	}
	if n < 1 || n > MaxShards {
		return fmt.Errorf("netcode/fleet: %d shards: want 1 to %d", n, MaxShards)
	}
	k := regionKeys(prefix, region)
	old, _, err := readShards(ctx, c, k)
	if err != nil {
		return err
	}
	// The count first, so that readers read every shard before any server
	// moves; then the mark in every shard that servers write to now or
	// will.
	if err := c.Set(ctx, k.count, fmt.Sprintf("%d %d", n, old), 0).Err(); err != nil {
		return err
	}
	for i := range max(n, old) {
		if err := setShardsScript.Run(ctx, c, []string{k.shard(i)}, n, (regionKeyTTLs * DefaultTTL).Milliseconds()).Err(); err != nil {
			return err
		}
	}
	return nil
}

// setShardsScript leaves the shard count in a shard's hash, keeping (or
// giving) the hash a TTL. KEYS[1] the shard; ARGV: count, hash ttl ms.
var setShardsScript = redis.NewScript(`
redis.call('HSET', KEYS[1], '` + shardsField + `', ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`)

// ReadShards returns a region's shard count (SetShards; 1 if never set)
// and the count before the last change. prefix "" means DefaultPrefix.
func ReadShards(ctx context.Context, c redis.UniversalClient, prefix, region string) (n, prev int, err error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := checkName("region", region); err != nil {
		return 0, 0, err
	}
	return readShards(ctx, c, regionKeys(prefix, region))
}

// reloadOnFailure asks a Cluster client to reread the slot map after a
// call failed: go-redis otherwise keeps sending a failed master's slots to
// it until a MOVED or its ClusterStateReloadInterval (60 s by default),
// long after a replica took over. The reload runs in the background and
// go-redis coalesces them (one per 200 ms at most).
func reloadOnFailure(c redis.UniversalClient, err error) {
	if cc, ok := c.(*redis.ClusterClient); ok && err != nil && !errors.Is(err, redis.Nil) {
		cc.ReloadState(context.Background())
	}
}

// maxEntry bounds an entry's size: far above what Register writes (32
// addresses and 32 tags of 64 bytes), far below what would hurt.
const maxEntry = 16 << 10

// MaxMaxClients is the most client slots an entry may claim: a netcode
// server's limit (netcode.ServerConfig.MaxClients). A larger claim is
// clamped to it.
const MaxMaxClients = 1 << 16

// parseEntry decodes a hash value, "EXPIRY_MS JSON", read when Redis's
// clock said nowMS and the local clock local. It refuses an oversized or
// malformed entry, an invalid id, region or tag, an expiry before nowMS,
// negative slot counts, and addresses that Register would not write: more
// than MaxCount, or any that is not a unicast ip:port. It clamps
// MaxClients to MaxMaxClients and Connected to MaxClients, and drops
// repeated addresses.
func parseEntry(s string, nowMS int64, local time.Time) (*Info, bool) {
	if len(s) > maxEntry {
		return nil, false
	}
	exp, body, ok := strings.Cut(s, " ")
	ms, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || ms < nowMS {
		return nil, false
	}
	info := new(Info)
	if json.Unmarshal([]byte(body), info) != nil || checkName("id", info.ID) != nil || checkName("region", info.Region) != nil ||
		checkTags(info.Tags) != nil || info.MaxClients < 0 || info.Connected < 0 || len(info.Addrs) == 0 || len(info.Addrs) > MaxCount {
		return nil, false
	}
	addrs := info.Addrs[:0]
	for _, a := range info.Addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !unicast(ap) {
			return nil, false
		}
		if a = ap.String(); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	info.Addrs = addrs
	info.MaxClients = min(info.MaxClients, MaxMaxClients)
	info.Connected = min(info.Connected, info.MaxClients)
	d := time.Duration(min(ms-nowMS, int64(24*time.Hour/time.Millisecond))) * time.Millisecond
	info.Expires = local.Add(d)
	return info, true
}

// unicast reports whether a token may name ap: a port, and a unicast
// address without a zone (not unspecified, multicast or IPv4's
// broadcast).
func unicast(ap netip.AddrPort) bool {
	a := ap.Addr()
	return ap.Port() != 0 && a.IsValid() && a.Zone() == "" && !a.IsUnspecified() && !a.IsMulticast() &&
		a.Unmap() != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// List reads the live entries of a region from Redis (prefix "" means
// DefaultPrefix), sorted by id: what `netcode fleet` prints.
func List(ctx context.Context, c redis.UniversalClient, prefix, region string) ([]*Info, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := checkName("region", region); err != nil {
		return nil, err
	}
	rr, err := readRegion(ctx, c, regionKeys(prefix, region))
	if err != nil {
		return nil, err
	}
	infos := rr.infos
	slices.SortFunc(infos, func(a, b *Info) int { return strings.Compare(a.ID, b.ID) })
	return infos, nil
}

// Regions lists the regions that have a registry hash under prefix (""
// means DefaultPrefix), sorted. It scans the keyspace (every master of a
// Cluster): for tools such as `netcode fleet`, not for a request path.
func Regions(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	pattern := prefix + ":{*}:servers"
	var mu sync.Mutex // ForEachMaster scans the masters at once
	found := map[string]bool{}
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		it := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			k := strings.TrimPrefix(it.Val(), prefix+":{")
			r, ok := strings.CutSuffix(k, "}:servers")
			r, _, _ = strings.Cut(r, ",") // a shard's "{R,i}"
			if ok && checkName("region", r) == nil {
				mu.Lock()
				found[r] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	regions := make([]string, 0, len(found))
	for r := range found {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	return regions, nil
}

// NewClient makes a Redis client from a URL:
//
//	redis://[user:password@]host:port[/db]    a single node (rediss:// for TLS)
//	unix:///path/to/redis.sock                a single node on a Unix socket
//	redis://host:port?addr=host2:port2&...    a Cluster: every addr is a seed node
//	redis+sentinel://host:port,host2:port2/MASTER[?password=...]
//	                                         Sentinel: the sentinels and the master's name
//
// The client honours its calls' context deadlines on the socket
// (go-redis's ContextTimeoutEnabled), which the package's timeouts rely on:
// a client made otherwise waits out its ReadTimeout (3 s) on a Redis that
// accepts and does not answer. Close the client when done.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("netcode/fleet: registry URL: %w", err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Query().Has("addr") {
			o, err := redis.ParseClusterURL(rawURL)
			if err != nil {
				return nil, fmt.Errorf("netcode/fleet: registry URL: %w", err)
			}
			o.ContextTimeoutEnabled = true
			return redis.NewClusterClient(o), nil
		}
		fallthrough
	case "unix":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("netcode/fleet: registry URL: %w", err)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case "redis+sentinel":
		master := strings.Trim(u.Path, "/")
		if u.Host == "" || master == "" {
			return nil, errors.New("netcode/fleet: registry URL: redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER")
		}
		o := &redis.FailoverOptions{
			MasterName:    master,
			SentinelAddrs: strings.Split(u.Host, ","),
			Password:      u.Query().Get("password"),

			ContextTimeoutEnabled: true,
		}
		if u.User != nil {
			o.Username = u.User.Username()
			if p, ok := u.User.Password(); ok {
				o.Password = p
			}
		}
		return redis.NewFailoverClient(o), nil
	}
	return nil, fmt.Errorf("netcode/fleet: registry URL %q: want redis://, rediss://, unix:// or redis+sentinel://", rawURL)
}
