package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Print writes a human-readable report of r, ending with the row of the
// table in issue 14 and docs/browsers.md, The bridge under load (mode, N,
// connect, echoes/s, p50/p99, lost, CPU and µs per echo of the bridge and
// the server, idle µs per session per second, goroutines, heap and fds
// per session).
func (r *BridgeResult) Print(w io.Writer) {
	c := r.Config
	dialect := ""
	if c.cute() {
		dialect = " (Cute clients and server)"
	}
	fmt.Fprintf(w, "bridge %s%s: %d browsers, %d-byte messages at %g/s each, window %v after %v warm-up, idle phase %v, GOMAXPROCS %d\n",
		c.Mode, dialect, c.Clients, c.Size, c.Rate, c.Duration, c.Warmup, c.Idle, gomaxprocs())
	fmt.Fprintf(w, "  connect:     %d/%d connected in %v: %.0f connects/s\n",
		r.Connected, c.Clients, r.ConnectTime.Round(time.Millisecond), r.ConnectsPerSec)
	for _, k := range SortedKeys(r.DialErrors) {
		fmt.Fprintf(w, "  dial error:  %dx %s\n", r.DialErrors[k], k)
	}
	if r.Window > 0 {
		fmt.Fprintf(w, "  throughput:  %.0f echoes/s (%d sent, %d echoed in %v)\n",
			r.EchoesPerSec, r.Sent, r.Echoed, r.Window.Round(time.Millisecond))
		fmt.Fprintf(w, "  latency:     p50 %v  p99 %v  max %v\n", rd(r.P50), rd(r.P99), rd(r.Max))
	}
	fmt.Fprintf(w, "  reliability: %d lost (sent, never echoed), %d dropped by full queues, %d timeouts, %d other disconnects\n",
		r.Lost, r.Dropped, r.Timeouts, r.Disconnects)
	for _, k := range SortedKeys(r.EndErrors) {
		fmt.Fprintf(w, "  ended early: %dx %s\n", r.EndErrors[k], k)
	}
	sides := []struct {
		name string
		p    *ProcessCost
	}{{"bridge", &r.Bridge}, {"server", &r.Server}}
	for _, s := range sides {
		p := s.p
		if p.PID == 0 {
			continue // websocket mode: no netcode server
		}
		where := fmt.Sprintf("pid %d", p.PID)
		if r.Shared {
			where += fmt.Sprintf(", its share of the one process (by labelled profile samples; %.0f%% unlabelled, shared in proportion)", 100*r.Unlabelled)
		}
		fmt.Fprintf(w, "  %-12s %s\n", s.name+":", where)
		if r.Window > 0 {
			if p.CPUMeasured {
				fmt.Fprintf(w, "    load:      %.2f cores, %.1f µs of CPU per echo\n", p.Cores, p.MicrosPerEcho)
				if p.WakesMeasured {
					whole := ""
					if r.Shared {
						whole = " (the whole process)"
					}
					fmt.Fprintf(w, "    wake-ups:  %.2f goroutine runs, %.2f thread context switches per echo%s\n",
						p.RunsPerEcho, p.SwitchesPerEcho, whole)
				}
				if p.DatagramsPerEcho > 0 {
					fmt.Fprintf(w, "    datagrams: %.2f received and sent by the server per echo (2: the payload and its echo; the rest keep-alives)\n",
						p.DatagramsPerEcho)
				}
				if !(r.Shared && p == &r.Server) {
					fmt.Fprintf(w, "    allocs:    %.1f heap objects per echo%s\n", p.AllocsPerEcho, map[bool]string{true: " (the whole process)"}[r.Shared])
				}
			} else {
				fmt.Fprintf(w, "    load:      CPU not measured (no CPU clock, or no profiler sample to split it)\n")
			}
		}
		switch {
		case r.IdleWindow > 0 && !p.IdleMeasured:
			fmt.Fprintf(w, "    idle:      CPU not measured (no CPU clock, or no profiler sample to split it)\n")
		case r.IdleWindow > 0:
			fmt.Fprintf(w, "    idle:      %v of CPU in %v = %.0f µs per session per second\n",
				p.IdleCPU.Round(time.Millisecond), r.IdleWindow.Round(time.Millisecond), p.IdleMicrosPerSession)
		}
		if r.Shared && p == &r.Server {
			continue // the per-session counts are the process's, under bridge
		}
		fds := "fds not counted on this system"
		if p.FDs {
			fds = fmt.Sprintf("%.2f fds", p.FDsPerSession)
		}
		fmt.Fprintf(w, "    per session: %.2f goroutines (%.0f in all), %s heap + %s stacks, %s\n",
			p.GoroutinesPerSession, p.Goroutines, kb(p.HeapPerSession), kb(p.StackPerSession), fds)
	}
	if r.LoadCPU > 0 && r.Window > 0 {
		fmt.Fprintf(w, "  browsers:    this process %.2f cores\n", r.LoadCPU.Seconds()/r.Window.Seconds())
	}
	if r.Window > 0 {
		fmt.Fprintf(w, "  machine:     other processes kept %.2f cores busy in the window\n", r.OtherCores)
	}
	if r.IdleWindow > 0 {
		fmt.Fprintf(w, "  machine:     other processes kept %.2f cores busy in the idle phase\n", r.IdleOtherCores)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, BridgeTableHeader)
	fmt.Fprintln(w, r.TableRow())
}

// BridgeTableHeader is the header of the Markdown table whose rows
// BridgeResult.TableRow gives.
const BridgeTableHeader = "| mode | N | connect | echoes/s | p50 / p99 | lost | bridge CPU | µs bridge CPU / echo | server CPU | µs server CPU / echo | idle µs / session / s (bridge, server) | goroutines / session (bridge, server) | heap + stacks / session (bridge, server) | fds / session (bridge, server) |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// TableRow is r as a row of the Markdown table under BridgeTableHeader.
func (r *BridgeResult) TableRow() string {
	na := "n/a"
	cells := []string{r.Config.Mode, strconv.Itoa(r.Config.Clients)}
	connect := fmt.Sprintf("%d in %v", r.Connected, r.ConnectTime.Round(10*time.Millisecond))
	cells = append(cells, connect)
	if r.Window > 0 {
		cells = append(cells, fmt.Sprintf("%.0f", r.EchoesPerSec), millis(r.P50)+" / "+millis(r.P99))
	} else {
		cells = append(cells, na, na)
	}
	cells = append(cells, fmt.Sprintf("%d (+%d dropped)", r.Lost, r.Dropped))
	for _, p := range []*ProcessCost{&r.Bridge, &r.Server} {
		if r.Window > 0 && p.CPUMeasured {
			cells = append(cells, fmt.Sprintf("%.2f cores", p.Cores), fmt.Sprintf("%.1f", p.MicrosPerEcho))
		} else {
			cells = append(cells, na, na)
		}
	}
	idle := func(p *ProcessCost) string {
		if r.IdleWindow > 0 && p.IdleMeasured {
			return fmt.Sprintf("%.0f", p.IdleMicrosPerSession)
		}
		return na
	}
	cells = append(cells, idle(&r.Bridge)+", "+idle(&r.Server))
	per := func(f func(p *ProcessCost) string) string {
		switch {
		case r.Shared:
			return f(&r.Bridge) + " (one process)"
		case r.Server.PID == 0:
			return f(&r.Bridge) + " (no server)"
		}
		return f(&r.Bridge) + ", " + f(&r.Server)
	}
	cells = append(cells,
		per(func(p *ProcessCost) string { return fmt.Sprintf("%.1f", p.GoroutinesPerSession) }),
		per(func(p *ProcessCost) string { return kb(p.HeapPerSession) + " + " + kb(p.StackPerSession) }),
		per(func(p *ProcessCost) string {
			if !p.FDs {
				return na
			}
			return fmt.Sprintf("%.1f", p.FDsPerSession)
		}))
	return "| " + strings.Join(cells, " | ") + " |"
}

// millis formats a latency in milliseconds with three significant digits
// or so, as the table does.
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// kb formats a byte count in KB (1,000 bytes), as the table does.
func kb(b float64) string { return fmt.Sprintf("%.1f KB", b/1000) }
