// Package fleet keeps a registry of netcode game servers in Redis, so that
// any number of token backends can name the right servers in each connect
// token, and limits each player's token rate across every backend replica.
//
// A game server registers its Listener (Register): a heartbeat writes its
// entry — id, the addresses tokens name, protocol id, region, tags, slots,
// clients connected, draining, version — about once a second under a short
// TTL. Server.Drain marks it draining at once (and drains the Listener);
// Server.Close removes it; a server that dies without a word expires after
// the TTL.
//
// A token backend makes a Chooser and sets backend.Config.ChooseServers to
// its ChooseServers method. The Chooser keeps a copy of its regions'
// entries, refreshed in the background (one Redis call per region per
// refresh) and told at once of drains and departures over Redis pub/sub,
// so choosing costs no Redis round trip: each token names up to Count
// servers (at most 32) of the asked region that have the protocol id and
// every asked tag, are not draining and have a free slot, least loaded
// first, ties broken at random so that replicas do not stampede one
// server. RateLimiter (backend.Config.Limiter) holds a per-user rate in
// Redis across replicas, with github.com/go-redis/redis_rate.
//
// Everything talks to Redis through redis.UniversalClient: a single node,
// Sentinel or Cluster. A region's keys share one hash tag, "{REGION}", so
// that in a Cluster every call touches one slot.
//
// # Keys
//
// With the default prefix "netcode:fleet", a region R has:
//
//	netcode:fleet:{R}:servers  a hash: server id -> "EXPIRY_MS JSON", EXPIRY_MS in Redis's clock
//	netcode:fleet:{R}:events   a pub/sub channel: "drain ID", "gone ID"
//
// and RateLimiter keeps "rate:netcode:fleet:rate:CLIENTID" per user. Entries
// expire by Redis's clock (scripts read TIME), so the servers' and
// backends' clocks need not agree.
//
// The package lives outside the netcode package's import graph: a game
// server that does not register pays nothing for go-redis.
package fleet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Defaults of the configurations' zero fields.
const (
	// DefaultPrefix begins every key the package writes.
	DefaultPrefix = "netcode:fleet"
	// DefaultRegion is the region of a server or query that names none.
	DefaultRegion = "default"
	// DefaultHeartbeat is how often a server refreshes its entry.
	DefaultHeartbeat = time.Second
	// DefaultTTL is how long an entry outlives its last heartbeat: a
	// server killed without a word drops out within it.
	DefaultTTL = 3 * time.Second
	// DefaultRefresh is how often a Chooser rereads its regions.
	DefaultRefresh = 250 * time.Millisecond
	// DefaultGrace is how long a Chooser that cannot reach Redis keeps
	// choosing from the last entries it read, before it answers
	// backend.ErrNoServers (503 with Retry-After).
	DefaultGrace = 10 * time.Second
	// DefaultCount is how many servers a token names by default.
	DefaultCount = 8
	// MaxCount is the most servers a token can name (token.MaxServers).
	MaxCount = 32

	// maxName bounds a region, a tag and an id, in bytes.
	maxName = 64
	// maxTags bounds a server's or a query's tags.
	maxTags = 32
	// regionKeyTTLs is how many entry TTLs a region's hash outlives its
	// last heartbeat, so that an abandoned region leaves no key behind.
	regionKeyTTLs = 10
)

// ErrClosed is returned by the methods of a closed Server or Chooser.
var ErrClosed = errors.New("netcode/fleet: closed")

// Info is one server's entry in the registry.
type Info struct {
	// ID names the server in the registry, unique in its region.
	ID string `json:"id"`
	// Addrs are the "host:port" addresses a token names the server by,
	// clients trying them in order (one per address family, typically).
	Addrs []string `json:"addrs"`
	// ProtocolID is the game's protocol id.
	ProtocolID uint64 `json:"protocol,string"`
	// Region and Tags are what backends choose servers by.
	Region string   `json:"region"`
	Tags   []string `json:"tags,omitempty"`
	// MaxClients is the server's client slots; Connected is how many are
	// taken, as of the last heartbeat.
	MaxClients int `json:"max_clients"`
	Connected  int `json:"connected"`
	// Draining is set by Server.Drain: the server takes no new client.
	Draining bool `json:"draining,omitempty"`
	// Version is the server's software version (netcode.Version unless
	// ServerConfig.Version says otherwise).
	Version string `json:"version,omitempty"`
	// Started is when the server registered.
	Started time.Time `json:"started"`
	// Instance tells one registration from another under the same id:
	// random, made by Register. A heartbeat that replaces an entry of
	// another instance is a conflict (two writers claim one id), logged
	// and counted by both the Server and the Choosers.
	Instance string `json:"instance,omitempty"`
	// Expires is when the entry expires unless refreshed, in the reader's
	// clock (filled by the readers: List and Chooser).
	Expires time.Time `json:"-"`
}

// Free returns the free client slots as of the last heartbeat.
func (i *Info) Free() int { return max(i.MaxClients-i.Connected, 0) }

// HasTags reports whether the server has every one of tags.
func (i *Info) HasTags(tags []string) bool {
	for _, t := range tags {
		found := false
		for _, have := range i.Tags {
			if have == t {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// checkName checks a region, a tag or an id: 1 to 64 printable bytes,
// without spaces or braces (a brace would break the hash tag).
func checkName(kind, s string) error {
	if s == "" || len(s) > maxName {
		return fmt.Errorf("netcode/fleet: %s %q: want 1 to %d bytes", kind, s, maxName)
	}
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' || r == '{' || r == '}' || r == ',' {
			return fmt.Errorf("netcode/fleet: %s %q: only printable ASCII without spaces, commas or braces", kind, s)
		}
	}
	return nil
}

// checkTags checks a list of tags.
func checkTags(tags []string) error {
	if len(tags) > maxTags {
		return fmt.Errorf("netcode/fleet: %d tags, at most %d", len(tags), maxTags)
	}
	for _, t := range tags {
		if err := checkName("tag", t); err != nil {
			return err
		}
	}
	return nil
}

// ParseTags splits a comma-separated list of tags ("" is none) and checks
// them.
func ParseTags(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var tags []string
	for _, t := range strings.Split(s, ",") {
		tags = append(tags, strings.TrimSpace(t))
	}
	return tags, checkTags(tags)
}

// keys names a region's Redis keys: shard 0's hash, the events channel
// and the shard count; shard i > 0 is shard(i).
type keys struct {
	prefix, region         string
	servers, events, count string
}

func regionKeys(prefix, region string) keys {
	base := prefix + ":{" + region + "}:"
	return keys{prefix: prefix, region: region, servers: base + "servers", events: base + "events", count: base + "shards"}
}

// shard names shard i's hash: shard 0 is the region's own, "{R}"; shard
// i > 0 has the hash tag "{R,i}" (a comma is in no region's name), so
// that in a Cluster each shard is its own slot.
func (k keys) shard(i int) string {
	if i == 0 {
		return k.servers
	}
	return k.prefix + ":{" + k.region + "," + strconv.Itoa(i) + "}:servers"
}

// MaxShards bounds a region's shards (SetShards).
const MaxShards = 256

// shardOf is the shard of server id among n: FNV-1a of the id, modulo n.
func shardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// Event messages on a region's channel.
const (
	eventDrain = "drain "
	eventGone  = "gone "
)
