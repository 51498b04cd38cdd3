package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// heartbeatScript writes one server's entry with its expiry in Redis's
// clock and keeps the region's hash alive for a few TTLs.
// KEYS[1] the region's hash; ARGV: id, ttl ms, entry JSON, hash ttl ms.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return now
`)

// readScript returns Redis's time in ms and the region's live entries,
// deleting the expired ones. KEYS[1] the region's hash.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  local exp = tonumber(string.match(all[i + 1], '^(%d+) '))
  if exp and exp > now then
    out[#out + 1] = all[i + 1]
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return out
`)

// readRegion reads a region's live entries: one script call, one round
// trip. Malformed entries are skipped (counted in bad). Expires is set in
// the local clock, from the entry's expiry relative to Redis's time.
func readRegion(ctx context.Context, c redis.UniversalClient, k keys) (infos []*Info, bad int, err error) {
	res, err := readScript.Run(ctx, c, []string{k.servers}).Slice()
	if err != nil {
		return nil, 0, err
	}
	local := time.Now()
	if len(res) == 0 {
		return nil, 0, errors.New("netcode/fleet: empty answer from the read script")
	}
	now, ok := res[0].(int64)
	if !ok {
		return nil, 0, fmt.Errorf("netcode/fleet: read script answered %T for the time", res[0])
	}
	infos = make([]*Info, 0, len(res)-1)
	for _, v := range res[1:] {
		s, _ := v.(string)
		info, ok := parseEntry(s, now, local)
		if !ok {
			bad++
			continue
		}
		infos = append(infos, info)
	}
	return infos, bad, nil
}

// maxEntry bounds an entry's size: far above what Register writes (32
// addresses and 32 tags of 64 bytes), far below what would hurt.
const maxEntry = 16 << 10

// parseEntry decodes a hash value, "EXPIRY_MS JSON", read when Redis's
// clock said nowMS and the local clock local. It refuses an oversized or
// malformed entry, an invalid id or region, and an expiry before nowMS.
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
		info.MaxClients < 0 || info.Connected < 0 {
		return nil, false
	}
	d := time.Duration(min(ms-nowMS, int64(24*time.Hour/time.Millisecond))) * time.Millisecond
	info.Expires = local.Add(d)
	return info, true
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
	infos, _, err := readRegion(ctx, c, regionKeys(prefix, region))
	if err != nil {
		return nil, err
	}
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
	found := map[string]bool{}
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		it := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			k := strings.TrimPrefix(it.Val(), prefix+":{")
			if r, ok := strings.CutSuffix(k, "}:servers"); ok && checkName("region", r) == nil {
				found[r] = true
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
// Close the client when done.
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
			return redis.NewClusterClient(o), nil
		}
		fallthrough
	case "unix":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("netcode/fleet: registry URL: %w", err)
		}
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
