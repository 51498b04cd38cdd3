package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cmd/netcode/internal/bench"
)

func TestParseCbench(t *testing.T) {
	out := "some log line\nresult clients=16 window=8 size=100 echoes_per_second=32638 echoes_per_cpu_second=91818 cpu_seconds=0.375 wall_seconds=1.055 p50_us=2327 p99_us=41405\n"
	got, err := parseCbench(out)
	want := echoFigures{PerCPU: 91818, P50: 2327 * time.Microsecond, P99: 41405 * time.Microsecond}
	if err != nil || got != want {
		t.Errorf("parseCbench = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{
		"",
		"clients 16 window 8 size 100: 24070 echoes/s, 84798 echoes per CPU-second\n", // the old format
		"result clients=16 echoes_per_cpu_second=91818 p50_us=2327\n",                 // no p99
		"result clients=16 echoes_per_cpu_second=x p50_us=1 p99_us=2\n",
	} {
		if _, err := parseCbench(bad); err == nil {
			t.Errorf("parseCbench(%q) did not fail", bad)
		}
	}
}

// TestParseNetcodeBench reads what netcode bench -json writes, from the
// load tool's own Result type, so that a renamed field fails here.
func TestParseNetcodeBench(t *testing.T) {
	res := bench.Result{Netcode: bench.Phase{EchoesPerCPUSecond: 84600, P50: 434 * time.Microsecond, P99: 2950 * time.Microsecond, RoundTrips: 250000}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	got, cute, err := parseNetcodeBench(b)
	want := echoFigures{PerCPU: 84600, P50: 434 * time.Microsecond, P99: 2950 * time.Microsecond}
	if err != nil || got != want || cute != (echoFigures{}) {
		t.Errorf("parseNetcodeBench = %+v, %+v, %v; want %+v and no Cute phase", got, cute, err, want)
	}
	res.Cute = &bench.Phase{EchoesPerCPUSecond: 61200, P50: 40 * time.Microsecond, P99: 90 * time.Microsecond, RoundTrips: 1000}
	b, _ = json.Marshal(res)
	wantCute := echoFigures{PerCPU: 61200, P50: 40 * time.Microsecond, P99: 90 * time.Microsecond}
	if got, cute, err = parseNetcodeBench(b); err != nil || got != want || cute != wantCute {
		t.Errorf("with -dialect cute: parseNetcodeBench = %+v, %+v, %v; want %+v, %+v", got, cute, err, want, wantCute)
	}
	res.Cute.RoundTrips = 0
	b, _ = json.Marshal(res)
	if _, _, err := parseNetcodeBench(b); err == nil {
		t.Error("a Cute phase that echoed nothing parsed")
	}
	res.Cute, res.Netcode.RoundTrips = nil, 0
	b, _ = json.Marshal(res)
	if _, _, err := parseNetcodeBench(b); err == nil {
		t.Error("a run that echoed nothing parsed")
	}
}

func TestParseCrefConfigs(t *testing.T) {
	got, err := parseCrefConfigs("1x8x100, 64x1x64")
	if err != nil || len(got) != 2 || got[0] != (crefConfig{1, 8, 100}) || got[1] != (crefConfig{64, 1, 64}) {
		t.Errorf("parseCrefConfigs = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1x8", "1x8x100x2", "0x8x100", "ax8x100"} {
		if _, err := parseCrefConfigs(bad); err == nil {
			t.Errorf("parseCrefConfigs(%q) did not fail", bad)
		}
	}
}

// TestCrefTable checks the medians, the ratio of the medians and the
// empty C column where the C reference did not run.
func TestCrefTable(t *testing.T) {
	f := func(perCPU float64, p50, p99 time.Duration) echoFigures { return echoFigures{perCPU, p50, p99} }
	rs := []crefResult{
		{Config: crefConfig{16, 8, 100},
			C:  []echoFigures{f(100e3, time.Millisecond, 2*time.Millisecond), f(90e3, 3*time.Millisecond, 5*time.Millisecond), f(110e3, 2*time.Millisecond, 4*time.Millisecond)},
			Go: []echoFigures{f(80e3, time.Millisecond, 3*time.Millisecond), f(85e3, 900*time.Microsecond, 4*time.Millisecond), f(70e3, 2*time.Millisecond, 9*time.Millisecond)}},
		{Config: crefConfig{512, 8, 100}, Go: []echoFigures{f(60e3, 20*time.Millisecond, 40*time.Millisecond)}},
	}
	var b bytes.Buffer
	printCrefTable(&b, rs)
	want := `| clients, window, payload | C echoes per CPU-s | Go echoes per CPU-s | Go / C | p50 C / Go | p99 C / Go |
|---|---|---|---|---|---|
| 16, 8, 100 B | 100.0k | 80.0k | 0.80 | 2.00 ms / 1.00 ms | 4.00 ms / 4.00 ms |
| 512, 8, 100 B | — | 60.0k | — | — / 20.0 ms | — / 40.0 ms |

rounds, echoes per CPU-s:
  16, 8, 100 B: C [100.0k 90.0k 110.0k] Go [80.0k 85.0k 70.0k]
  512, 8, 100 B: C [] Go [60.0k]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestPingpongRun runs the bare Go UDP ping-pong briefly and reads its
// result line as cref does. It asserts no figure of speed.
func TestPingpongRun(t *testing.T) {
	for _, procs := range []string{"0", "1"} {
		checkResultLine(t, runPingpong, "-size", "100", "-warmup", "50ms", "-duration", "200ms", "-gomaxprocs", procs)
	}
}

// checkResultLine runs a hidden command that prints a result line in
// cbench's format (run, with args), reads the line as cref and cute do and
// checks that its figures are plausible.
func checkResultLine(t *testing.T, run func(args []string, stdout, stderr io.Writer) error, args ...string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(args, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	f, err := parseCbench(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if f.PerCPU <= 0 || f.P99 < f.P50 {
		t.Errorf("%v: implausible figures %+v from %q", args, f, out.String())
	}
}

// TestFloorTable checks the floor table's medians and ratios, and that it
// leaves out the configurations that ran no ping-pong.
func TestFloorTable(t *testing.T) {
	f := func(perCPU float64) echoFigures { return echoFigures{PerCPU: perCPU} }
	rs := []crefResult{
		{Config: crefConfig{1, 8, 100}, C: []echoFigures{f(100e3)}, Go: []echoFigures{f(150e3)}},
		{Config: crefConfig{1, 1, 100}, C: []echoFigures{f(90e3), f(100e3), f(95e3)},
			Go: []echoFigures{f(60e3), f(70e3), f(65e3)}, Floor: []echoFigures{f(80e3), f(85e3), f(70e3)}},
	}
	var b bytes.Buffer
	printFloorTable(&b, rs)
	want := `
| clients, window, payload | C echoes per CPU-s | bare Go UDP | netcode | bare Go / C | netcode / bare Go |
|---|---|---|---|---|---|
| 1, 1, 100 B | 95.0k | 80.0k | 65.0k | 0.84 | 0.81 |
  rounds: bare Go [80.0k 85.0k 70.0k]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestServerTable checks cref -server-only's table: each round's µs per
// echo, the per-round ratios (C's µs over Go's: Go/C per CPU-second), the
// ratio of the medians, and a configuration with no C column.
func TestServerTable(t *testing.T) {
	rs := []serverResult{
		{Config: crefConfig{16, 8, 100}, C: []float64{5, 6, 4}, Go: []float64{4, 3, 4}},
		{Config: crefConfig{512, 8, 100}, Go: []float64{3}},
	}
	var b bytes.Buffer
	printServerTable(&b, rs)
	want := `| clients, window, payload | C server µs per echo | Go server µs per echo | Go/C per CPU-second | of the medians |
|---|---|---|---|---|
| 16, 8, 100 B | 5.00 6.00 4.00 | 4.00 3.00 4.00 | 1.25 2.00 1.00 | 1.25 |
| 512, 8, 100 B |  | 3.00 | — | — |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestCrefServerRun drives netcode's echo server and then, built from
// NETCODE_C_SRC, the C reference's (the machine lacks the C reference
// without it: that part says so and skips) with the Go clients, server CPU
// from /proc, and runs cbench briefly. It asserts no figure of speed.
func TestCrefServerRun(t *testing.T) {
	run := func(srv, cserver string) {
		t.Helper()
		res, err := runDatagram(context.Background(), dgConfig{Transport: srv, Clients: 2, Window: 2, Size: 100,
			Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, CrefExe: cserver, ProcCPU: true})
		if err != nil {
			t.Fatalf("%s server: %v", srv, err)
		}
		if res.EchoesPerSec <= 0 || res.P50 <= 0 {
			t.Errorf("%s server: implausible figures %+v", srv, res)
		}
	}
	run("netcode", "")

	src := os.Getenv(crefEnv)
	if src == "" {
		t.Skipf("%s is not set: no C reference source on this machine (github.com/mas-bandwidth/netcode, 1.02, and libsodium)", crefEnv)
	}
	self, _, err := moduleDirs()
	if err != nil {
		t.Fatal(err)
	}
	progs, err := buildCref(context.Background(), "cc", src, self, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run(crefTransport, progs.cserver)
	out, err := exec.Command(progs.cbench, "2", "2", "100", "0.3").Output()
	if err != nil {
		t.Fatalf("cbench: %v", err)
	}
	if f, err := parseCbench(string(out)); err != nil || f.PerCPU <= 0 {
		t.Errorf("cbench: %+v, %v", f, err)
	}
}

// TestAPIEchoRun runs the public-API harness briefly, on netcode and on
// raw UDP (cref -api-floor's floor), with the runtime's GOMAXPROCS and
// with 1, and reads its result line as cref -api does. It asserts no
// figure of speed.
func TestAPIEchoRun(t *testing.T) {
	for _, tr := range apiTransports {
		for _, procs := range []string{"0", "1"} {
			t.Run(tr+"/gomaxprocs="+procs, func(t *testing.T) {
				for _, window := range []string{"1", "4"} {
					checkResultLine(t, runAPIEcho, "-transport", tr, "-gomaxprocs", procs,
						"-clients", "2", "-window", window, "-size", "100", "-warmup", "50ms", "-duration", "200ms")
				}
			})
		}
	}
	var out, errb bytes.Buffer
	if err := runAPIEcho([]string{"-transport", "quic"}, &out, &errb); err == nil {
		t.Error("an unknown transport ran")
	}
	if err := runAPIEcho([]string{"-gomaxprocs", "-1"}, &out, &errb); err == nil {
		t.Error("a negative -gomaxprocs ran")
	}
}

// TestAPIFloorTable checks cref -api-floor's table: the medians of C, raw
// UDP and netcode with each GOMAXPROCS, their ratios to C, netcode over
// raw UDP, CPU µs per echo, and that it leaves out the configurations
// that ran no raw UDP or no C.
func TestAPIFloorTable(t *testing.T) {
	f := func(perCPU float64) echoFigures { return echoFigures{PerCPU: perCPU} }
	rs := []crefResult{
		{Config: crefConfig{1, 1, 100}, C: []echoFigures{f(100e3), f(80e3), f(90e3)}, Go: []echoFigures{f(60e3)},
			API: []echoFigures{f(40e3), f(45e3), f(50e3)}, API1: []echoFigures{f(50e3), f(60e3), f(55e3)},
			Raw: []echoFigures{f(60e3), f(50e3), f(70e3)}, Raw1: []echoFigures{f(80e3), f(75e3), f(125e3)}},
		{Config: crefConfig{1, 8, 100}, C: []echoFigures{f(100e3)}, Go: []echoFigures{f(150e3)}, API: []echoFigures{f(90e3)}},
		{Config: crefConfig{512, 8, 100}, Go: []echoFigures{f(100e3)}, API: []echoFigures{f(60e3)}, API1: []echoFigures{f(60e3)},
			Raw: []echoFigures{f(60e3)}, Raw1: []echoFigures{f(60e3)}},
	}
	var b bytes.Buffer
	printAPIFloorTable(&b, rs)
	want := `
| clients, window, payload | C | raw Go | raw Go, GOMAXPROCS=1 | netcode | netcode, GOMAXPROCS=1 | / C: raw, raw 1, netcode, netcode 1 | netcode / raw: default, 1 | µs of CPU per echo: C, raw, raw 1, netcode, netcode 1 |
|---|---|---|---|---|---|---|---|---|
| 1, 1, 100 B | 90.0k | 60.0k | 80.0k | 45.0k | 55.0k | 0.67 0.89 0.50 0.61 | 0.75 0.69 | 11.1 16.7 12.5 22.2 18.2 |
  rounds: C [100.0k 80.0k 90.0k] raw Go [60.0k 50.0k 70.0k] raw Go 1 [80.0k 75.0k 125.0k] netcode [40.0k 45.0k 50.0k] netcode 1 [50.0k 60.0k 55.0k]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
