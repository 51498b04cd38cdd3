package main

import (
	"bytes"
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

// parseNetcodeBench reads the JSON of `netcode bench -json`.
func parseNetcodeBench(out []byte) (echoFigures, error) {
	var r struct {
		Netcode struct {
			EchoesPerCPUSecond float64
			P50, P99           time.Duration
			RoundTrips         uint64
		}
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return echoFigures{}, fmt.Errorf("netcode bench -json: %w", err)
	}
	if r.Netcode.RoundTrips == 0 {
		return echoFigures{}, errors.New("netcode bench echoed nothing")
	}
	return echoFigures{PerCPU: r.Netcode.EchoesPerCPUSecond, P50: r.Netcode.P50, P99: r.Netcode.P99}, nil
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

// buildCbench builds cref/cbench.c against the C reference in src, into
// dir.
func buildCbench(ctx context.Context, cc, src, self, dir string) (string, error) {
	for _, f := range []string{"netcode.c", "netcode.h"} {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return "", fmt.Errorf("%s=%s: %w (it needs netcode.c and netcode.h 1.02 from github.com/mas-bandwidth/netcode)", crefEnv, src, err)
		}
	}
	obj, bin := filepath.Join(dir, "netcode.o"), filepath.Join(dir, "cbench")
	flags := []string{"-O2", "-DNDEBUG", "-I" + src}
	for _, args := range [][]string{
		append(flags, "-c", filepath.Join(src, "netcode.c"), "-o", obj),
		append(flags, "-o", bin, filepath.Join(self, "cref", "cbench.c"), obj, "-lsodium"),
	} {
		cmd := exec.CommandContext(ctx, cc, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s %s: %w\n%s(it needs libsodium: Debian's libsodium-dev)", cc, strings.Join(args, " "), err, out)
		}
	}
	return bin, nil
}

func runCref(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cref", stderr)
	configs := fs.String("configs", "1x8x100,16x8x100,64x8x100,1x1x100,1x8x64,16x8x64,64x8x64", "CLIENTSxWINDOWxSIZE, comma-separated")
	rounds := fs.Int("rounds", 3, "rounds, C and Go interleaved; the table gives medians")
	duration := fs.Duration("duration", 3*time.Second, "measured window of each run (after a 1 s warm-up)")
	worktree := fs.String("worktree", "", "the netcode repository whose cmd/netcode to measure (default: the one this module is in)")
	cc := fs.String("cc", "cc", "the C compiler")
	floor := fs.Bool("floor", false, "also run, at each one-client window-1 configuration, a bare Go UDP ping-pong (net.UDPConn, no protocol), interleaved: the floor of a Go echo there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cs, err := parseCrefConfigs(*configs)
	if err != nil {
		return err
	}
	if *rounds < 1 || *duration <= 0 {
		return errors.New("-rounds at least 1 and a positive -duration")
	}
	self, repo, err := moduleDirs()
	if err != nil {
		return err
	}
	if *worktree != "" {
		repo = *worktree
	}
	dir, err := os.MkdirTemp("", "sidebyside-cref-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cbench := ""
	if src := os.Getenv(crefEnv); src == "" {
		fmt.Fprintf(stdout, "%s is not set: no C column. Set it to a directory holding netcode.c and netcode.h (protocol 1.02) from github.com/mas-bandwidth/netcode; building them needs a C compiler and libsodium.\n", crefEnv)
	} else if cbench, err = buildCbench(ctx, *cc, src, self, dir); err != nil {
		return err
	}
	gobin := filepath.Join(dir, "netcode")
	build := exec.CommandContext(ctx, "go", "build", "-o", gobin, "./cmd/netcode")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s/cmd/netcode: %w\n%s", repo, err, out)
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
		cmd := exec.CommandContext(ctx, gobin, "bench", "-clients", strconv.Itoa(c.Clients), "-window", strconv.Itoa(c.Window),
			"-size", strconv.Itoa(c.Size), "-duration", duration.String(), "-q", "-json")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return echoFigures{}, fmt.Errorf("netcode bench %v: %w: %s", c, err, errb.String())
		}
		return parseNetcodeBench(out)
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
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}

// runFloor runs the bare Go UDP ping-pong (pingpong.go) at c's payload
// size in a process of its own: this executable.
func runFloor(ctx context.Context, c crefConfig, secs string) (echoFigures, error) {
	exe, err := os.Executable()
	if err != nil {
		return echoFigures{}, err
	}
	out, err := exec.CommandContext(ctx, exe, pingpongArg, "-size", strconv.Itoa(c.Size), "-duration", secs+"s").Output()
	if err != nil {
		return echoFigures{}, fmt.Errorf("pingpong %v: %w", c, err)
	}
	return parseCbench(string(out))
}
