package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// median returns the median of xs (the mean of the middle two for an
// even count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}

// kilo formats a rate in thousands: 123.4k.
func kilo(x float64) string { return fmt.Sprintf("%.1fk", x/1000) }

// dur formats a round trip in µs below 1 ms, else in ms.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// values returns f of each result in rs.
func values[T any](rs []T, f func(T) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// rounds lists xs formatted by f, in the order measured.
func rounds(xs []float64, f func(float64) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f(x)
	}
	return strings.Join(s, " ")
}

func (r dgResult) String() string {
	return fmt.Sprintf("%s, %d clients: %.0f echoes/s, %.0f per server CPU-s, %.0f per CPU-s, p50 %v p99 %v, lost %d",
		r.Transport, r.Clients, r.EchoesPerSec, r.PerServerCPU, r.PerCPU, r.P50, r.P99, r.Lost)
}

// printDatagramTable prints the medians of rs for each client count and
// transport, in the order given, and each round's server figure.
func printDatagramTable(w io.Writer, rs []dgResult, clients []int, transports []string) {
	fmt.Fprintln(w, "| clients | transport | echoes/s | server echoes per server-CPU-s | echoes per CPU-s (both processes) | p50 | p99 | lost |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, n := range clients {
		for _, t := range transports {
			var sel []dgResult
			for _, r := range rs {
				if r.Clients == n && r.Transport == t {
					sel = append(sel, r)
				}
			}
			if len(sel) == 0 {
				continue
			}
			srv := values(sel, func(r dgResult) float64 { return r.PerServerCPU })
			fmt.Fprintf(w, "| %d | %s | %s | %s (%s) | %s | %s | %s | %.0f |\n", n, transportName(t),
				kilo(median(values(sel, func(r dgResult) float64 { return r.EchoesPerSec }))),
				kilo(median(srv)), rounds(srv, kilo),
				kilo(median(values(sel, func(r dgResult) float64 { return r.PerCPU }))),
				dur(time.Duration(median(values(sel, func(r dgResult) float64 { return float64(r.P50) })))),
				dur(time.Duration(median(values(sel, func(r dgResult) float64 { return float64(r.P99) })))),
				median(values(sel, func(r dgResult) float64 { return float64(r.Lost) })))
		}
	}
}

// transportName is how the tables name a transport.
func transportName(t string) string {
	switch t {
	case "quic":
		return "quic-go DATAGRAM"
	case "udp":
		return "plain UDP"
	case "quic-stream":
		return "quic-go stream"
	case "reliable":
		return "reliable.Stream"
	case "tcp":
		return "TCP"
	}
	return t
}
