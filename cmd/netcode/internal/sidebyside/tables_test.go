package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cmd/netcode/internal/bench"
)

// benchRowByKey returns the bench row named key.
func benchRowByKey(t *testing.T, key string) benchRow {
	t.Helper()
	for _, r := range benchRows {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("no bench row %q", key)
	return benchRow{}
}

// TestBenchRowFigures reads each row's figures out of outputs of
// `netcode bench -json` recorded at the two revisions of issue 32's
// comparison (testdata/tables: the rows' flags with 1 s and 2 s windows).
func TestBenchRowFigures(t *testing.T) {
	for _, tc := range []struct {
		row, file string
		want      []float64 // the row's figures, in order
	}{
		{"bench64", "bench64-630cba9.json", []float64{60907.58890361921, 111414.9182084692, 0.5466735503916506, 0.9374837407861564, 0.00012381004787321851}},
		{"bench64", "bench64-836e255.json", []float64{135739.9478575156, 128652.2107534295, 1.0550922293723364, 1.0870080189440305, 0.00018074553920009254}},
		{"bench4096", "bench4096-630cba9.json", []float64{4096, 51427, 1375731712, 3154116608}},
		{"bench4096", "bench4096-836e255.json", []float64{4096, 85300, 922746880, 2113929216}},
		{"bench1", "bench1-630cba9.json", []float64{14080, 17920, 1.2768197457886126}},
		{"bench1", "bench1-836e255.json", []float64{17920, 16128, 0.9462986501279337}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			row := benchRowByKey(t, tc.row)
			out, err := os.ReadFile(filepath.Join("testdata", "tables", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res, err := parseBenchJSON(out, row.Baseline)
			if err != nil {
				t.Fatal(err)
			}
			if len(row.Figures) != len(tc.want) {
				t.Fatalf("row %s has %d figures, the test %d", tc.row, len(row.Figures), len(tc.want))
			}
			for i, f := range row.Figures {
				if got := f.Read(res); got != tc.want[i] {
					t.Errorf("%s: %s = %v, want %v", tc.row, f.Name, got, tc.want[i])
				}
			}
		})
	}
}

// TestParseBenchJSONRejects checks that an output lacking a figure a row
// reads is an error, never a zero in the table.
func TestParseBenchJSONRejects(t *testing.T) {
	recorded, err := os.ReadFile(filepath.Join("testdata", "tables", "bench64-836e255.json"))
	if err != nil {
		t.Fatal(err)
	}
	// edit returns the recorded output changed by f.
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(recorded, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	phase := func(m map[string]any, name string) map[string]any { return m[name].(map[string]any) }
	for _, tc := range []struct {
		name     string
		out      []byte
		baseline bool
	}{
		{"empty", nil, false},
		{"the text report", []byte("clients 64, payload 64 bytes, flat out, window 8\n== netcode\n"), false},
		{"truncated", recorded[:len(recorded)/2], false},
		{"no netcode phase", edit(func(m map[string]any) { delete(m, "Netcode") }), false},
		{"nothing echoed", edit(func(m map[string]any) { phase(m, "Netcode")["RoundTrips"] = 0 }), false},
		{"no p50", edit(func(m map[string]any) { delete(phase(m, "Netcode"), "P50") }), false},
		{"p99 below p50", edit(func(m map[string]any) { phase(m, "Netcode")["P99"] = 1 }), false},
		{"no Lost", edit(func(m map[string]any) { delete(phase(m, "Netcode"), "Lost") }), false},
		{"no AllocsPerPacket", edit(func(m map[string]any) { delete(phase(m, "Netcode"), "AllocsPerPacket") }), false},
		{"baseline without a raw phase", edit(func(m map[string]any) { m["Raw"] = nil }), true},
		{"raw phase echoed nothing", edit(func(m map[string]any) { phase(m, "Raw")["RoundTripsPerSec"] = 0 }), true},
		{"baseline without a ratio", edit(func(m map[string]any) { delete(m, "Ratio") }), true},
		{"baseline without a CPU ratio", edit(func(m map[string]any) { m["CPURatio"] = 0 }), true},
	} {
		if _, err := parseBenchJSON(tc.out, tc.baseline); err == nil {
			t.Errorf("%s: parsed", tc.name)
		}
	}
	if _, err := parseBenchJSON(recorded, true); err != nil {
		t.Errorf("the recorded output: %v", err)
	}
}

// TestParseBenchJSONOfResult parses what this tree's bench.Result
// marshals to, so that a field renamed in the load tool fails here.
func TestParseBenchJSONOfResult(t *testing.T) {
	res := bench.Result{
		Netcode:  bench.Phase{Clients: 4, Connected: 3, RoundTrips: 10, RoundTripsPerSec: 5, P50: time.Microsecond, P99: time.Millisecond, Lost: 2, AllocsPerPacket: 0.5},
		Raw:      &bench.Phase{RoundTrips: 20, RoundTripsPerSec: 7, P50: 2 * time.Microsecond, P99: 3 * time.Microsecond},
		Ratio:    5.0 / 7,
		CPURatio: 1.5,
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseBenchJSON(b, true)
	if err != nil {
		t.Fatal(err)
	}
	n := got.Netcode
	if n.Clients != 4 || n.Connected != 3 || n.RoundTrips != 10 || n.RoundTripsPerSec != 5 || n.P50 != time.Microsecond ||
		n.P99 != time.Millisecond || *n.Lost != 2 || *n.AllocsPerPacket != 0.5 ||
		got.Raw.RoundTripsPerSec != 7 || got.Raw.P50 != 2*time.Microsecond || got.Ratio != 5.0/7 || got.CPURatio != 1.5 {
		t.Errorf("parsed %+v, netcode %+v, raw %+v from %+v", got, n, got.Raw, res)
	}
}

func TestRevOrder(t *testing.T) {
	for round, want := range [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}} {
		if got := revOrder(round); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("revOrder(%d) = %v, want %v", round, got, want)
		}
	}
}

// TestPrintTables checks the table's medians, ratios and the cells of a
// shared figure, of a figure with no rounds, and of zeros.
func TestPrintTables(t *testing.T) {
	rate := figureSpec{Name: "netcode echoes/s", Better: higher, Format: fmtRate}
	figs := []*figure{
		{Row: "`bench a`", figureSpec: rate, Before: []float64{100e3, 300e3, 200e3}, After: []float64{250e3, 210e3, 220e3}},
		{Row: "`bench a`", figureSpec: figureSpec{Name: "allocations per packet", Better: lower, Format: fmtAlloc}, Before: []float64{0, 0}, After: []float64{0, 0}},
		{Row: "`cref x`", figureSpec: figGoOverC},
		{Row: "`cref x`", figureSpec: figCUs, Before: []float64{5, 6, 7}, Shared: true},
		{Row: "`bench b`", figureSpec: figureSpec{Name: "p50 round trip", Better: lower, Format: fmtDur}, Before: []float64{15.1e3, 14e3}, After: []float64{2.5e6, 16e3}},
		{Row: "`bench c`", figureSpec: figureSpec{Name: "p99 round trip", Better: lower, Format: fmtDur}, Before: []float64{1.5e9, 1.2e9}, After: []float64{900e6, 1.1e6}},
		{Row: "`bench d`", figureSpec: rate, Before: []float64{10e3, 11e3}, After: []float64{9e3, 9.9e3}},
		{Row: "`bench e`", figureSpec: rate, Before: []float64{10e3, 11e3}, After: []float64{12e3}},
	}
	h := tableHeader{Before: revision{Ref: "630cba9", Hash: "630cba99", Subject: "before\n"}, After: revision{Ref: "HEAD", Hash: "836e2555", Subject: "after"},
		Date: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), Rounds: 3, Clients: "netcode of /repo", LoadStart: "load 1", LoadEnd: "load 2", Took: 95 * time.Second}
	var b bytes.Buffer
	printTables(&b, h, figs)
	out := b.String()
	for _, want := range []string{
		"(2026-11-29 07:00 UTC)",
		"- before: 630cba9 = 630cba99 (before)\n",
		"- after: HEAD = 836e2555 (after)\n",
		"- load at start: load 1\n- load at end: load 2\n- took 1m35s\n",
		"| `bench a` | netcode echoes/s | higher | 100.0k 300.0k 200.0k | 250.0k 210.0k 220.0k | 200.0k | 220.0k | 1.10 | within noise |\n",
		"|  | allocations per packet | lower | 0.0000 0.0000 | 0.0000 0.0000 | 0.0000 | 0.0000 | 1 (both 0) | within noise |\n",
		"| `cref x` | Go/C echoes per server CPU-second | higher | — | — | — | — | — | — |\n",
		"|  | C server µs per echo | lower | 5.00 6.00 7.00 | (same runs) | 6.00 | (same runs) | — | — |\n",
		"| `bench b` | p50 round trip | lower | 15.1 µs 14.0 µs | 2.50 ms 16.0 µs | 14.6 µs | 1.26 ms | 86.46 | worse |\n",
		"| `bench c` | p99 round trip | lower | 1.50 s 1.20 s | 900.0 ms 1.10 ms | 1.35 s | 450.6 ms | 0.33 | better |\n",
		"| `bench d` | netcode echoes/s | higher | 10.0k 11.0k | 9.0k 9.9k | 10.5k | 9.4k | 0.90 | worse |\n",
		"| `bench e` | netcode echoes/s | higher | 10.0k 11.0k | 12.0k | 10.5k | 12.0k | 1.14 | — |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "-quick") {
		t.Errorf("a full run's table says -quick:\n%s", out)
	}
	h.Quick = true
	b.Reset()
	printTables(&b, h, figs)
	if !strings.Contains(b.String(), "-quick: short windows, a trial") {
		t.Errorf("a -quick run's table does not say so:\n%s", b.String())
	}
}

// TestTablesFlags checks the flags that end a run before anything is
// built.
func TestTablesFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-after", "HEAD"},
		{"-before", "HEAD", "-after", ""},
		{"-before", "HEAD", "-rounds", "0"},
		{"-before", "HEAD", "-rows", "bench64,bench2"},
	} {
		var out, errb bytes.Buffer
		if err := runTables(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("tables %q: no error", args)
		}
		if out.Len() > 0 {
			t.Errorf("tables %q printed %q", args, out.String())
		}
	}
}

// TestCheckout resolves revisions of a repository made here and checks
// out the older one: its tree, and nothing written to the repository.
func TestCheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not on PATH")
		}
		t.Skip("git is not on PATH")
	}
	ctx := context.Background()
	repo := t.TempDir()
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	run := func(args ...string) string {
		t.Helper()
		out, err := git(ctx, repo, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("init", "-q")
	write := func(name, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/file", "one")
	run("add", ".")
	run("commit", "-q", "-m", "first")
	first := run("rev-parse", "HEAD")
	write("a/file", "two")
	write("b", "new")
	run("add", ".")
	run("commit", "-q", "-m", "second")

	if got, subject, err := resolve(ctx, repo, "HEAD~1"); err != nil || got != first || subject != "first" {
		t.Fatalf("HEAD~1 is %q (%q), %v; want %s (first)", got, subject, err, first)
	}
	dir := filepath.Join(t.TempDir(), "src")
	if err := checkout(ctx, repo, first, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "file")); err != nil || string(b) != "one" {
		t.Errorf("the checkout's a/file is %q, %v; want \"one\"", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("the checkout of the first commit has the second's file b: %v", err)
	}
	if st := run("status", "--porcelain"); st != "" {
		t.Errorf("the repository changed: %q", st)
	}
	for _, bad := range []string{"no-such-rev", "--output=x"} {
		if _, _, err := resolve(ctx, repo, bad); err == nil {
			t.Errorf("revision %q resolved", bad)
		}
	}
	if err := checkout(ctx, repo, "0123456789abcdef0123456789abcdef01234567", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("a checkout of no commit did not fail")
	}
}

// fakeNetcode writes a script that stands for a revision's cmd/netcode:
// it logs its arguments to log and prints the recorded output file, or
// fails if file is "".
func fakeNetcode(t *testing.T, name, file, log string) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("sh is not on PATH")
		}
		t.Skip("sh is not on PATH")
	}
	body := "echo \"$@\" >> " + log + "\n"
	if file == "" {
		body += "echo 'bench: connect: refused' >&2\nexit 1\n"
	} else {
		abs, err := filepath.Abs(filepath.Join("testdata", "tables", file))
		if err != nil {
			t.Fatal(err)
		}
		body += "cat " + abs + "\n"
	}
	exe := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestTablesRound runs rounds of the first bench row with stand-ins for
// the two revisions' netcode bench (the outputs recorded at 630cba9 and
// 836e255): the flags each run gets, the order of the runs by round, and
// that each run's figures land in its own revision's column.
func TestTablesRound(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	var stderr bytes.Buffer
	tr := &tablesRun{stderr: &stderr}
	tr.revs[0] = revision{Ref: "old", Netcode: fakeNetcode(t, "before", "bench64-630cba9.json", log)}
	tr.revs[1] = revision{Ref: "new", Netcode: fakeNetcode(t, "after", "bench64-836e255.json", log)}
	figs := tr.figures([]benchRow{benchRowByKey(t, "bench64")}, nil)
	for round := range 2 {
		if err := tr.round(context.Background(), round); err != nil {
			t.Fatal(err)
		}
	}
	rate := figs[0] // netcode echoes/s
	if rate.Name != "netcode echoes/s" || len(rate.Before) != 2 || len(rate.After) != 2 ||
		rate.Before[0] != 60907.58890361921 || rate.Before[1] != rate.Before[0] ||
		rate.After[0] != 135739.9478575156 || rate.After[1] != rate.After[0] {
		t.Errorf("%s: before %v, after %v", rate.Name, rate.Before, rate.After)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	args := "bench -clients 64 -baseline -rounds 1 -duration 5s -q -json"
	if got, want := string(b), strings.Repeat(args+"\n", 4); got != want {
		t.Errorf("the runs' flags:\n%s\nwant four of %q", got, args)
	}
	order := runOrder(stderr.String())
	if want := "old new new old"; order != want {
		t.Errorf("runs in the order %q, want %q:\n%s", order, want, stderr.String())
	}

	tr.quick = true
	tr.revs[1].Netcode = fakeNetcode(t, "failing", "", log)
	err = tr.round(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "round 1, bench -clients 64") || !strings.Contains(err.Error(), "new") ||
		!strings.Contains(err.Error(), "connect: refused") {
		t.Errorf("a failing run: %v", err)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "-duration 1s -q") {
		t.Errorf("-quick did not shorten the window: %s", b)
	}
}

// runOrder returns the revision of each progress line of a round, in
// order, space-separated.
func runOrder(progress string) string {
	var refs []string
	for line := range strings.Lines(progress) {
		if _, rest, ok := strings.Cut(line, ": "); ok {
			ref, _, _ := strings.Cut(rest, ":")
			refs = append(refs, ref)
		}
	}
	return strings.Join(refs, " ")
}
