// Command gotest runs go test and reports as go test does without -v (each
// package's ok or FAIL line, the output of each failed test, build errors),
// plus one line for every test that skipped, with its reason, which go test
// prints only with -v. It exits with go test's status. It is the README's
// test command, and CI's:
//
//	go run ./internal/testing/gotest [go test flags] [packages]
//
// for example go run ./internal/testing/gotest -race ./... . With -v it
// prints go test's output unchanged.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
)

// event is one line of go test -json (see go doc test2json), with the
// fields of the go command's build events.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // of a build-output or build-fail event
}

// skip is a test that skipped, with what it logged.
type skip struct{ test, reason string }

// report turns go test -json events into go test's own report, with the
// skips. It is not safe for concurrent use.
type report struct {
	out     io.Writer
	verbose bool
	tests   map[string]*strings.Builder // the output of each running test, by package and name
	pkgOut  map[string]*strings.Builder // output outside any test, by package
	skips   map[string][]skip           // by package
	nskips  int
}

func newReport(out io.Writer, verbose bool) *report {
	return &report{out: out, verbose: verbose, tests: map[string]*strings.Builder{},
		pkgOut: map[string]*strings.Builder{}, skips: map[string][]skip{}}
}

// noise is output of go test -v that go test without -v does not print.
func noise(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- SKIP:", "--- PASS:"} {
		if strings.HasPrefix(strings.TrimSpace(line), p) {
			return true
		}
	}
	return line == "PASS\n" || line == "FAIL\n"
}

// buf returns m's builder for key, made on first use.
func buf(m map[string]*strings.Builder, key string) *strings.Builder {
	b, ok := m[key]
	if !ok {
		b = &strings.Builder{}
		m[key] = b
	}
	return b
}

// filtered returns s without go test -v's own lines.
func filtered(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" && !noise(line) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (r *report) handle(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
		return
	case "build-fail", "start", "run", "pause", "cont", "bench":
		return
	}
	if r.verbose {
		if e.Action == "output" {
			fmt.Fprint(r.out, e.Output)
		}
		return
	}
	key := e.Package + "\x00" + e.Test
	switch {
	case e.Action == "output" && e.Test != "":
		buf(r.tests, key).WriteString(e.Output)
	case e.Action == "output":
		buf(r.pkgOut, e.Package).WriteString(e.Output)
	case e.Test != "":
		out := ""
		if b, ok := r.tests[key]; ok {
			out = b.String()
			delete(r.tests, key)
		}
		switch e.Action {
		case "fail":
			fmt.Fprint(r.out, filtered(out))
		case "skip":
			var reason []string
			for _, line := range strings.Split(filtered(out), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					reason = append(reason, line)
				}
			}
			r.skips[e.Package] = append(r.skips[e.Package], skip{e.Test, strings.Join(reason, " ")})
			r.nskips++
		}
	default: // the package's end: pass, fail or skip
		if e.Action == "fail" {
			// Tests that never ended (the binary panicked or timed out
			// under them): their output is the story.
			for _, k := range slices.Sorted(maps.Keys(r.tests)) {
				if pkg, _, _ := strings.Cut(k, "\x00"); pkg == e.Package {
					fmt.Fprint(r.out, filtered(r.tests[k].String()))
					delete(r.tests, k)
				}
			}
		}
		if b, ok := r.pkgOut[e.Package]; ok {
			fmt.Fprint(r.out, filtered(b.String()))
			delete(r.pkgOut, e.Package)
		}
		for _, s := range r.skips[e.Package] {
			fmt.Fprintf(r.out, "    --- SKIP: %s: %s\n", s.test, s.reason)
		}
		delete(r.skips, e.Package)
	}
}

// finish prints what never reached a package's end (a test binary that
// crashed mid-line) and the count of skips.
func (r *report) finish() {
	for _, b := range r.pkgOut {
		fmt.Fprint(r.out, filtered(b.String()))
	}
	if r.nskips > 0 && !r.verbose {
		fmt.Fprintf(r.out, "%d tests skipped (listed above with their reasons)\n", r.nskips)
	}
}

// run feeds the events of go test -json from in to r. A line that is not an
// event (go test's own errors) is printed as it came.
func (r *report) run(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(e)
	}
	r.finish()
	return sc.Err()
}

func main() {
	args := os.Args[1:]
	verbose := slices.ContainsFunc(args, func(a string) bool { return a == "-v" || a == "-v=true" || a == "--v" })
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	signal.Ignore(os.Interrupt) // go test, in the same process group, gets it and reports
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	rerr := newReport(os.Stdout, verbose).run(stdout)
	err = cmd.Wait()
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "gotest: reading go test's output:", rerr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	case rerr != nil:
		os.Exit(2)
	}
}
