package netcode_test

import (
	"runtime/metrics"
	"testing"
)

// handoffs measures how often a benchmark's goroutines hand work to each
// other: the goroutines the scheduler runs (from /sched/latencies, which
// records one in eight of the times a goroutine goes from runnable to
// running) and the process's threads' context switches (getrusage), each
// per op, with b.ReportMetric, and the process's CPU time per op.
type handoffs struct {
	sample [1]metrics.Sample
	runs   uint64
	csw    uint64
	cpu    uint64
}

// schedRuns is the runtime's sampling period of /sched/latencies
// (gTrackingPeriod).
const schedRuns = 8

func startHandoffs() *handoffs {
	h := &handoffs{sample: [1]metrics.Sample{{Name: "/sched/latencies:seconds"}}}
	h.runs = h.read()
	h.csw, h.cpu, _ = contextSwitches()
	return h
}

func (h *handoffs) read() uint64 {
	metrics.Read(h.sample[:])
	var n uint64
	for _, c := range h.sample[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n
}

// report adds the per-op figures since startHandoffs to b's result.
func (h *handoffs) report(b *testing.B, ops int) {
	runs := h.read() - h.runs
	b.ReportMetric(float64(runs*schedRuns)/float64(ops), "goroutine-runs/op")
	if csw, cpu, ok := contextSwitches(); ok {
		b.ReportMetric(float64(csw-h.csw)/float64(ops), "ctx-switches/op")
		b.ReportMetric(float64(cpu-h.cpu)/float64(ops), "cpu-ns/op")
	}
}
