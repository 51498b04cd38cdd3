package main

import (
	"bytes"
	"testing"
)

// TestCuteEchoRun runs the Go side of `sidebyside cute` briefly in each
// mode (bare protocol Conns, and the client/server layer's unreliable and
// reliable messages on cute's default Conns) and reads its result line as
// `sidebyside cute` does. It asserts no figure of speed.
func TestCuteEchoRun(t *testing.T) {
	for _, mode := range cuteModes {
		t.Run(mode, func(t *testing.T) {
			checkResultLine(t, runCuteEcho, "-mode", mode, "-clients", "2", "-window", "2", "-warmup", "50ms", "-duration", "200ms")
		})
	}
	t.Run("proto/gomaxprocs=1", func(t *testing.T) {
		checkResultLine(t, runCuteEcho, "-mode", "proto", "-gomaxprocs", "1", "-clients", "1", "-window", "1", "-warmup", "50ms", "-duration", "200ms")
	})
	var out, errb bytes.Buffer
	if err := runCuteEcho([]string{"-mode", "stream"}, &out, &errb); err == nil {
		t.Error("an unknown mode ran")
	}
}

// TestCuteTable checks `sidebyside cute`'s table: medians, Go/C of the
// medians and by round, the netcode phase of the same bench in mode
// proto, and a configuration with no C column.
func TestCuteTable(t *testing.T) {
	f := func(perCPU float64) echoFigures { return echoFigures{PerCPU: perCPU} }
	rs := []cuteResult{
		{Config: crefConfig{16, 8, 100}, Mode: "proto", C: []echoFigures{f(100e3), f(120e3), f(110e3)},
			Go: []echoFigures{f(90e3), f(150e3), f(110e3)}, Netcode: []echoFigures{f(200e3), f(220e3), f(180e3)}},
		{Config: crefConfig{64, 8, 100}, Mode: "reliable", Go: []echoFigures{f(50e3)}},
	}
	var b bytes.Buffer
	printCuteTable(&b, rs)
	want := `| clients, window, payload | layer | Cute Framework echoes per CPU-s | package cute | Go / C | Go / C by round | p50 C / Go |
|---|---|---|---|---|---|---|
| 16, 8, 100 B | proto | 110.0k | 110.0k | 1.00 | 0.90 1.25 1.00 | 0 µs / 0 µs |
| 64, 8, 100 B | reliable | — | 50.0k | — | — | — / 0 µs |

rounds, echoes per CPU-s:
  16, 8, 100 B, proto: C [100.0k 120.0k 110.0k] Go [90.0k 150.0k 110.0k] netcode in the same bench [200.0k 220.0k 180.0k], cute / netcode 0.55
  64, 8, 100 B, reliable: C [] Go [50.0k]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestAPITable checks cref -api's table: the public-API harness beside C
// and netcode bench, the ratios of the medians and each round's ratio to
// C, and that it leaves out the configurations that ran no C.
func TestAPITable(t *testing.T) {
	f := func(perCPU float64) echoFigures { return echoFigures{PerCPU: perCPU} }
	rs := []crefResult{
		{Config: crefConfig{1, 8, 100}, C: []echoFigures{f(100e3), f(80e3), f(90e3)}, Go: []echoFigures{f(150e3), f(160e3), f(170e3)},
			API: []echoFigures{f(80e3), f(80e3), f(99e3)}},
		{Config: crefConfig{512, 8, 100}, Go: []echoFigures{f(100e3)}, API: []echoFigures{f(60e3)}},
	}
	var b bytes.Buffer
	printAPITable(&b, rs)
	want := `
| clients, window, payload | C echoes per CPU-s | public API | netcode bench | public API / C | bench / C | p50 C / public API |
|---|---|---|---|---|---|---|
| 1, 8, 100 B | 90.0k | 80.0k | 160.0k | 0.89 | 1.78 | 0 µs / 0 µs |
  rounds: public API [80.0k 80.0k 99.0k], public API / C [0.80 1.00 1.10]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestCuteFloorTable checks cute -floor's table: the medians of Cute
// Framework, package cute's harness and the raw ping-pong with each
// GOMAXPROCS, their ratios to C, CPU µs per echo, and that it leaves out
// the rows that ran no floor or no C.
func TestCuteFloorTable(t *testing.T) {
	f := func(perCPU float64) echoFigures { return echoFigures{PerCPU: perCPU} }
	rs := []cuteResult{
		{Config: crefConfig{1, 1, 100}, Mode: "proto", C: []echoFigures{f(60e3), f(70e3), f(66e3)}, Go: []echoFigures{f(50e3)},
			Echo: []echoFigures{f(55e3), f(50e3), f(60e3)}, Echo1: []echoFigures{f(57e3)},
			Raw: []echoFigures{f(80e3), f(88e3), f(90e3)}, Raw1: []echoFigures{f(88e3)}},
		{Config: crefConfig{1, 8, 100}, Mode: "proto", C: []echoFigures{f(60e3)}, Go: []echoFigures{f(90e3)}},
		{Config: crefConfig{1, 1, 100}, Mode: "reliable", Go: []echoFigures{f(30e3)}, Echo: []echoFigures{f(30e3)},
			Echo1: []echoFigures{f(30e3)}, Raw: []echoFigures{f(80e3)}, Raw1: []echoFigures{f(80e3)}},
	}
	var b bytes.Buffer
	printCuteFloorTable(&b, rs)
	want := `
| clients, window, payload | layer | Cute Framework | package cute | package cute, GOMAXPROCS=1 | raw Go | raw Go, GOMAXPROCS=1 | / C: cute, cute 1, raw, raw 1 | µs of CPU per echo: C, cute, cute 1, raw, raw 1 |
|---|---|---|---|---|---|---|---|---|
| 1, 1, 100 B | proto | 66.0k | 55.0k | 57.0k | 88.0k | 88.0k | 0.83 0.86 1.33 1.33 | 15.2 18.2 17.5 11.4 11.4 |
  rounds: C [60.0k 70.0k 66.0k] cute [55.0k 50.0k 60.0k] cute 1 [57.0k] raw Go [80.0k 88.0k 90.0k] raw Go 1 [88.0k]
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
