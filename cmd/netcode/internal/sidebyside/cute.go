package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cuteEnv names the environment variable that gives the directory of
// Cute Framework's cute_net.h (libraries/cute in
// github.com/RandyGaul/cute_framework).
const cuteEnv = "CUTE_NET_SRC"

// cuteMaxClients is cute_net.h's CN_PROTOCOL_SERVER_MAX_CLIENTS: the C
// code has no figure above.
const cuteMaxClients = 32

// cuteFlags are Cute Framework's own flags for its C code (its CMake
// build's: -O2, and SSE4.1 for libhydrogen's Gimli).
var cuteFlags = []string{"-O2", "-msse4.1"}

// buildCuteBench builds cuteref/cutebench.c against the cute_net.h in
// src, into dir.
func buildCuteBench(ctx context.Context, cc, src, self, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(src, "cute_net.h")); err != nil {
		return "", fmt.Errorf("%s=%s: %w (it needs cute_net.h: libraries/cute of github.com/RandyGaul/cute_framework)", cuteEnv, src, err)
	}
	bin := filepath.Join(dir, "cutebench")
	args := append(slices.Clone(cuteFlags), "-I"+src, "-o", bin, filepath.Join(self, "cuteref", "cutebench.c"))
	if out, err := exec.CommandContext(ctx, cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", cc, strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// cuteResult is one configuration and mode's rounds: C (none without
// CUTE_NET_SRC), Go, and in mode proto the netcode phase of the same
// `netcode bench -dialect cute`.
type cuteResult struct {
	Config         crefConfig
	Mode           string
	C, Go, Netcode []echoFigures
	// cute -floor, at one client and window 1: package cute's harness
	// (cuteecho, in mode proto too) with the runtime's GOMAXPROCS and
	// with 1, and the raw UDP ping-pong of its shape with each.
	Echo, Echo1, Raw, Raw1 []echoFigures
}

func runCute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute", stderr)
	configs := fs.String("configs", "1x8x100,16x8x100,1x1x100", "CLIENTSxWINDOWxSIZE, comma-separated")
	modes := fs.String("modes", strings.Join(cuteModes, ","), "proto: the bare protocol layer (cn_protocol_* against netcode bench -dialect cute); unreliable, reliable: the client/server layer's messages (cn_client_*/cn_server_* against cute's default Conns' Send and ReadMessage, cuteecho.go)")
	rounds := fs.Int("rounds", 3, "rounds, C and Go interleaved; the table gives medians")
	duration := fs.Duration("duration", 3*time.Second, "measured window of each run (after a 1 s warm-up)")
	worktree := fs.String("worktree", "", "the netcode repository whose cmd/netcode to measure in mode proto (default: the one this module is in)")
	cc := fs.String("cc", "cc", "the C compiler")
	profile := fs.String("cpuprofile", "", "write each Go client/server-layer run's CPU profile (the measured window) to this prefix plus -MODE-CLIENTSxWINDOWxSIZE-rROUND.pprof")
	floor := fs.Bool("floor", false, "at each one-client window-1 configuration, also run package cute's harness (cuteecho, in mode proto too) with GOMAXPROCS=1, and the raw UDP floor of its shape (pingpong: one client goroutine writing then reading, one server goroutine) with the runtime's GOMAXPROCS and with 1, interleaved: whether the gap at window 1 is the runtime's or the library's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ms, err := nameList(*modes, cuteModes...)
	if err != nil {
		return err
	}
	cs, self, repo, dir, err := comparisonSetup("cute", *configs, *worktree, *rounds, *duration)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var cbin string
	if src := os.Getenv(cuteEnv); src == "" {
		fmt.Fprintf(stdout, "%s is not set: no C column. Set it to a directory holding cute_net.h (libraries/cute of github.com/RandyGaul/cute_framework); building it needs a C compiler.\n", cuteEnv)
	} else if cbin, err = buildCuteBench(ctx, *cc, src, self, dir); err != nil {
		return err
	}
	gobin := ""
	if slices.Contains(ms, "proto") {
		if gobin, err = buildNetcode(ctx, repo, dir); err != nil {
			return err
		}
	}
	secs := strconv.FormatFloat(duration.Seconds(), 'f', -1, 64)

	fmt.Fprintf(stdout, "cute: Cute Framework's cute_net.h (%s) vs package cute, one process each (server and clients), %v windows after 1 s warm-up, %d rounds\nuptime before: %s\n",
		strings.Join(cuteFlags, " "), *duration, *rounds, uptime())
	var res []cuteResult
	for _, c := range cs {
		for _, m := range ms {
			res = append(res, cuteResult{Config: c, Mode: m})
		}
	}
	for round := range *rounds {
		for i := range res {
			r := &res[i]
			c := r.Config
			for _, side := range rotated([]string{"c", "go"}, round+i) {
				switch {
				case side == "c" && cbin != "" && c.Clients <= cuteMaxClients:
					out, err := exec.CommandContext(ctx, cbin, r.Mode, strconv.Itoa(c.Clients), strconv.Itoa(c.Window), strconv.Itoa(c.Size), secs).Output()
					if err != nil {
						return fmt.Errorf("cutebench %s %v: %w", r.Mode, c, err)
					}
					f, err := parseCbench(string(out))
					if err != nil {
						return err
					}
					r.C = append(r.C, f)
				case side == "go" && r.Mode == "proto":
					nc, cu, err := runNetcodeBench(ctx, gobin, c, *duration, "-dialect", "cute")
					if err != nil {
						return err
					}
					r.Go, r.Netcode = append(r.Go, cu), append(r.Netcode, nc)
				case side == "go":
					args := []string{cuteechoArg, "-mode", r.Mode, "-clients", strconv.Itoa(c.Clients), "-window", strconv.Itoa(c.Window),
						"-size", strconv.Itoa(c.Size), "-duration", secs + "s"}
					if *profile != "" {
						args = append(args, "-cpuprofile", fmt.Sprintf("%s-%s-%dx%dx%d-r%d.pprof", *profile, r.Mode, c.Clients, c.Window, c.Size, round+1))
					}
					f, err := runSelf(ctx, args...)
					if err != nil {
						return err
					}
					r.Go = append(r.Go, f)
				}
			}
			if *floor && c.Clients == 1 && c.Window == 1 {
				if err := runCuteFloor(ctx, r, secs); err != nil {
					return err
				}
			}
			fmt.Fprintf(stderr, "round %d: %v, %s: %s\n", round+1, c, r.Mode, crefResult{C: r.C, Go: r.Go, Floor: r.Raw}.last())
		}
	}
	printCuteTable(stdout, res)
	printCuteFloorTable(stdout, res)
	fmt.Fprintf(stdout, "uptime after: %s\n", uptime())
	return nil
}

// printCuteTable writes `sidebyside cute`'s table: for each configuration
// and mode the medians of C's and Go's echoes per CPU-second, Go/C of the
// medians and by round, and the p50 round trips; in mode proto also
// Cute/netcode of the same `netcode bench -dialect cute`.
func printCuteTable(w io.Writer, rs []cuteResult) {
	perCPU := func(f echoFigures) float64 { return f.PerCPU }
	p50 := func(f echoFigures) float64 { return float64(f.P50) }
	ratio := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	fmt.Fprintln(w, "| clients, window, payload | layer | Cute Framework echoes per CPU-s | package cute | Go / C | Go / C by round | p50 C / Go |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rs {
		g := median(values(r.Go, perCPU))
		c, gc, byRound, cp50 := "—", "—", "—", "—"
		if len(r.C) > 0 {
			cm := median(values(r.C, perCPU))
			c, gc = kilo(cm), ratio(g/cm)
			var ratios []float64
			for i := range min(len(r.C), len(r.Go)) {
				ratios = append(ratios, r.Go[i].PerCPU/r.C[i].PerCPU)
			}
			byRound = rounds(ratios, ratio)
			cp50 = dur(time.Duration(median(values(r.C, p50))))
		}
		fmt.Fprintf(w, "| %v | %s | %s | %s | %s | %s | %s / %s |\n", r.Config, r.Mode, c, kilo(g), gc, byRound,
			cp50, dur(time.Duration(median(values(r.Go, p50)))))
	}
	fmt.Fprintln(w, "\nrounds, echoes per CPU-s:")
	for _, r := range rs {
		fmt.Fprintf(w, "  %v, %s: C [%s] Go [%s]", r.Config, r.Mode, rounds(values(r.C, perCPU), kilo), rounds(values(r.Go, perCPU), kilo))
		if len(r.Netcode) > 0 {
			fmt.Fprintf(w, " netcode in the same bench [%s], cute / netcode %s", rounds(values(r.Netcode, perCPU), kilo),
				ratio(median(values(r.Go, perCPU))/median(values(r.Netcode, perCPU))))
		}
		fmt.Fprintln(w)
	}
}

// runCuteFloor runs cute -floor's Go sides of r's round at one client and
// window 1: package cute's harness with the runtime's GOMAXPROCS (in mode
// proto, where the round's Go figure is the bench's; else that figure)
// and with 1, and the raw UDP ping-pong with each.
func runCuteFloor(ctx context.Context, r *cuteResult, secs string) error {
	size := strconv.Itoa(r.Config.Size)
	echo := []string{cuteechoArg, "-mode", r.Mode, "-clients", "1", "-window", "1", "-size", size, "-duration", secs + "s"}
	ping := []string{pingpongArg, "-size", size, "-duration", secs + "s"}
	one := []string{"-gomaxprocs", "1"}
	type run struct {
		to   *[]echoFigures
		args []string
	}
	runs := []run{{&r.Echo1, slices.Concat(echo, one)}, {&r.Raw, ping}, {&r.Raw1, slices.Concat(ping, one)}}
	if r.Mode == "proto" {
		runs = append(runs, run{&r.Echo, echo})
	} else {
		r.Echo = append(r.Echo, r.Go[len(r.Go)-1])
	}
	for _, v := range runs {
		f, err := runSelf(ctx, v.args...)
		if err != nil {
			return fmt.Errorf("cute -floor, %s %v: %w", r.Mode, r.Config, err)
		}
		*v.to = append(*v.to, f)
	}
	return nil
}

// printCuteFloorTable writes, for the rows that ran cute -floor, echoes
// per CPU-second (medians) of Cute Framework, package cute's harness and
// the raw UDP ping-pong, each Go side with the runtime's GOMAXPROCS and
// with 1; each one's ratio to C, and CPU µs per echo.
func printCuteFloorTable(w io.Writer, rs []cuteResult) {
	var rows []floorRow
	for _, r := range rs {
		if len(r.Raw) == 0 || len(r.C) == 0 {
			continue
		}
		rows = append(rows, floorRow{label: r.Config.String() + " | " + r.Mode, names: []string{"C", "cute", "cute 1", "raw Go", "raw Go 1"},
			cols: [][]echoFigures{r.C, r.Echo, r.Echo1, r.Raw, r.Raw1}})
	}
	writeFloorTable(w, "| clients, window, payload | layer | Cute Framework | package cute | package cute, GOMAXPROCS=1 | raw Go | raw Go, GOMAXPROCS=1 | / C: cute, cute 1, raw, raw 1 | µs of CPU per echo: C, cute, cute 1, raw, raw 1 |", rows)
}
