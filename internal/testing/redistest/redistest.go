// Package redistest runs a real redis-server for tests: on a free loopback
// port, in a temporary directory, without persistence. A test that needs
// Redis calls Start; without redis-server on the machine the test is
// skipped, except in CI (CI=true), where it fails: .ci/run installs Debian's
// redis-server (.ci/redis-deps.sh).
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Path finds redis-server: $NETCODE_REDIS_SERVER, or redis-server on $PATH
// (Debian's is /usr/bin/redis-server); "" if none.
func Path() string {
	if p := os.Getenv("NETCODE_REDIS_SERVER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return ""
}

// Server is a redis-server process owned by one test.
type Server struct {
	t       testing.TB
	path    string
	dir     string
	port    int
	cluster bool
	// nodeOf is set on a node of a Cluster: it joins the cluster that
	// redis-cli makes, instead of taking every slot itself.
	nodeOf *Cluster
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
}

// Start runs redis-server on a free loopback port and waits until it
// answers PING. The test's cleanup stops it and removes its directory.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartCluster runs a Redis Cluster of one node that holds every slot:
// what a client sees of a Cluster (MOVED-free routing, hash tags, scripts
// on one slot, sharded pub/sub), on one process. ClusterURL names it.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, cluster bool) *Server {
	t.Helper()
	return startNode(t, need(t, Path(), "redis-server", "NETCODE_REDIS_SERVER"), cluster, nil)
}

// need returns path, or skips the test (fails it in CI) when it is empty.
func need(t testing.TB, path, program, env string) string {
	t.Helper()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found and CI=true: .ci/redis-deps.sh installs it (apt-get install redis-server), or set %s", program, env)
		}
		t.Skipf("%s not found, so this test cannot run (it would fail in CI, where CI=true): apt-get install redis-server, or set %s", program, env)
	}
	return path
}

func startNode(t testing.TB, path string, cluster bool, nodeOf *Cluster) *Server {
	t.Helper()
	s := &Server{t: t, path: path, dir: t.TempDir(), cluster: cluster, nodeOf: nodeOf}
	var err error
	for range 5 { // another process may take the free port before redis-server binds it
		if s.port, err = freePort(); err != nil {
			t.Fatalf("redistest: no free port: %v", err)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns "redis://127.0.0.1:PORT".
func (s *Server) URL() string { return "redis://" + s.Addr() }

// ClusterURL returns the URL of a Cluster whose seed node is this server,
// as fleet.NewClient reads it: "redis://127.0.0.1:PORT?addr=127.0.0.1:PORT".
func (s *Server) ClusterURL() string { return s.URL() + "?addr=" + s.Addr() }

// Stop kills the server (SIGKILL: its data is gone, as after a crash) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart stops the server and starts an empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for range 50 { // the port is ours, but the old socket may linger briefly
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}

// start launches redis-server on s.port and waits for PING.
func (s *Server) start() error {
	log := filepath.Join(s.dir, "redis.log")
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--logfile", log,
		"--daemonize", "no",
	}
	if s.cluster {
		os.Remove(filepath.Join(s.dir, "nodes.conf")) // a restart is a new, empty cluster
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	if s.nodeOf != nil {
		args = append(args, "--cluster-node-timeout", strconv.Itoa(int(NodeTimeout/time.Millisecond)),
			// A replica of a master that failed a moment ago may take over.
			"--cluster-replica-validity-factor", "0",
			// A replica's first sync starts at once (Redis waits 5 s by
			// default for more replicas to share a diskless transfer).
			"--repl-diskless-sync-delay", "0")
	}
	cmd := exec.Command(s.path, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr()) == nil && (!s.cluster || s.nodeOf != nil || s.clusterReady() == nil) {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(log)
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, strings.TrimSpace(string(out)))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING within 10 s", s.port)
		}
	}
}

// ping sends one PING and expects +PONG.
func ping(addr string) error {
	line, err := inline(addr, "PING")
	if err == nil && line != "+PONG" {
		err = fmt.Errorf("PING answered %q", line)
	}
	return err
}

// clusterReady gives the node every slot (once) and reports whether the
// cluster says it is ok.
func (s *Server) clusterReady() error {
	inline(s.Addr(), "CLUSTER ADDSLOTSRANGE 0 16383") // an error once they are assigned
	c, err := dial(s.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("CLUSTER INFO\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n') // $LEN of the bulk string
	if err != nil || !strings.HasPrefix(head, "$") {
		return fmt.Errorf("CLUSTER INFO answered %q (%v)", head, err)
	}
	first, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(first) != "cluster_state:ok" {
		return fmt.Errorf("cluster not ready: %s", strings.TrimSpace(first))
	}
	return nil
}

// inline sends one command in the inline protocol and returns the first
// line of the answer, without its CRLF.
func inline(addr, command string) (string, error) {
	c, err := dial(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte(command + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\r\n"), err
}

// dial connects to addr with a one-second deadline on everything.
func dial(addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(time.Second))
	return c, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
