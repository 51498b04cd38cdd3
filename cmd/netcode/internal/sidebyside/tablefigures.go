package main

// What tables measures and prints: the figures of the README's
// Performance rows, read from `netcode bench -json` and from the
// servers-only runs, and the markdown table of before and after.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// benchJSON is the part of `netcode bench -json`'s output that tables
// reads. The figures that may be zero are pointers, so that a field the
// output lacks (renamed, or not yet written at an old revision) is an
// error rather than a zero.
type benchJSON struct {
	Netcode *benchPhaseJSON
	Raw     *benchPhaseJSON
	// Ratio and CPURatio are netcode/raw payloads per second and per
	// CPU-second of the process, with -baseline.
	Ratio, CPURatio float64
}

// benchPhaseJSON is the part of a phase (netcode or raw UDP) tables reads.
type benchPhaseJSON struct {
	Clients, Connected int
	RoundTrips         uint64
	RoundTripsPerSec   float64
	P50, P99           time.Duration
	Lost               *uint64
	AllocsPerPacket    *float64
}

// parseBenchJSON reads one run of `netcode bench -json`: a netcode phase
// that echoed, and with baseline a raw UDP phase that echoed and the
// ratios.
func parseBenchJSON(out []byte, baseline bool) (benchJSON, error) {
	var r benchJSON
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("netcode bench -json: %w", err)
	}
	if err := r.Netcode.check("netcode"); err != nil {
		return r, err
	}
	if !baseline {
		return r, nil
	}
	if r.Raw == nil {
		return r, errors.New("netcode bench -json -baseline printed no raw UDP phase")
	}
	if err := r.Raw.check("raw UDP"); err != nil {
		return r, err
	}
	if r.Ratio <= 0 || r.CPURatio <= 0 {
		return r, fmt.Errorf("netcode bench -json -baseline printed no ratio (Ratio %v, CPURatio %v)", r.Ratio, r.CPURatio)
	}
	return r, nil
}

// check says what the phase lacks, if anything.
func (p *benchPhaseJSON) check(name string) error {
	switch {
	case p == nil:
		return fmt.Errorf("netcode bench -json printed no %s phase", name)
	case p.RoundTrips == 0 || p.RoundTripsPerSec <= 0:
		return fmt.Errorf("netcode bench: the %s phase echoed nothing", name)
	case p.P50 <= 0 || p.P99 < p.P50:
		return fmt.Errorf("netcode bench: the %s phase has no round trips' p50 and p99 (%v, %v)", name, p.P50, p.P99)
	case p.Lost == nil || p.AllocsPerPacket == nil:
		return fmt.Errorf("netcode bench -json: the %s phase has no Lost or AllocsPerPacket", name)
	}
	return nil
}

// better says which way a figure improves.
type better bool

const (
	higher better = false
	lower  better = true
)

func (b better) String() string {
	if b == lower {
		return "lower"
	}
	return "higher"
}

// figureSpec is one figure of a row: its name, which way is better, its
// format, and how to read it from a bench run (nil for the servers-only
// rows, which set it directly).
type figureSpec struct {
	Name   string
	Better better
	Format func(float64) string
	Read   func(benchJSON) float64
}

// Formats of the figures.
var (
	fmtRate  = func(x float64) string { return kilo(x) }
	fmtRatio = func(x float64) string { return fmt.Sprintf("%.3f", x) }
	fmtAlloc = func(x float64) string { return fmt.Sprintf("%.4f", x) }
	fmtCount = func(x float64) string { return fmt.Sprintf("%.0f", x) }
	fmtUs    = func(x float64) string { return fmt.Sprintf("%.2f", x) }
	fmtDur   = func(x float64) string {
		switch d := time.Duration(x); {
		case d >= time.Second:
			return fmt.Sprintf("%.2f s", d.Seconds())
		case d >= time.Millisecond:
			return dur(d)
		}
		return fmt.Sprintf("%.1f µs", x/float64(time.Microsecond))
	}
)

// figure is one figure's values, by round, for each revision. Shared is
// a figure measured once a round for both (the C reference's server): its
// values are in Before, and After is empty.
type figure struct {
	Row string // the README row it belongs to
	figureSpec
	Before, After []float64
	Shared        bool
}

// add appends a round's value for the revision (0 before, 1 after).
func (f *figure) add(rev int, x float64) {
	if rev == 0 {
		f.Before = append(f.Before, x)
	} else {
		f.After = append(f.After, x)
	}
}

// ratio is after's median over before's, or "—" where that is no number
// (a shared figure, no rounds, or a zero before: 0 allocations).
func (f *figure) ratio() string {
	if f.Shared || len(f.Before) == 0 || len(f.After) == 0 {
		return "—"
	}
	b, a := median(f.Before), median(f.After)
	switch {
	case b == 0 && a == 0:
		return "1 (both 0)"
	case b == 0 || math.IsInf(a/b, 0) || math.IsNaN(a/b):
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// verdict compares the rounds' ranges: "within noise" where before's and
// after's overlap, else "better" or "worse" by the figure's direction; "—"
// for a shared figure or with fewer than 2 rounds a side, where no range
// says what noise is.
func (f *figure) verdict() string {
	if f.Shared || len(f.Before) < 2 || len(f.After) < 2 {
		return "—"
	}
	bMin, bMax := slices.Min(f.Before), slices.Max(f.Before)
	aMin, aMax := slices.Min(f.After), slices.Max(f.After)
	switch {
	case aMax < bMin:
		if f.Better == lower {
			return "better"
		}
		return "worse"
	case aMin > bMax:
		if f.Better == higher {
			return "better"
		}
		return "worse"
	}
	return "within noise"
}

// cell formats xs by round, or "—" for none.
func (f *figure) cell(xs []float64) (byRound, med string) {
	if len(xs) == 0 {
		return "—", "—"
	}
	return rounds(xs, f.Format), f.Format(median(xs))
}

// tableHeader is what the table's heading says of the run.
type tableHeader struct {
	Before, After      revision
	Date               time.Time
	Rounds             int
	Quick              bool
	Clients            string // whose netcode the servers-only rows' clients are
	LoadStart, LoadEnd string
	Took               time.Duration
	Notes              []string
}

// printTables writes the markdown table of every figure, before and after.
func printTables(w io.Writer, h tableHeader, figs []*figure) {
	quick := ""
	if h.Quick {
		quick = " (-quick: short windows, a trial, not figures to quote)"
	}
	fmt.Fprintf(w, "## The README's performance tables, before and after (%s)%s\n\n", h.Date.UTC().Format("2006-01-02 15:04 UTC"), quick)
	fmt.Fprintf(w, "- before: %s\n- after: %s\n", h.Before, h.After)
	fmt.Fprintf(w, "- rounds: %d; in each, every row runs before and after, one after the other (before first in odd rounds, after first in even ones); medians of the rounds\n", h.Rounds)
	fmt.Fprintf(w, "- servers-only rows: the same clients (%s) against the C reference's server and each revision's Go server, in an order that rotates by round\n", h.Clients)
	for _, n := range h.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w, "- rounds' ranges: within noise where before's and after's rounds overlap, else better or worse (a crude rule: read the rounds)")
	fmt.Fprintf(w, "- load at start: %s\n- load at end: %s\n- took %v\n\n", h.LoadStart, h.LoadEnd, h.Took.Round(time.Second))
	fmt.Fprintln(w, "| row | figure | better | before, by round | after, by round | before | after | after/before | rounds' ranges |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for i, f := range figs {
		row := f.Row
		if i > 0 && figs[i-1].Row == row {
			row = "" // the row's first figure names it
		}
		bRounds, bMed := f.cell(f.Before)
		aRounds, aMed := f.cell(f.After)
		if f.Shared {
			aRounds, aMed = "(same runs)", "(same runs)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row, f.Name, f.Better, bRounds, aRounds, bMed, aMed, f.ratio(), f.verdict())
	}
}

// revision is one side of the comparison: the revision asked for, its
// commit and subject, and what was built from it.
type revision struct {
	Ref, Hash, Subject string
	Dir                string // its checkout
	Netcode            string // its cmd/netcode
	Server             string // its sidebyside: `child netcode` is its Go echo server
}

func (r revision) String() string {
	return fmt.Sprintf("%s = %s (%s)", r.Ref, r.Hash, strings.TrimSpace(r.Subject))
}
