package redistest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NodeTimeout is the cluster-node-timeout of a Cluster's nodes: how long
// a master may be unreachable before its replica takes over. Short, so
// that failover tests take seconds; production Clusters use 15 s.
const NodeTimeout = 1000 * time.Millisecond

// CLIPath finds redis-cli: $NETCODE_REDIS_CLI, or redis-cli on $PATH
// (Debian's redis-server package brings it, as redis-tools); "" if none.
func CLIPath() string {
	if p := os.Getenv("NETCODE_REDIS_CLI"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-cli"); err == nil {
		return p
	}
	return ""
}

// Cluster is a Redis Cluster of three masters, each with one replica, on
// loopback: six redis-server processes joined by `redis-cli --cluster
// create --cluster-replicas 1`, with a NodeTimeout of a second.
type Cluster struct {
	t     testing.TB
	cli   string
	Nodes []*Server // the six nodes; which are masters changes with failovers
}

// StartReplicatedCluster starts a Cluster of three masters and three
// replicas and waits until every node says the cluster is ok and every
// replica is in sync with its master. The test's cleanup stops them.
// It takes about two seconds.
func StartReplicatedCluster(t testing.TB) *Cluster {
	t.Helper()
	start := time.Now()
	path := need(t, Path(), "redis-server", "NETCODE_REDIS_SERVER")
	c := &Cluster{t: t, cli: need(t, CLIPath(), "redis-cli", "NETCODE_REDIS_CLI")}
	var addrs []string
	for range 6 {
		n := startNode(t, path, true, c)
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr())
	}
	out, err := exec.Command(c.cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(30 * time.Second)
	t.Logf("redistest: a Cluster of 3 masters and 3 replicas ready in %v", time.Since(start).Round(time.Millisecond))
	return c
}

// URL returns the Cluster's URL as fleet.NewClient reads it, every node a
// seed: "redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=...".
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr() + "?"
	for i, n := range c.Nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + n.Addr()
	}
	return u
}

// Do runs one command on node n with redis-cli and returns its output.
func (c *Cluster) Do(n *Server, args ...string) (string, error) {
	out, err := exec.Command(c.cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(n.port)}, args...)...).CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err == nil && strings.HasPrefix(s, "ERR") {
		err = fmt.Errorf("%s", s)
	}
	return s, err
}

// must is Do that fails the test on an error.
func (c *Cluster) must(n *Server, args ...string) string {
	c.t.Helper()
	out, err := c.Do(n, args...)
	if err != nil {
		c.t.Fatalf("redistest: %s on %s: %v: %s", strings.Join(args, " "), n.Addr(), err, out)
	}
	return out
}

// Node is one line of CLUSTER NODES.
type Node struct {
	ID, Addr string
	Master   bool
	Failed   bool
	Slots    [][2]int // ranges, inclusive
}

// Topology returns the cluster's nodes as node n sees them.
func (c *Cluster) Topology(n *Server) []Node {
	c.t.Helper()
	var nodes []Node
	sc := bufio.NewScanner(strings.NewReader(c.must(n, "CLUSTER", "NODES")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		nd := Node{ID: f[0], Addr: strings.Split(f[1], "@")[0], Master: strings.Contains(f[2], "master"), Failed: strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				nd.Slots = append(nd.Slots, [2]int{a, b})
			}
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// Slot returns the hash slot of key.
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	s, err := strconv.Atoi(c.must(c.alive(), "CLUSTER", "KEYSLOT", key))
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER KEYSLOT %s: %v", key, err)
	}
	return s
}

// alive returns a running node.
func (c *Cluster) alive() *Server {
	for _, n := range c.Nodes {
		if n.cmd != nil {
			return n
		}
	}
	c.t.Fatal("redistest: every node of the cluster is stopped")
	return nil
}

// byAddr returns the running node at addr, or nil.
func (c *Cluster) byAddr(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr() == addr && n.cmd != nil {
			return n
		}
	}
	return nil
}

// MasterOf returns the running master that serves slot, as a running node
// sees it, with its cluster node id; nil if none does.
func (c *Cluster) MasterOf(slot int) (*Server, string) {
	c.t.Helper()
	for _, nd := range c.Topology(c.alive()) {
		if !nd.Master || nd.Failed {
			continue
		}
		for _, r := range nd.Slots {
			if slot >= r[0] && slot <= r[1] {
				return c.byAddr(nd.Addr), nd.ID
			}
		}
	}
	return nil, ""
}

// WaitHealthy waits until every running node says cluster_state:ok and
// every running replica's link to its master is up.
func (c *Cluster) WaitHealthy(limit time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := c.healthy()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: cluster not healthy within %v: %v", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		info, err := c.Do(n, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster state not ok", n.Addr())
		}
		repl, err := c.Do(n, "INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync", n.Addr())
		}
	}
	return nil
}

// MigrateSlot moves slot, and its keys, from the master that serves it to
// another master, as `redis-cli --cluster reshard` does for one slot:
// IMPORTING and MIGRATING, MIGRATE of every key, then the new owner told
// to every master. It returns the new owner.
func (c *Cluster) MigrateSlot(slot int) *Server {
	c.t.Helper()
	src, srcID := c.MasterOf(slot)
	if src == nil {
		c.t.Fatalf("redistest: no master serves slot %d", slot)
	}
	var dst *Server
	var dstID string
	for _, nd := range c.Topology(src) {
		if nd.Master && !nd.Failed && nd.ID != srcID && len(nd.Slots) > 0 {
			dst, dstID = c.byAddr(nd.Addr), nd.ID
			break
		}
	}
	if dst == nil {
		c.t.Fatal("redistest: no other master to migrate to")
	}
	s := strconv.Itoa(slot)
	c.must(dst, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID)
	c.must(src, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID)
	for {
		keys := strings.Fields(c.must(src, "CLUSTER", "GETKEYSINSLOT", s, "100"))
		if len(keys) == 0 {
			break
		}
		c.must(src, append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.port), "", "0", "5000", "KEYS"}, keys...)...)
	}
	c.must(dst, "CLUSTER", "SETSLOT", s, "NODE", dstID)
	c.must(src, "CLUSTER", "SETSLOT", s, "NODE", dstID)
	for _, nd := range c.Topology(dst) {
		if n := c.byAddr(nd.Addr); nd.Master && !nd.Failed && n != nil && n != src && n != dst {
			c.must(n, "CLUSTER", "SETSLOT", s, "NODE", dstID)
		}
	}
	return dst
}
