package main

// sidebyside tables: every figure of the README's Performance tables,
// rerun for two revisions of this repository in one interleaved run.

import (
	"context"
	"errors"
	"flag"
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

// benchRow is one `netcode bench` row of the README's table: its command
// as the README gives it, and the figures read from each run.
type benchRow struct {
	Key    string   // its name for -rows
	Readme string   // the README's command, for the table
	Args   []string // the flags tables runs, but -duration
	// Duration and Quick are its measured window, as in the README and
	// with -quick.
	Duration, Quick time.Duration
	Baseline        bool
	Figures         []figureSpec
}

// benchRows are the README's `netcode bench` rows. The first is
// `-rounds 3` in the README: tables runs it -rounds 1 in each of its own
// rounds, interleaved with the other revision's, so that its medians of
// three rounds stand for the README's.
var benchRows = []benchRow{
	{
		Key: "bench64", Readme: "bench -clients 64 -baseline -rounds 3 -duration 5s",
		Args: []string{"-clients", "64", "-baseline", "-rounds", "1"}, Duration: 5 * time.Second, Quick: time.Second, Baseline: true,
		Figures: []figureSpec{
			{"netcode echoes/s", higher, fmtRate, func(r benchJSON) float64 { return r.Netcode.RoundTripsPerSec }},
			{"raw UDP echoes/s", higher, fmtRate, func(r benchJSON) float64 { return r.Raw.RoundTripsPerSec }},
			{"netcode/raw echoes/s", higher, fmtRatio, func(r benchJSON) float64 { return r.Ratio }},
			{"netcode/raw echoes per CPU-second of the process", higher, fmtRatio, func(r benchJSON) float64 { return r.CPURatio }},
			{"allocations per packet", lower, fmtAlloc, func(r benchJSON) float64 { return *r.Netcode.AllocsPerPacket }},
		},
	},
	{
		Key: "bench4096", Readme: "bench -clients 4096 -rate 10 -duration 10s",
		Args: []string{"-clients", "4096", "-rate", "10"}, Duration: 10 * time.Second, Quick: 2 * time.Second,
		Figures: []figureSpec{
			{"clients connected", higher, fmtCount, func(r benchJSON) float64 { return float64(r.Netcode.Connected) }},
			{"payloads lost", lower, fmtCount, func(r benchJSON) float64 { return float64(*r.Netcode.Lost) }},
			{"p50 round trip", lower, fmtDur, func(r benchJSON) float64 { return float64(r.Netcode.P50) }},
			{"p99 round trip", lower, fmtDur, func(r benchJSON) float64 { return float64(r.Netcode.P99) }},
		},
	},
	{
		Key: "bench1", Readme: "bench -clients 1 -window 1 -baseline -duration 3s",
		Args: []string{"-clients", "1", "-window", "1", "-baseline"}, Duration: 3 * time.Second, Quick: time.Second, Baseline: true,
		Figures: []figureSpec{
			{"p50 round trip", lower, fmtDur, func(r benchJSON) float64 { return float64(r.Netcode.P50) }},
			{"raw UDP p50 round trip", lower, fmtDur, func(r benchJSON) float64 { return float64(r.Raw.P50) }},
			{"netcode/raw echoes/s", higher, fmtRatio, func(r benchJSON) float64 { return r.Ratio }},
		},
	},
}

// crefRowKey names the servers-only rows for -rows.
const crefRowKey = "cref"

// crefReadmeConfigs are the configurations of the README's row of
// `cref -server-only` (its defaults).
const crefReadmeConfigs = "1x8x100,16x8x100,64x8x100,1x1x100"

// The servers-only rows' figures.
var (
	figGoOverC = figureSpec{Name: "Go/C echoes per server CPU-second", Better: higher, Format: fmtRatio}
	figGoUs    = figureSpec{Name: "Go server µs per echo", Better: lower, Format: fmtUs}
	figCUs     = figureSpec{Name: "C server µs per echo", Better: lower, Format: fmtUs}
)

// revOrder is the order in which round runs the two revisions (0 before,
// 1 after): before first in odd rounds (counted from 1), after first in
// even ones, so that neither always runs on a machine the other has just
// warmed or loaded.
func revOrder(round int) []int {
	if round%2 == 0 {
		return []int{0, 1}
	}
	return []int{1, 0}
}

// tablesUsage is what tables -h prints after its flags.
const tablesUsage = `
Reruns every figure of the README's Performance tables (the netcode bench
rows and cref -server-only) for two revisions of this repository, in one
run interleaved by round, and prints one markdown table: each figure by
round and as medians, before and after, and after/before. Each revision
is a checkout (git archive) in a temporary directory, where its
cmd/netcode and its sidebyside (whose netcode echo server is the Go server
of the servers-only rows) are built. With the defaults it takes about 10
minutes; -quick runs one short round of everything (about 2 minutes), to
try it. Set NETCODE_C_SRC for the C reference's server (see cref).
`

func runTables(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tables", stderr)
	before := fs.String("before", "", "the revision before (a commit, branch or tag of this repository), e.g. 630cba9")
	after := fs.String("after", "HEAD", "the revision after")
	nRounds := fs.Int("rounds", 3, "rounds, each running every row for both revisions")
	quick := fs.Bool("quick", false, "a trial: one round (unless -rounds is given) of short windows")
	rowList := fs.String("rows", "bench64,bench4096,bench1,"+crefRowKey, "the rows to run, comma-separated")
	cc := fs.String("cc", "cc", "the C compiler, for the C reference's server")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sidebyside tables -before REV [-after REV] [flags]")
		fs.PrintDefaults()
		fmt.Fprint(stderr, tablesUsage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick && !set["rounds"] {
		*nRounds = 1
	}
	keys := []string{crefRowKey}
	for _, r := range benchRows {
		keys = append(keys, r.Key)
	}
	rowKeys, err := nameList(*rowList, keys...)
	if err != nil {
		return err
	}
	if *before == "" || *after == "" || *nRounds < 1 {
		return errors.New("tables needs -before and -after revisions and -rounds at least 1")
	}
	start := time.Now()
	self, repo, err := moduleDirs()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sidebyside-tables-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var rows []benchRow
	for _, r := range benchRows {
		if slices.Contains(rowKeys, r.Key) {
			rows = append(rows, r)
		}
	}
	withCref := slices.Contains(rowKeys, crefRowKey)
	var revs [2]revision
	for i, ref := range []string{*before, *after} {
		fmt.Fprintf(stderr, "tables: building %s\n", ref)
		if revs[i], err = prepareRevision(ctx, repo, ref, filepath.Join(tmp, strconv.Itoa(i)), withCref); err != nil {
			return err
		}
	}
	h := tableHeader{Before: revs[0], After: revs[1], Date: start, Rounds: *nRounds, Quick: *quick, Clients: "netcode of " + repo}
	var cserver string
	if withCref {
		if src := os.Getenv(crefEnv); src == "" {
			h.Notes = append(h.Notes, crefEnv+" was not set: no C reference's server, so no Go/C")
		} else {
			progs, err := buildCref(ctx, *cc, src, self, tmp)
			if err != nil {
				return err
			}
			cserver = progs.cserver
		}
	}
	if slices.Contains(rowKeys, "bench64") {
		h.Notes = append(h.Notes, "bench -clients 64 runs -rounds 1 in each round: its medians of the rounds stand for the README's -rounds 3")
	}

	t := &tablesRun{revs: revs, cserver: cserver, quick: *quick, warmup: time.Second, crefDuration: 3 * time.Second, stderr: stderr}
	if *quick {
		t.warmup, t.crefDuration = 500*time.Millisecond, time.Second
	}
	var configs []crefConfig
	if withCref {
		if configs, err = parseCrefConfigs(crefReadmeConfigs); err != nil {
			return err
		}
	}
	figs := t.figures(rows, configs)

	h.LoadStart = uptime()
	fmt.Fprintf(stderr, "tables: %d rounds, about %v with the defaults; load: %s\n", *nRounds, 10*time.Minute, h.LoadStart)
	var runErr error
	for round := range *nRounds {
		if runErr = t.round(ctx, round); runErr != nil {
			// The table of the rounds so far, and why it stopped.
			h.Notes = append(h.Notes, "stopped early: "+strings.Join(strings.Fields(runErr.Error()), " "))
			break
		}
	}
	h.LoadEnd = uptime()
	h.Took = time.Since(start)
	printTables(stdout, h, figs)
	return runErr
}

// tablesRun is a run of tables in progress: the revisions and what each
// round runs.
type tablesRun struct {
	revs                 [2]revision
	cserver              string // the C reference's server, if built
	quick                bool
	warmup, crefDuration time.Duration // of the servers-only runs
	stderr               io.Writer

	rows      []benchRow
	benchFigs [][]*figure // by row, its figures
	configs   []crefConfig
	crefFigs  [][3]*figure // by configuration: Go/C, Go µs, C µs
}

// figures makes the figures of rows and of the servers-only
// configurations, and returns them in the table's order.
func (t *tablesRun) figures(rows []benchRow, configs []crefConfig) []*figure {
	var figs []*figure
	t.rows, t.configs = rows, configs
	t.benchFigs = make([][]*figure, len(rows))
	for i, r := range rows {
		for _, spec := range r.Figures {
			f := &figure{Row: "`" + r.Readme + "`", figureSpec: spec}
			t.benchFigs[i] = append(t.benchFigs[i], f)
			figs = append(figs, f)
		}
	}
	for _, c := range configs {
		row := fmt.Sprintf("`cref -server-only` %v", c)
		fc := [3]*figure{{Row: row, figureSpec: figGoOverC}, {Row: row, figureSpec: figGoUs}, {Row: row, figureSpec: figCUs, Shared: true}}
		t.crefFigs = append(t.crefFigs, fc)
		figs = append(figs, fc[0], fc[1])
		if t.cserver != "" {
			figs = append(figs, fc[2])
		}
	}
	return figs
}

// round runs every row once for each revision, in revOrder(round).
func (t *tablesRun) round(ctx context.Context, round int) error {
	for i, r := range t.rows {
		d := r.Duration
		if t.quick {
			d = r.Quick
		}
		for _, rev := range revOrder(round) {
			res, err := runBenchRow(ctx, t.revs[rev].Netcode, r, d)
			if err != nil {
				return fmt.Errorf("round %d, %s, %s: %w", round+1, r.Readme, t.revs[rev].Ref, err)
			}
			var line []string
			for _, f := range t.benchFigs[i] {
				x := f.Read(res)
				f.add(rev, x)
				line = append(line, f.Name+" "+f.Format(x))
			}
			fmt.Fprintf(t.stderr, "round %d: %s: %s: %s (load %s)\n", round+1, t.revs[rev].Ref, r.Readme, strings.Join(line, ", "), loadavg())
		}
	}
	for i, c := range t.configs {
		if err := t.crefRound(ctx, round, c, t.crefFigs[i]); err != nil {
			return err
		}
	}
	return nil
}

// crefRound runs one round of one servers-only configuration: the C
// reference's server (if built) and each revision's Go server, in an
// order that rotates by round, under the same clients, and adds each
// server's µs per echo and each revision's Go/C to figs (Go/C, Go µs, C
// µs).
func (t *tablesRun) crefRound(ctx context.Context, round int, c crefConfig, figs [3]*figure) error {
	cserver, revs := t.cserver, t.revs
	servers := []int{0, 1}
	if cserver != "" {
		servers = []int{-1, 0, 1} // -1: the C reference's
	}
	var cUs float64
	goUs := map[int]float64{}
	for _, srv := range rotated(servers, round) {
		cfg := dgConfig{Transport: baseTransport, Clients: c.Clients, Window: c.Window, Size: c.Size,
			Warmup: t.warmup, Duration: t.crefDuration, ProcCPU: true}
		name := "C reference"
		if srv < 0 {
			cfg.Transport, cfg.CrefExe = crefTransport, cserver
		} else {
			cfg.BaseExe, name = revs[srv].Server, revs[srv].Ref
		}
		r, err := runDatagram(ctx, cfg)
		if err == nil && r.PerServerCPU <= 0 {
			err = errors.New("no server CPU time measured")
		}
		if err != nil {
			return fmt.Errorf("round %d, cref -server-only %v, %s server: %w", round+1, c, name, err)
		}
		us := 1e6 / r.PerServerCPU
		if srv < 0 {
			cUs = us
		} else {
			goUs[srv] = us
		}
		fmt.Fprintf(t.stderr, "round %d: cref -server-only %v: %s server %.2f µs per echo, %.0f echoes/s (load %s)\n", round+1, c, name, us, r.EchoesPerSec, loadavg())
	}
	for rev := range 2 {
		figs[1].add(rev, goUs[rev])
		if cserver != "" {
			figs[0].add(rev, cUs/goUs[rev])
		}
	}
	if cserver != "" {
		figs[2].add(0, cUs)
	}
	return nil
}

// runBenchRow runs `netcode bench` (gobin) with r's flags, a window of
// duration, -q and -json, and reads its result.
func runBenchRow(ctx context.Context, gobin string, r benchRow, duration time.Duration) (benchJSON, error) {
	args := append(append([]string{"bench"}, r.Args...), "-duration", duration.String(), "-q", "-json")
	out, err := output(ctx, gobin, args...)
	if err != nil {
		return benchJSON{}, err
	}
	return parseBenchJSON(out, r.Baseline)
}

// prepareRevision resolves ref in repo, checks it out (git archive) into
// dir/src and builds its cmd/netcode and, with server, its sidebyside
// (its netcode echo server is `sidebyside child netcode`) into dir.
func prepareRevision(ctx context.Context, repo, ref, dir string, server bool) (revision, error) {
	rev := revision{Ref: ref, Dir: filepath.Join(dir, "src")}
	var err error
	if rev.Hash, rev.Subject, err = resolve(ctx, repo, ref); err != nil {
		return rev, err
	}
	if err := checkout(ctx, repo, rev.Hash, rev.Dir); err != nil {
		return rev, err
	}
	if rev.Netcode, err = buildNetcode(ctx, rev.Dir, dir); err != nil {
		return rev, err
	}
	if !server {
		return rev, nil
	}
	mod := filepath.Join(rev.Dir, "cmd", "netcode", "internal", "sidebyside")
	if _, err := os.Stat(filepath.Join(mod, "go.mod")); err != nil {
		return rev, fmt.Errorf("%s has no cmd/netcode/internal/sidebyside, whose netcode echo server the cref row runs: %w", ref, err)
	}
	rev.Server = filepath.Join(dir, "sidebyside")
	build := exec.CommandContext(ctx, "go", "build", "-o", rev.Server, ".")
	build.Dir = mod
	if out, err := build.CombinedOutput(); err != nil {
		return rev, fmt.Errorf("building the sidebyside of %s: %w\n%s", ref, err, out)
	}
	return rev, nil
}

// resolve returns the commit ref names in repo and its subject line.
func resolve(ctx context.Context, repo, ref string) (hash, subject string, err error) {
	if hash, err = git(ctx, repo, "rev-parse", "--verify", "--end-of-options", ref+"^{commit}"); err != nil {
		return "", "", err
	}
	subject, err = git(ctx, repo, "log", "-1", "--format=%s", hash)
	return hash, subject, err
}

// git runs git in repo and returns its output, trimmed.
func git(ctx context.Context, repo string, args ...string) (string, error) {
	out, err := output(ctx, "git", append([]string{"-C", repo}, args...)...)
	return strings.TrimSpace(string(out)), err
}

// checkout writes the tree of commit hash of repo into dir (a new
// directory), as git archive gives it: nothing is written to the
// repository, so an interrupted run leaves no worktree to prune.
func checkout(ctx context.Context, repo, hash, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", hash)
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	var aerr, terr strings.Builder
	archive.Stderr, tar.Stderr = &aerr, &terr
	if err := archive.Start(); err != nil {
		return err
	}
	if err := tar.Run(); err != nil {
		archive.Process.Kill()
		archive.Wait()
		return fmt.Errorf("tar -x of %s: %w: %s", hash, err, terr.String())
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", hash, err, aerr.String())
	}
	return nil
}

// loadavg returns the first three fields of /proc/loadavg, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
