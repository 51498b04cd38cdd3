package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// crefEnv names the environment variable that gives the directory of the
// C reference's netcode.c and netcode.h (protocol 1.02, from
// github.com/mas-bandwidth/netcode).
const crefEnv = "NETCODE_C_SRC"

// crefMaxClients is the C reference's NETCODE_MAX_CLIENTS: it has no
// figure above.
const crefMaxClients = 256

// crefConfig is one configuration of the C comparison.
type crefConfig struct{ Clients, Window, Size int }

func (c crefConfig) String() string { return fmt.Sprintf("%d, %d, %d B", c.Clients, c.Window, c.Size) }

// parseCrefConfigs parses "CLIENTSxWINDOWxSIZE,...".
func parseCrefConfigs(s string) ([]crefConfig, error) {
	var out []crefConfig
	for f := range strings.SplitSeq(s, ",") {
		var c crefConfig
		parts := strings.Split(strings.TrimSpace(f), "x")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q is not CLIENTSxWINDOWxSIZE", f)
		}
		for i, p := range []*int{&c.Clients, &c.Window, &c.Size} {
			n, err := strconv.Atoi(parts[i])
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%q is not CLIENTSxWINDOWxSIZE", f)
			}
			*p = n
		}
		out = append(out, c)
	}
	return out, nil
}

// echoFigures are one run's figures, C or Go.
type echoFigures struct {
	PerCPU   float64 // echoes per CPU-second of the process
	P50, P99 time.Duration
}

// parseCbench reads cbench's result line.
func parseCbench(out string) (echoFigures, error) {
	var f echoFigures
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "result" {
			continue
		}
		kv := map[string]float64{}
		for _, field := range fields[1:] {
			k, v, ok := strings.Cut(field, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return f, fmt.Errorf("cbench printed %q", strings.TrimSpace(line))
			}
			kv[k] = x
		}
		for _, k := range []string{"echoes_per_cpu_second", "p50_us", "p99_us"} {
			if _, ok := kv[k]; !ok {
				return f, fmt.Errorf("cbench printed no %s: %q", k, strings.TrimSpace(line))
			}
		}
		f.PerCPU = kv["echoes_per_cpu_second"]
		f.P50 = time.Duration(kv["p50_us"]) * time.Microsecond
		f.P99 = time.Duration(kv["p99_us"]) * time.Microsecond
		return f, nil
	}
	return f, fmt.Errorf("cbench printed no result line: %q", out)
}

// benchPhase is one phase of `netcode bench -json`'s result.
type benchPhase struct {
	EchoesPerCPUSecond float64
	P50, P99           time.Duration
	RoundTrips         uint64
}

func (p benchPhase) figures() echoFigures {
	return echoFigures{PerCPU: p.EchoesPerCPUSecond, P50: p.P50, P99: p.P99}
}

// parseNetcodeBench reads the JSON of `netcode bench -json`: its netcode
// phase and, with -dialect cute, its Cute phase (zero without).
func parseNetcodeBench(out []byte) (netcode, cute echoFigures, err error) {
	var r struct {
		Netcode benchPhase
		Cute    *benchPhase
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return netcode, cute, fmt.Errorf("netcode bench -json: %w", err)
	}
	if r.Netcode.RoundTrips == 0 || (r.Cute != nil && r.Cute.RoundTrips == 0) {
		return netcode, cute, errors.New("netcode bench echoed nothing")
	}
	if r.Cute != nil {
		cute = r.Cute.figures()
	}
	return r.Netcode.figures(), cute, nil
}

// moduleDirs returns the directories of this module and of the netcode
// module it replaces (the repository it is in).
func moduleDirs() (self, repo string, err error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}", "all").Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m (run this from cmd/netcode/internal/sidebyside): %w", err)
	}
	for line := range strings.Lines(string(out)) {
		path, dir, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch path {
		case "github.com/gonetcode/netcode/cmd/netcode/internal/sidebyside":
			self = dir
		case "github.com/gonetcode/netcode":
			repo = dir
		}
	}
	if self == "" || repo == "" {
		return "", "", errors.New("run this from cmd/netcode/internal/sidebyside (go list -m found neither module)")
	}
	return self, repo, nil
}

// crefTransport is the C reference's echo server (cref/cserver.c) as a
// server process of runDatagram, for cref -server-only.
const crefTransport = "c"

// crefPrograms are the C programs cref builds: the one-process harness and
// the echo server.
type crefPrograms struct{ cbench, cserver string }

// buildCref builds cref/cbench.c and cref/cserver.c against the C
// reference in src, into dir. Each includes netcode.c (for its sockets,
// see cref/harness.h), so each is one compilation.
func buildCref(ctx context.Context, cc, src, self, dir string) (crefPrograms, error) {
	for _, f := range []string{"netcode.c", "netcode.h"} {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return crefPrograms{}, fmt.Errorf("%s=%s: %w (it needs netcode.c and netcode.h 1.02 from github.com/mas-bandwidth/netcode)", crefEnv, src, err)
		}
	}
	p := crefPrograms{cbench: filepath.Join(dir, "cbench"), cserver: filepath.Join(dir, "cserver")}
	for _, bin := range []string{p.cbench, p.cserver} {
		args := []string{"-O2", "-DNDEBUG", "-I" + src, "-o", bin, filepath.Join(self, "cref", filepath.Base(bin)+".c"), "-lsodium"}
		cmd := exec.CommandContext(ctx, cc, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return crefPrograms{}, fmt.Errorf("%s %s: %w\n%s(it needs libsodium: Debian's libsodium-dev)", cc, strings.Join(args, " "), err, out)
		}
	}
	return p, nil
}

func runCref(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cref", stderr)
	configs := fs.String("configs", "1x8x100,16x8x100,64x8x100,1x1x100", "CLIENTSxWINDOWxSIZE, comma-separated")
	rounds := fs.Int("rounds", 3, "rounds, C and Go interleaved; the table gives medians")
	duration := fs.Duration("duration", 3*time.Second, "measured window of each run (after a 1 s warm-up)")
	worktree := fs.String("worktree", "", "the netcode repository whose cmd/netcode to measure (default: the one this module is in)")
	cc := fs.String("cc", "cc", "the C compiler")
	floor := fs.Bool("floor", false, "also run, at each one-client window-1 configuration, a bare Go UDP ping-pong (net.UDPConn, no protocol), interleaved: the floor of a Go echo there")
	serverOnly := fs.Bool("server-only", false, "measure the servers alone: the same Go clients (dialed netcode.Conns) drive the C reference's echo server (cref/cserver.c, a poll() loop, a process of its own) and a netcode.Listen echo server (a process of its own, built from this module's netcode), interleaved; server CPU per echo from /proc")
	api := fs.Bool("api", false, "also run, interleaved, the public-API harness (apiecho.go): a netcode.Listen echo server with a goroutine per connection and dialed netcode.Conns with a reader goroutine and a writer goroutine each, in one process")
	apiProfile := fs.String("api-cpuprofile", "", "with -api: write each public-API run's CPU profile (the measured window) to this prefix plus -CLIENTSxWINDOWxSIZE-rROUND.pprof")
	apiFloor := fs.Bool("api-floor", false, "-api, and also run, interleaved, the public-API harness's shape on raw UDP (net.UDPConn clients with the same reader and writer goroutines and credit channel, a one-goroutine raw UDP echo server), and both with GOMAXPROCS=1: how much of the public API's cost is netcode's and how much the Go runtime's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	*api = *api || *apiFloor
	cs, self, repo, dir, err := comparisonSetup("cref", *configs, *worktree, *rounds, *duration)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var progs crefPrograms
	if src := os.Getenv(crefEnv); src == "" {
		fmt.Fprintf(stdout, "%s is not set: no C column. Set it to a directory holding netcode.c and netcode.h (protocol 1.02) from github.com/mas-bandwidth/netcode; building them needs a C compiler and libsodium.\n", crefEnv)
	} else if progs, err = buildCref(ctx, *cc, src, self, dir); err != nil {
		return err
	}
	if *serverOnly {
		return runCrefServers(ctx, cs, progs.cserver, *rounds, *duration, stdout, stderr)
	}
	cbench := progs.cbench
	gobin, err := buildNetcode(ctx, repo, dir)
	if err != nil {
		return err
	}
	secs := strconv.FormatFloat(duration.Seconds(), 'f', -1, 64)
	runC := func(c crefConfig) (echoFigures, error) {
		out, err := exec.CommandContext(ctx, cbench, strconv.Itoa(c.Clients), strconv.Itoa(c.Window), strconv.Itoa(c.Size), secs).Output()
		if err != nil {
			return echoFigures{}, fmt.Errorf("cbench %v: %w", c, err)
		}
		return parseCbench(string(out))
	}
	runGo := func(c crefConfig) (echoFigures, error) {
		f, _, err := runNetcodeBench(ctx, gobin, c, *duration)
		return f, err
	}

	fmt.Fprintf(stdout, "cref: netcode bench of %s vs cbench, one process each (server and clients), %v windows after 1 s warm-up, %d rounds\nuptime before: %s\n",
		repo, *duration, *rounds, uptime())
	res := make([]crefResult, len(cs))
	for round := range *rounds {
		for i, c := range cs {
			if cbench != "" && c.Clients <= crefMaxClients {
				f, err := runC(c)
				if err != nil {
					return err
				}
				res[i].C = append(res[i].C, f)
			}
			f, err := runGo(c)
			if err != nil {
				return err
			}
			res[i].Go = append(res[i].Go, f)
			if *api {
				profile := ""
				if *apiProfile != "" {
					profile = fmt.Sprintf("%s-%dx%dx%d-r%d.pprof", *apiProfile, c.Clients, c.Window, c.Size, round+1)
				}
				if f, err = runAPI(ctx, c, secs, profile); err != nil {
					return err
				}
				res[i].API = append(res[i].API, f)
			}
			if *apiFloor {
				for _, v := range []struct {
					to    *[]echoFigures
					extra []string
				}{
					{&res[i].API1, []string{"-gomaxprocs", "1"}},
					{&res[i].Raw, []string{"-transport", "udp"}},
					{&res[i].Raw1, []string{"-transport", "udp", "-gomaxprocs", "1"}},
				} {
					if f, err = runAPI(ctx, c, secs, "", v.extra...); err != nil {
						return err
					}
					*v.to = append(*v.to, f)
				}
			}
			if *floor && c.Clients == 1 && c.Window == 1 {
				if f, err = runFloor(ctx, c, secs); err != nil {
					return err
				}
				res[i].Floor = append(res[i].Floor, f)
			}
			fmt.Fprintf(stderr, "round %d: %v: %s\n", round+1, c, res[i].last())
		}
	}
	for i := range res {
		res[i].Config = cs[i]
	}
	printCrefTable(stdout, res)
	printFloorTable(stdout, res)
	printAPITable(stdout, res)
	printAPIFloorTable(stdout, res)
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}

// comparisonSetup checks the flags cref and cute share (configurations,
// rounds and window) and returns the configurations, the directories of
// this module and of the netcode repository to measure (worktree, or the
// one this module is in), and a new temporary directory for the programs
// built, which the caller removes.
func comparisonSetup(name, configs, worktree string, rounds int, duration time.Duration) (cs []crefConfig, self, repo, dir string, err error) {
	if cs, err = parseCrefConfigs(configs); err != nil {
		return
	}
	if rounds < 1 || duration <= 0 {
		err = errors.New("-rounds at least 1 and a positive -duration")
		return
	}
	if self, repo, err = moduleDirs(); err != nil {
		return
	}
	if worktree != "" {
		repo = worktree
	}
	dir, err = os.MkdirTemp("", "sidebyside-"+name+"-")
	return
}

// buildNetcode builds cmd/netcode of the repository repo into dir.
func buildNetcode(ctx context.Context, repo, dir string) (string, error) {
	gobin := filepath.Join(dir, "netcode")
	build := exec.CommandContext(ctx, "go", "build", "-o", gobin, "./cmd/netcode")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s/cmd/netcode: %w\n%s", repo, err, out)
	}
	return gobin, nil
}

// runNetcodeBench runs `netcode bench -json` (gobin) at c for a window
// of duration, with extra flags (-dialect cute), and returns its netcode
// phase's figures and its Cute phase's (zero without -dialect cute).
func runNetcodeBench(ctx context.Context, gobin string, c crefConfig, duration time.Duration, extra ...string) (netcode, cute echoFigures, err error) {
	args := append([]string{"bench", "-clients", strconv.Itoa(c.Clients), "-window", strconv.Itoa(c.Window),
		"-size", strconv.Itoa(c.Size), "-duration", duration.String(), "-q", "-json"}, extra...)
	out, err := output(ctx, gobin, args...)
	if err != nil {
		return netcode, cute, err
	}
	return parseNetcodeBench(out)
}

// runFloor runs the bare Go UDP ping-pong (pingpong.go) at c's payload
// size in a process of its own.
func runFloor(ctx context.Context, c crefConfig, secs string) (echoFigures, error) {
	return runSelf(ctx, pingpongArg, "-size", strconv.Itoa(c.Size), "-duration", secs+"s")
}

// runAPI runs the public-API harness (apiecho.go) at c in a process of
// its own, with extra flags (-transport, -gomaxprocs). With profile it
// writes the window's CPU profile there.
func runAPI(ctx context.Context, c crefConfig, secs, profile string, extra ...string) (echoFigures, error) {
	args := []string{apiechoArg, "-clients", strconv.Itoa(c.Clients), "-window", strconv.Itoa(c.Window),
		"-size", strconv.Itoa(c.Size), "-duration", secs + "s"}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	return runSelf(ctx, append(args, extra...)...)
}

// runSelf runs this executable with args (a hidden command that prints a
// result line in cbench's format), so that its CPU time is its own, and
// reads its result.
func runSelf(ctx context.Context, args ...string) (echoFigures, error) {
	exe, err := os.Executable()
	if err != nil {
		return echoFigures{}, err
	}
	out, err := output(ctx, exe, args...)
	if err != nil {
		return echoFigures{}, err
	}
	return parseCbench(string(out))
}

// runCrefServers is cref -server-only: for each configuration and round,
// the C reference's echo server (if cserver was built) and netcode's, in
// an order that rotates from round to round, each under the same Go
// clients in this process (runDatagram), server CPU from /proc.
func runCrefServers(ctx context.Context, cs []crefConfig, cserver string, nRounds int, duration time.Duration, stdout, stderr io.Writer) error {
	servers := []string{"netcode"}
	if cserver != "" {
		servers = []string{crefTransport, "netcode"}
	}
	fmt.Fprintf(stdout, "cref -server-only: the same Go clients against the C reference's echo server (poll loop) and netcode's, each in a process of its own, %v windows after 1 s warm-up, %d rounds\nuptime before: %s\n",
		duration, nRounds, uptime())
	res := make([]serverResult, len(cs))
	for round := range nRounds {
		for i, c := range cs {
			res[i].Config = c
			for _, srv := range rotated(servers, round) {
				if srv == crefTransport && c.Clients > crefMaxClients {
					continue
				}
				r, err := runDatagram(ctx, dgConfig{Transport: srv, Clients: c.Clients, Window: c.Window, Size: c.Size,
					Warmup: time.Second, Duration: duration, CrefExe: cserver, ProcCPU: true})
				if err != nil {
					return fmt.Errorf("round %d, %v, %s server: %w", round+1, c, srv, err)
				}
				if r.PerServerCPU <= 0 {
					return fmt.Errorf("round %d, %v, %s server: no server CPU time measured", round+1, c, srv)
				}
				us := 1e6 / r.PerServerCPU
				if srv == crefTransport {
					res[i].C = append(res[i].C, us)
				} else {
					res[i].Go = append(res[i].Go, us)
				}
				fmt.Fprintf(stderr, "round %d: %v: %s server %.2f µs per echo, %.0f echoes/s\n", round+1, c, srv, us, r.EchoesPerSec)
			}
		}
	}
	printServerTable(stdout, res)
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}
