package bench

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// Print writes a human-readable report of r.
func (r *Result) Print(w io.Writer) {
	c := r.Config
	mode := "flat out"
	if c.Rate > 0 {
		mode = fmt.Sprintf("%g payloads/s per client", c.Rate)
	} else {
		mode += fmt.Sprintf(", window %d", c.Window)
	}
	fmt.Fprintf(w, "clients %d, payload %d bytes, %s, window %v after %v warm-up, GOMAXPROCS %d\n",
		c.Clients, c.Size, mode, c.Duration, c.Warmup, gomaxprocs())
	if len(r.Rounds) > 1 {
		for i, rd := range r.Rounds {
			fmt.Fprintf(w, "round %d: netcode %.0f payloads/s", i+1, rd.Netcode.RoundTripsPerSec)
			if rd.Cute != nil {
				fmt.Fprintf(w, ", cute %.0f payloads/s", rd.Cute.RoundTripsPerSec)
			}
			if rd.Raw != nil {
				fmt.Fprintf(w, ", raw %.0f payloads/s, ratio %.3f (per CPU second %.3f, server %.3f)",
					rd.Raw.RoundTripsPerSec, rd.Ratio, rd.CPURatio, rd.ServerCPURatio)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "median round of %d:\n", len(r.Rounds))
	}
	r.Netcode.print(w)
	if r.Cute != nil {
		r.Cute.print(w)
	}
	if r.Raw != nil {
		fmt.Fprintf(w, "(raw UDP echo server: %d goroutines on one batched socket)\n", c.RawReaders)
		r.Raw.print(w)
		fmt.Fprintf(w, "ratio netcode/raw payloads/s: %.3f\n", r.Ratio)
		fmt.Fprintf(w, "ratio netcode/raw payloads per CPU second: process %.3f, server %.3f\n", r.CPURatio, r.ServerCPURatio)
	}
}

func (p *Phase) print(w io.Writer) {
	fmt.Fprintf(w, "== %s\n", p.Name)
	if p.Name != "raw-udp" {
		fmt.Fprintf(w, "  connect:     %d/%d connected in %v: %.0f connects/s\n",
			p.Connected, p.Clients, p.ConnectTime.Round(time.Microsecond), p.ConnectsPerSec)
		if p.Connected > 0 {
			n := time.Duration(p.Connected)
			fmt.Fprintf(w, "  handshake:   CPU per connect in the process %s, %s\n",
				measured(p.ConnectCPU/n), serverShare(p.ConnectServerCPU, n))
		}
		for _, k := range SortedKeys(p.DialErrors) {
			fmt.Fprintf(w, "  dial error:  %dx %s\n", p.DialErrors[k], k)
		}
	}
	if p.Window == 0 {
		return
	}
	fmt.Fprintf(w, "  throughput:  %.0f payloads/s echoed (%.0f sent/s), %d round trips in %v\n",
		p.RoundTripsPerSec, p.SentPerSec, p.RoundTrips, p.Window.Round(time.Millisecond))
	fmt.Fprintf(w, "  latency:     p50 %v  p99 %v  max %v\n", rd(p.P50), rd(p.P99), rd(p.Max))
	if p.ProcessCPU > 0 {
		fmt.Fprintf(w, "  cpu:         process %v in window = %v per million server packets\n",
			p.ProcessCPU.Round(time.Millisecond), p.ProcessCPUPerMPacket.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "  cpu:         process CPU not measured (no process CPU clock on this system)\n")
	}
	if p.EchoesPerCPUSecond > 0 {
		fmt.Fprintf(w, "  per cpu-s:   %.0f echoes per CPU-second of the process", p.EchoesPerCPUSecond)
		if p.EchoesPerServerCPUSecond > 0 {
			fmt.Fprintf(w, ", %.0f per CPU-second of the server", p.EchoesPerServerCPUSecond)
		}
		fmt.Fprintln(w)
	}
	if p.ProfileWindow > 0 {
		fmt.Fprintf(w, "  server cpu:  %v per million packets (%v for %d packets in %v; client %v, other %v)\n",
			p.ServerCPUPerMPacket.Round(time.Millisecond), p.ServerCPU.Round(time.Millisecond), p.ServerPackets,
			p.ProfileWindow.Round(time.Millisecond), p.ClientCPU.Round(time.Millisecond), p.OtherCPU.Round(time.Millisecond))
		if p.ServerDatagrams > 0 {
			fmt.Fprintf(w, "               %v per million datagrams of every kind (%d received and sent: payloads, keep-alives, handshakes)\n",
				p.ServerCPUPerMDatagram.Round(time.Millisecond), p.ServerDatagrams)
		}
		if p.ServerRunsPerEcho > 0 {
			fmt.Fprintf(w, "  wake-ups:    %.2f goroutine runs, %.2f thread context switches per echo in the server process\n",
				p.ServerRunsPerEcho, p.ServerSwitchesPerEcho)
		}
	}
	fmt.Fprintf(w, "  allocations: %.4f per packet (%d mallocs / %d packets), %d GCs\n",
		p.AllocsPerPacket, p.Mallocs, p.AllocPackets, p.GCs)
	fmt.Fprintf(w, "  reliability: %d timeouts, %d other disconnects, %d payloads lost, %d dropped by full read queues\n",
		p.Timeouts, p.Disconnects, p.Lost, p.Dropped)
	for _, k := range SortedKeys(p.EndErrors) {
		fmt.Fprintf(w, "  ended early: %dx %s\n", p.EndErrors[k], k)
	}
	if s := p.ServerStats; s != nil {
		fmt.Fprintf(w, "  server:      opened %d, timed out %d, ignored %d, replayed %d, challenges %d, denied %d\n",
			s.ConnectionsOpened, s.ConnectionsTimeout, s.Ignored, s.Replayed, s.ChallengesSent, s.DeniedSent)
	}
}

// measured formats a CPU time that is 0 only when it was not measured (the
// system has no process CPU clock, or the profiler could not run).
func measured(d time.Duration) string {
	if d <= 0 {
		return "not measured"
	}
	return d.String()
}

// serverShare describes the server's part of the connect phase's CPU, from
// profiler samples. The profiler samples 100 times a second, so a short
// connect phase can end without one sample in the server: that is "not
// measured", never "0s".
func serverShare(total, connects time.Duration) string {
	if total <= 0 {
		return "in the server not measured (no profiler sample fell in the server; try more -clients)"
	}
	return fmt.Sprintf("in the server %v (%v server CPU in all)", total/connects, total.Round(time.Millisecond))
}

func rd(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(time.Millisecond)
	case d > time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
