package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/gonetcode/netcode/cmd/netcode/internal/bench"
)

const benchSynopsis = `[-clients N] [-size bytes] [-rate per-second | -window N] [-duration d] [-baseline] [flags]
       netcode bench -bridge relay|transport|wt-relay|wt-transport|wire|wt-wire|websocket [-clients N] [-rate 10] [-size 100] [-idle d] [-duration d] [flags]

Runs a netcode echo server (netcode.Listen on 127.0.0.1:0) and N clients
(netcode.Dial with minted tokens) in this process, and measures: connects/s
of the handshake phase, payloads/s echoed, p50/p99 round-trip latency,
process CPU per million server packets (getrusage), the server's own CPU per
million packets (pprof samples of goroutines labelled bench=server),
allocations per packet (MemStats.Mallocs over the first half of the window,
divided by the payload datagrams the server received and sent), and
connections lost. With -baseline the same load then runs over raw UDP: an
echo server on the same batched socket (recvmmsg/sendmmsg; -raw-readers
goroutines each reading a batch and writing it back) and one plain UDP
socket per client, and the ratio netcode/raw of payloads/s is printed.

With -server-process the echo server runs in a child process of this
executable, so that it shares its Go scheduler with no client goroutine,
as a server in production does: the server's CPU is then the child's, the
process CPU is both processes', and the server's packets are counted as
two per echo received. The server's counters are not printed then. With
-dialect cute, Cute's echo server runs in a child process of its own too.

With -light the netcode clients run on a light generator: each is the
I/O-free client core of the library rather than a dialed netcode.Conn, 1024
of them share one UDP socket (bound to 0.0.0.0, each client sending from and
told apart by its own address in 127.0.0.0/8, with IP_PKTINFO: Linux), and
each socket has one reader goroutine (recvmmsg) and one ticker that sends
the keep-alives and applies the timeouts of its clients every 10 ms; at a
-rate, the clients of a socket are paced by one goroutine, which sends
what falls due together (sendmmsg), at each client's own phase. The
server sees the same protocol and one address per client. At 4096 clients
and more, dialed Conns (a socket, a goroutine and a timer each) cost the
generator more CPU than the server it measures; the light generator lets
the server's own cost be measured there, with -server-process. It runs
netcode's clients only: with -dialect cute, Cute's clients are dialed
cute.Conns (the Cute client core is internal to package cute).

A packet is one payload datagram: a round trip is two. With -rate, each
client sends at its own phase of the period (client i of N at i/N of it),
as independent clients would, never all at the same instant; a pacer
goroutine sends for up to 1024 clients and wakes at most once a
millisecond, so a payload leaves up to 1 ms after its phase.

With -bridge relay or -bridge transport it measures the browser bridge
instead, as an operator runs it: a netcode echo server and the bridge run
as child processes of this executable (in transport mode one process: the
transport.Mux is the server's socket), and N simulated browsers in this
process connect over WebSocket (relay: the relay protocol of
bridge/js/netcode.js; transport: a netcode client per browser over
transport.Dial), send one -size message every 1/-rate seconds and
check the echo. After the connect phase, -idle runs an idle phase (everyone
connected, nothing sent). It reports connect time, echoes/s, p50/p99, lost,
the CPU of the bridge and the server processes (/proc/<pid>/stat) per echo
and per idle session and second, and their goroutines, heap and
descriptors per session. Its defaults: -rate 10, -size 100. -baseline,
-window and the server and client tuning flags do not apply. -bridge
wt-relay and wt-transport are the same over WebTransport (HTTP/3 on UDP,
a webtransport.Server with development certificates in the bridge's
process, Go WebTransport clients: webtransport.DialRelay, or a netcode
client over webtransport.Dial), with the same report. -bridge wire and
wt-wire measure the wire (package bridge/wire) in the bridge's process,
between netcode clients over transport.Dial or webtransport.Dial at
/wire/<port> and the netcode echo server on UDP in the server's process;
with -dialect cute, between Cute clients (the bare protocol layer) and a
Cute echo server, as Cute Framework's web builds reach their servers.

-bridge websocket measures the floor the others pay on the browser's
side: a plain coder/websocket echo server in a child process (no netcode,
no bridge), the same browsers and the same generator. Run it beside the
others to compare CPU per message on the same machine.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", benchSynopsis, stdout, stderr)
	var cfg bench.Config
	fs.IntVar(&cfg.Clients, "clients", 64, "number of clients (e.g. 1, 16, 64, 256, 1024, 4096)")
	fs.IntVar(&cfg.Size, "size", 64, "payload bytes (16..1200)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "payloads per client per second; 0: flat out with -window payloads in flight per client")
	fs.IntVar(&cfg.Window, "window", 8, "flat out: payloads in flight per client")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured window; 0: connect phase only")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured exchange before the window")
	fs.BoolVar(&cfg.Baseline, "baseline", false, "also run the same load over raw UDP and print the ratio")
	fs.BoolVar(&cfg.ServerProcess, "server-process", false, "run the netcode echo server in a child process of its own, as in production, instead of beside the clients (-server-tick does not apply)")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "repeat the run (netcode then raw) this many times and report the median round")
	fs.IntVar(&cfg.RawReaders, "raw-readers", 0, "goroutines serving the raw UDP echo socket (default: GOMAXPROCS)")
	fs.IntVar(&cfg.MaxClients, "max-clients", 0, "server slots (default: -clients)")
	fs.StringVar(&cfg.Dialect, "dialect", "netcode", "netcode, or cute: also measure the Cute Protocol dialect in the same run, reported beside netcode (with -bridge wire or wt-wire: Cute clients and a Cute server instead of netcode's)")
	fs.IntVar(&cfg.ReadShards, "read-shards", 0, "server sockets read in parallel, SO_REUSEPORT on Linux (ServerConfig.Socket.ReadShards, and the Cute phase's cute.SocketConfig.ReadShards; default 1)")
	fs.IntVar(&cfg.DialConcurrency, "dial-concurrency", 256, "handshakes in flight at once")
	fs.BoolVar(&cfg.Light, "light", false, "run the netcode clients on the light generator: the client core, 1024 clients per socket on their own 127.x.y.z addresses, one reader and one keep-alive ticker per socket (Linux; use it from about 4096 clients, where dialed Conns cost the generator more CPU than the server)")
	fs.DurationVar(&cfg.ServerTick, "server-tick", 0, "server tick interval (ServerConfig.TickInterval; default: the library's)")
	timeout := fs.Int("timeout", 10, "tokens' connection timeout in seconds")
	proto := protocolFlag(bench.DefaultProtocolID)
	fs.Var(&proto, "protocol", "protocol id (decimal or 0x hex)")
	cpuprofile := fs.String("cpuprofile", "", "write the netcode phase's CPU profile (second half of the window) to this file; with -bridge, the window's profiles of the child processes to this name plus .relay and .server, or .transport")
	fs.BoolVar(&cfg.ProfileConnect, "profile-connect", false, "make -cpuprofile and -server-cpuprofile cover the connect phase instead of the window")
	fs.StringVar(&cfg.ServerCPUProfile, "server-cpuprofile", "", "with -server-process: write the server process's CPU profile (second half of the window, or the connect phase with -profile-connect) to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile at the end to this file")
	memrate := fs.Int("memprofilerate", 0, "runtime.MemProfileRate for -memprofile (1: every allocation; default: the runtime's)")
	quiet := fs.Bool("q", false, "no progress lines")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	bridgeMode := fs.String("bridge", "", "measure the browser bridge: relay, transport, wt-relay, wt-transport, wire, wt-wire, or websocket for the floor (see above)")
	idle := fs.Duration("idle", 0, "-bridge: idle phase after connecting, e.g. 5s (shorter than the bridge's idle timeout)")
	if len(args) > 0 && args[0] == bench.ChildArg {
		return bench.RunChild(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *bridgeMode != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		bc := bench.BridgeConfig{
			Mode:            *bridgeMode,
			Clients:         cfg.Clients,
			Size:            cfg.Size,
			Rate:            cfg.Rate,
			Duration:        cfg.Duration,
			Warmup:          cfg.Warmup,
			Idle:            *idle,
			DialConcurrency: cfg.DialConcurrency,
			TimeoutSeconds:  int32(*timeout),
			ProtocolID:      uint64(proto),
			CPUProfile:      *cpuprofile,
			Dialect:         cfg.Dialect,
		}
		if !set["size"] {
			bc.Size = bench.DefaultBridgeSize
		}
		if !set["rate"] {
			bc.Rate = bench.DefaultBridgeRate
		}
		for _, name := range []string{"baseline", "window", "rounds", "raw-readers", "max-clients", "read-shards",
			"server-tick", "profile-connect", "memprofile", "memprofilerate", "server-process", "server-cpuprofile"} {
			if set[name] {
				return fmt.Errorf("-%s does not apply with -bridge", name)
			}
		}
		if set["rate"] && cfg.Rate <= 0 {
			return fmt.Errorf("-bridge sends at a rate: -rate must be positive")
		}
		if !*quiet {
			bc.Progress = stderr
		}
		res, err := bench.RunBridge(ctx, bc)
		if err != nil {
			return err
		}
		return printResult(stdout, *asJSON, res)
	}
	if *idle != 0 {
		return fmt.Errorf("-idle applies only with -bridge")
	}
	if cfg.ServerCPUProfile != "" && !cfg.ServerProcess {
		return fmt.Errorf("-server-cpuprofile applies only with -server-process (else -cpuprofile has the server's goroutines, labelled bench=server)")
	}
	if cfg.ServerProcess && cfg.ServerTick != 0 {
		return fmt.Errorf("-server-tick does not apply with -server-process")
	}
	cfg.TimeoutSeconds = int32(*timeout)
	cfg.ProtocolID = uint64(proto)
	if !*quiet {
		cfg.Progress = stderr
	}
	if *memprofile != "" && *memrate > 0 {
		runtime.MemProfileRate = *memrate
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.CPUProfile = f
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return printResult(stdout, *asJSON, res)
}

// printResult writes a run's result to w: as indented JSON, or as its
// report.
func printResult(w io.Writer, asJSON bool, res interface{ Print(io.Writer) }) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.Print(w)
	return nil
}
