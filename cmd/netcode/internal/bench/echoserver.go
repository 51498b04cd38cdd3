package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/token"
)

// echoServer is the netcode phase's echo server: a Listener in this
// process, with one echo goroutine per connection, or with
// Config.ServerProcess one in a child process.
type echoServer struct {
	r        *run
	addr     netip.AddrPort
	l        *netcode.Listener // in this process
	cl       *cute.Listener    // the Cute phase's, in this process
	accepted chan struct{}     // a connection was accepted (in this process)
	child    *childProc        // in a child process
}

// startEchoServer starts r's server; its goroutines in this process carry
// the label bench=server.
func startEchoServer(ctx context.Context, r *run, key crypto.Key) (*echoServer, error) {
	cfg := r.cfg
	s := &echoServer{r: r}
	if cfg.ServerProcess {
		if err := s.startChild(roleServer, hex.EncodeToString(key[:]),
			"-protocol", strconv.FormatUint(cfg.ProtocolID, 10), "-max", strconv.Itoa(cfg.MaxClients),
			"-read-shards", strconv.Itoa(cfg.ReadShards)); err != nil {
			return nil, err
		}
		return s, nil
	}
	var err error
	s.accepted = make(chan struct{}, cfg.Clients)
	labelled(ctx, SideServer, func(ctx context.Context) {
		s.l, err = netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{
			ProtocolID:   cfg.ProtocolID,
			PrivateKey:   key,
			MaxClients:   cfg.MaxClients,
			Socket:       netcode.SocketConfig{ReadShards: cfg.ReadShards},
			Logger:       cfg.Logger,
			TickInterval: cfg.ServerTick,
		})
		if err != nil {
			return
		}
		r.echoes.Add(1)
		go acceptEchoes(r, s.accepted, s.l.AcceptConn)
	})
	if err != nil {
		return nil, err
	}
	s.addr = netip.MustParseAddrPort(s.l.Addr().String())
	return s, nil
}

// startChild starts s's server in a child process of role, which reads
// keyHex (its key) first on its stdin.
func (s *echoServer) startChild(role, keyHex string, args ...string) error {
	argv := s.r.cfg.Child
	if argv == nil {
		var err error
		if argv, err = defaultChild(); err != nil {
			return err
		}
	}
	c, err := startChild(argv, "server", role, keyHex, args...)
	if err != nil {
		return err
	}
	if s.addr, err = netip.ParseAddrPort(c.ready.UDP); err != nil {
		c.stop()
		return fmt.Errorf("bench: the server process's address: %w", err)
	}
	s.child = c
	return nil
}

// close stops the server and waits for its goroutines or its process.
func (s *echoServer) close() {
	if s.child != nil {
		s.child.stop()
		return
	}
	if s.cl != nil {
		s.cl.Close()
	} else {
		s.l.Close()
	}
	s.r.echoes.Wait()
}

// cpu is the CPU time so far of a server process; 0 in this process.
func (s *echoServer) cpu() time.Duration {
	if s.child == nil {
		return 0
	}
	d, _, _ := s.child.cpu()
	return d
}

// serverProfiler runs a server process's CPU profiler over a span and
// has it write the profile to a file. Its methods do nothing on nil.
type serverProfiler struct {
	child *childProc
	path  string
}

// profiler returns the profiler of a server process that writes to path,
// or nil if there is no server process or no path.
func (s *echoServer) profiler(path string) *serverProfiler {
	if s.child == nil || path == "" {
		return nil
	}
	return &serverProfiler{child: s.child, path: path}
}

func (sp *serverProfiler) start() error {
	if sp == nil {
		return nil
	}
	_, err := sp.child.request(reqCPUStart)
	return err
}

func (sp *serverProfiler) stop() error {
	if sp == nil {
		return nil
	}
	_, err := sp.child.request(reqCPUStop + " " + sp.path)
	return err
}

// waitAccepted waits (briefly) for the server to have accepted n clients.
func (s *echoServer) waitAccepted(n int) {
	if s.child != nil {
		return // the clients' handshakes completed: the server holds them
	}
	for range n {
		select {
		case <-s.accepted:
		case <-time.After(5 * time.Second):
		}
	}
}

// packets returns the server's payload datagrams so far (in + out): those
// its echo goroutines read, twice, or for a server process two per echo
// the clients received.
func (s *echoServer) packets() uint64 {
	if s.child != nil {
		_, recv := s.r.totals()
		return 2 * recv
	}
	return 2 * s.r.serverRecv()
}

// datagrams returns the datagrams of every kind the server (netcode's
// or Cute's) received and sent so far.
func (s *echoServer) datagrams() uint64 {
	if s.child != nil {
		st, _ := s.child.request(reqCPU)
		return st.Datagrams
	}
	if s.cl != nil {
		st := s.cl.Stats()
		return st.PacketsReceived + st.PacketsSent
	}
	st := s.l.Stats()
	return st.PacketsReceived + st.PacketsSent
}

// wakes is a server process's goroutine runs and thread context switches
// so far; ok is false where the system does not count switches.
func (s *echoServer) wakes() (runs, switches uint64, ok bool) {
	st, err := s.child.request(reqCPU)
	return st.Runs, st.Switches, err == nil && st.SwitchesOK
}

// stats returns the server's counters; nil for a server process.
func (s *echoServer) stats() *netcode.ServerStats {
	if s.child != nil || s.cl != nil {
		return nil
	}
	st := s.l.Stats()
	return &st
}

// status is the server's part of a progress line.
func (s *echoServer) status() string {
	if s.child != nil {
		return "server: in its own process"
	}
	if s.cl != nil {
		return fmt.Sprintf("server: connected %d", s.cl.ClientCount())
	}
	st := s.l.Stats()
	r := s.r
	r.srvMu.Lock()
	ends := 0
	for _, v := range r.srvEnds {
		ends += v
	}
	r.srvMu.Unlock()
	return fmt.Sprintf("server: connected %d  ended %d  ignored %d", st.Connected, ends, st.Ignored)
}

// connectStats is what connectAll measured.
type connectStats struct {
	connected int
	took      time.Duration  // from the first dial to the last connection
	perSec    float64        // connected / took
	errs      map[string]int // dial errors by text; nil if none
}

// mintTokens makes one connect token per client (client ids 1 to n) for
// the server at addr, valid for an hour.
func mintTokens(n int, protocolID uint64, timeoutSeconds int32, key crypto.Key, addr netip.AddrPort) ([][]byte, error) {
	tokens := make([][]byte, n)
	for i := range tokens {
		var err error
		tokens[i], err = token.Generate(&token.Params{
			ProtocolID:     protocolID,
			ClientID:       uint64(i + 1),
			PrivateKey:     key,
			ServerAddrs:    []netip.AddrPort{addr},
			ExpireSeconds:  3600,
			TimeoutSeconds: timeoutSeconds,
		})
		if err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// startCuteServer starts the Cute phase's echo server: in this process,
// or with Config.ServerProcess in a child process of its own.
func startCuteServer(ctx context.Context, r *run, sk cute.SecretKey) (*echoServer, error) {
	cfg := r.cfg
	s := &echoServer{r: r, accepted: make(chan struct{}, cfg.Clients)}
	maxClients, maxPending := min(cfg.MaxClients, cute.MaxMaxClients), min(cfg.DialConcurrency, 4096)
	if cfg.ServerProcess {
		if err := s.startChild(roleCute, hex.EncodeToString(sk[:]),
			"-protocol", strconv.FormatUint(cfg.ProtocolID, 10), "-max", strconv.Itoa(maxClients),
			"-max-pending", strconv.Itoa(maxPending), "-read-shards", strconv.Itoa(cfg.ReadShards)); err != nil {
			return nil, err
		}
		return s, nil
	}
	var err error
	labelled(ctx, SideServer, func(ctx context.Context) {
		s.cl, err = cute.Listen("udp4", "127.0.0.1:0", cuteServerConfig(cfg.ProtocolID, sk, maxClients, maxPending, cfg.ReadShards, cfg.Logger))
		if err != nil {
			return
		}
		r.echoes.Add(1)
		go acceptEchoes(r, s.accepted, s.cl.AcceptConn)
	})
	if err != nil {
		return nil, err
	}
	s.addr = netip.MustParseAddrPort(s.cl.Addr().String())
	return s, nil
}

// cuteServerConfig is the Cute echo server's configuration, in this
// process or a child's.
func cuteServerConfig(app uint64, sk cute.SecretKey, maxClients, maxPending, shards int, log *slog.Logger) *cute.ServerConfig {
	return &cute.ServerConfig{
		ApplicationID: app,
		PublicKey:     sk.Public(),
		SecretKey:     sk,
		MaxClients:    maxClients,
		MaxPending:    maxPending,
		// Every client may wait for Accept, as netcode's AcceptBacklog
		// defaults to: a burst of dials must not find the queue (64 by
		// default) full and be disconnected.
		AcceptQueue: maxClients,
		Socket:      cute.SocketConfig{ReadShards: shards}, // as netcode's phase
		Logger:      log,
		// The bench measures the protocol layer, payload for payload,
		// as it does netcode's.
		BareProtocol: true,
	}
}

// mintCuteTokens makes one Cute connect token per client (client ids 1 to
// n) for the server at addr, valid for an hour.
func mintCuteTokens(n int, app uint64, sk cute.SecretKey, addr netip.AddrPort) ([][]byte, error) {
	tokens := make([][]byte, n)
	for i := range tokens {
		var err error
		tokens[i], err = cute.GenerateToken(&cute.TokenParams{
			ApplicationID: app,
			ClientID:      uint64(i + 1),
			SecretKey:     sk,
			ServerAddrs:   []netip.AddrPort{addr},
			ExpireSeconds: 3600,
		})
		if err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// acceptEchoes accepts connections with accept until it fails (the
// listener closed), signals each on accepted (without waiting) and echoes
// each on a goroutine of its own. The caller has counted it in r.echoes.
func acceptEchoes[C endpoint](r *run, accepted chan<- struct{}, accept func(context.Context) (C, error)) {
	defer r.echoes.Done()
	for {
		c, err := accept(context.Background())
		if err != nil {
			return
		}
		select {
		case accepted <- struct{}{}:
		default:
		}
		r.echoes.Add(1)
		go r.echo(c)
	}
}
