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
	s := fmt.Sprintf("%s, %d clients: %.0f echoes/s, %.0f per server CPU-s, %.0f per CPU-s, p50 %v p99 %v, lost %d",
		r.Transport, r.Clients, r.EchoesPerSec, r.PerServerCPU, r.PerCPU, r.P50, r.P99, r.Lost)
	if r.PacketsPerEcho > 0 {
		s += fmt.Sprintf(", %.2f server packets per echo", r.PacketsPerEcho)
	}
	return s
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
	case baseTransport:
		return "netcode, -base"
	case baseStreamTransport:
		return "reliable.Stream, -base"
	case "tcp":
		return "TCP"
	}
	return t
}

// direction names a transfer's direction, seen from the dialing client.
func direction(upload bool) string {
	if upload {
		return "upload"
	}
	return "download"
}

// perGB returns CPU seconds per 10⁹ bytes.
func perGB(cpu time.Duration, bytes int64) float64 { return cpu.Seconds() / (float64(bytes) / 1e9) }

func (r stResult) String() string {
	return fmt.Sprintf("%s %s: %.0f MB/s, sender %.2f / receiver %.2f CPU-s per GB",
		r.Transport, direction(r.Upload), r.MBps, perGB(r.SendCPU, r.Bytes), perGB(r.RecvCPU, r.Bytes))
}

// printStreamTable prints the medians of rs for each transport, in the
// order given, and direction, with the rounds' range in brackets.
func printStreamTable(w io.Writer, rs []stResult, transports []string) {
	fmt.Fprintln(w, "| transport | direction | MB/s | sender CPU-s per GB | receiver CPU-s per GB |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, t := range transports {
		for _, upload := range []bool{true, false} {
			var sel []stResult
			for _, r := range rs {
				if r.Transport == t && r.Upload == upload {
					sel = append(sel, r)
				}
			}
			if len(sel) == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", transportName(t), direction(upload),
				spread(values(sel, func(r stResult) float64 { return r.MBps }), "%.0f"),
				spread(values(sel, func(r stResult) float64 { return perGB(r.SendCPU, r.Bytes) }), "%.2f"),
				spread(values(sel, func(r stResult) float64 { return perGB(r.RecvCPU, r.Bytes) }), "%.2f"))
		}
	}
}

// spread formats the median of xs and, for more than one, their range:
// "105 (100–144)".
func spread(xs []float64, format string) string {
	m := fmt.Sprintf(format, median(xs))
	if len(xs) < 2 {
		return m
	}
	return fmt.Sprintf("%s ("+format+"–"+format+")", m, slices.Min(xs), slices.Max(xs))
}

// crefResult is one configuration's rounds, C (none without the C
// reference) and Go.
type crefResult struct {
	Config crefConfig
	C, Go  []echoFigures
	Floor  []echoFigures // the bare Go UDP ping-pong (cref -floor)
	API    []echoFigures // the public-API harness (cref -api)
	// cref -api-floor: the public-API harness with GOMAXPROCS=1, and its
	// shape on raw UDP with the runtime's default and with GOMAXPROCS=1.
	API1, Raw, Raw1 []echoFigures
}

func (r crefResult) last() string {
	s := ""
	if len(r.C) > 0 {
		c := r.C[len(r.C)-1]
		s = fmt.Sprintf("C %.0f echoes per CPU-s, p50 %v; ", c.PerCPU, c.P50)
	}
	g := r.Go[len(r.Go)-1]
	s += fmt.Sprintf("Go %.0f echoes per CPU-s, p50 %v", g.PerCPU, g.P50)
	if len(r.API) > 0 {
		a := r.API[len(r.API)-1]
		s += fmt.Sprintf("; public API %.0f echoes per CPU-s, p50 %v", a.PerCPU, a.P50)
	}
	for _, v := range []struct {
		name string
		fs   []echoFigures
	}{{"public API GOMAXPROCS=1", r.API1}, {"raw UDP", r.Raw}, {"raw UDP GOMAXPROCS=1", r.Raw1}} {
		if len(v.fs) > 0 {
			s += fmt.Sprintf("; %s %.0f", v.name, v.fs[len(v.fs)-1].PerCPU)
		}
	}
	return s
}

// printCrefTable prints the C and Go medians of each configuration, the
// ratio of the medians, and each round's figures.
func printCrefTable(w io.Writer, rs []crefResult) {
	fmt.Fprintln(w, "| clients, window, payload | C echoes per CPU-s | Go echoes per CPU-s | Go / C | p50 C / Go | p99 C / Go |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	perCPU := func(f echoFigures) float64 { return f.PerCPU }
	p50 := func(f echoFigures) float64 { return float64(f.P50) }
	p99 := func(f echoFigures) float64 { return float64(f.P99) }
	for _, r := range rs {
		g := median(values(r.Go, perCPU))
		c, ratio, cp50, cp99 := "—", "—", "—", "—"
		if len(r.C) > 0 {
			cm := median(values(r.C, perCPU))
			c, ratio = kilo(cm), fmt.Sprintf("%.2f", g/cm)
			cp50, cp99 = dur(time.Duration(median(values(r.C, p50)))), dur(time.Duration(median(values(r.C, p99))))
		}
		fmt.Fprintf(w, "| %v | %s | %s | %s | %s / %s | %s / %s |\n", r.Config, c, kilo(g), ratio,
			cp50, dur(time.Duration(median(values(r.Go, p50)))), cp99, dur(time.Duration(median(values(r.Go, p99)))))
	}
	fmt.Fprintln(w, "\nrounds, echoes per CPU-s:")
	for _, r := range rs {
		fmt.Fprintf(w, "  %v: C [%s] Go [%s]\n", r.Config, rounds(values(r.C, perCPU), kilo), rounds(values(r.Go, perCPU), kilo))
	}
}

// printFloorTable writes, for the configurations that ran the bare Go UDP
// ping-pong (cref -floor), its medians beside C's and netcode's.
func printFloorTable(w io.Writer, rs []crefResult) {
	header := false
	perCPU := func(f echoFigures) float64 { return f.PerCPU }
	for _, r := range rs {
		if len(r.Floor) == 0 || len(r.C) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\n| clients, window, payload | C echoes per CPU-s | bare Go UDP | netcode | bare Go / C | netcode / bare Go |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|")
			header = true
		}
		c, f, g := median(values(r.C, perCPU)), median(values(r.Floor, perCPU)), median(values(r.Go, perCPU))
		fmt.Fprintf(w, "| %v | %s | %s | %s | %.2f | %.2f |\n", r.Config, kilo(c), kilo(f), kilo(g), f/c, g/f)
		fmt.Fprintf(w, "  rounds: bare Go [%s]\n", rounds(values(r.Floor, perCPU), kilo))
	}
}

// serverResult is one configuration's rounds of cref -server-only: server
// CPU µs per echo, C and Go, in the order they ran.
type serverResult struct {
	Config crefConfig
	C, Go  []float64
}

// printServerTable prints, for each configuration, each round's server
// µs per echo, C and Go, and Go/C per CPU-second (C's µs over Go's) for
// each round and for the medians.
func printServerTable(w io.Writer, rs []serverResult) {
	fmt.Fprintln(w, "| clients, window, payload | C server µs per echo | Go server µs per echo | Go/C per CPU-second | of the medians |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	us := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	for _, r := range rs {
		ratios, ofMedians := "—", "—"
		if len(r.C) > 0 && len(r.C) == len(r.Go) {
			rr := make([]float64, len(r.C))
			for i := range r.C {
				rr[i] = r.C[i] / r.Go[i]
			}
			ratios = rounds(rr, us)
			ofMedians = fmt.Sprintf("%.2f", median(r.C)/median(r.Go))
		}
		fmt.Fprintf(w, "| %v | %s | %s | %s | %s |\n", r.Config, rounds(r.C, us), rounds(r.Go, us), ratios, ofMedians)
	}
}

// printAPITable writes, for the configurations that ran the public-API
// harness (cref -api), its echoes per CPU-second beside C's and netcode
// bench's, the ratios of the medians, and each round's ratio to C (the
// runs of a round are minutes apart at most, so a round's ratio is the
// fairer figure on a loaded machine).
func printAPITable(w io.Writer, rs []crefResult) {
	header := false
	perCPU := func(f echoFigures) float64 { return f.PerCPU }
	p50 := func(f echoFigures) float64 { return float64(f.P50) }
	for _, r := range rs {
		if len(r.API) == 0 || len(r.C) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\n| clients, window, payload | C echoes per CPU-s | public API | netcode bench | public API / C | bench / C | p50 C / public API |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
			header = true
		}
		c, a, g := median(values(r.C, perCPU)), median(values(r.API, perCPU)), median(values(r.Go, perCPU))
		fmt.Fprintf(w, "| %v | %s | %s | %s | %.2f | %.2f | %s / %s |\n", r.Config, kilo(c), kilo(a), kilo(g), a/c, g/c,
			dur(time.Duration(median(values(r.C, p50)))), dur(time.Duration(median(values(r.API, p50)))))
		var ratios []float64
		for i := range min(len(r.API), len(r.C)) {
			ratios = append(ratios, r.API[i].PerCPU/r.C[i].PerCPU)
		}
		fmt.Fprintf(w, "  rounds: public API [%s], public API / C [%s]\n", rounds(values(r.API, perCPU), kilo),
			rounds(ratios, func(x float64) string { return fmt.Sprintf("%.2f", x) }))
	}
}

// printAPIFloorTable writes, for the configurations that ran cref
// -api-floor, echoes per CPU-second (medians) of C, of the public-API
// harness's shape on raw UDP and of netcode's, each Go harness with the
// runtime's default GOMAXPROCS and with 1; each one's ratio to C; netcode
// over raw UDP at each GOMAXPROCS (what the library costs beyond the
// shape's floor); the CPU µs per echo of the medians, and the rounds.
func printAPIFloorTable(w io.Writer, rs []crefResult) {
	var rows []floorRow
	for _, r := range rs {
		if len(r.Raw) == 0 || len(r.C) == 0 {
			continue
		}
		row := floorRow{label: r.Config.String(), names: []string{"C", "raw Go", "raw Go 1", "netcode", "netcode 1"},
			cols: [][]echoFigures{r.C, r.Raw, r.Raw1, r.API, r.API1}}
		m := row.medians()
		row.extra = fmt.Sprintf(" %.2f %.2f |", m[3]/m[1], m[4]/m[2])
		rows = append(rows, row)
	}
	writeFloorTable(w, "| clients, window, payload | C | raw Go | raw Go, GOMAXPROCS=1 | netcode | netcode, GOMAXPROCS=1 | / C: raw, raw 1, netcode, netcode 1 | netcode / raw: default, 1 | µs of CPU per echo: C, raw, raw 1, netcode, netcode 1 |", rows)
}

// floorRow is one row of a floor table (cref -api-floor, cute -floor): its
// first cells (label), the columns of rounds (C's first) and their names
// for the rounds line, and cells after the ratios to C (extra, each
// ending in "|").
type floorRow struct {
	label string
	names []string
	cols  [][]echoFigures
	extra string
}

// medians returns the medians of echoes per CPU-second of each column.
func (r floorRow) medians() []float64 {
	m := make([]float64, len(r.cols))
	for i, col := range r.cols {
		m[i] = median(values(col, func(f echoFigures) float64 { return f.PerCPU }))
	}
	return m
}

// writeFloorTable writes header and rows, if any: each row's medians,
// each one's ratio to C's, its extra cells, CPU µs per echo of each, and
// a line of the rounds.
func writeFloorTable(w io.Writer, header string, rows []floorRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+header)
	fmt.Fprintln(w, strings.Repeat("|---", strings.Count(header, "|")-1)+"|")
	for _, r := range rows {
		m := r.medians()
		var cells, ratios, micros, rs []string
		for i, x := range m {
			cells = append(cells, kilo(x))
			if i > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2f", x/m[0]))
			}
			micros = append(micros, fmt.Sprintf("%.1f", 1e6/x))
			rs = append(rs, fmt.Sprintf("%s [%s]", r.names[i], rounds(values(r.cols[i], func(f echoFigures) float64 { return f.PerCPU }), kilo)))
		}
		fmt.Fprintf(w, "| %s | %s | %s |%s %s |\n", r.label, strings.Join(cells, " | "), strings.Join(ratios, " "), r.extra, strings.Join(micros, " "))
		fmt.Fprintf(w, "  rounds: %s\n", strings.Join(rs, " "))
	}
}
