package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1}, 10},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median reordered its input: %v, was %v", tc.in, in)
			}
		}
	}
}

func TestDur(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{85 * time.Microsecond, "85 µs"},
		{1234 * time.Microsecond, "1.23 ms"},
		{15500 * time.Microsecond, "15.5 ms"},
	} {
		if got := dur(tc.d); got != tc.want {
			t.Errorf("dur(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestLists(t *testing.T) {
	ns, err := intList("1, 16,64")
	if err != nil || len(ns) != 3 || ns[0] != 1 || ns[1] != 16 || ns[2] != 64 {
		t.Errorf("intList = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "1,,2", "0", "-3", "x"} {
		if _, err := intList(bad); err == nil {
			t.Errorf("intList(%q) did not fail", bad)
		}
	}
	if _, err := nameList("quic,tcp", datagramTransports...); err == nil {
		t.Error("nameList took a stream transport for a datagram one")
	}
	if got := rotated([]string{"a", "b", "c"}, 4); strings.Join(got, "") != "bca" {
		t.Errorf("rotated by 4 = %v, want b c a", got)
	}
}

// TestDatagramTable checks that the table takes the median of each
// client count and transport's rounds, and keeps the order given.
func TestDatagramTable(t *testing.T) {
	rs := []dgResult{
		{Transport: "udp", Clients: 1, EchoesPerSec: 100e3, PerServerCPU: 130e3, PerCPU: 60e3, P50: 80 * time.Microsecond, P99: 700 * time.Microsecond},
		{Transport: "quic", Clients: 1, EchoesPerSec: 30e3, PerServerCPU: 50e3, PerCPU: 30e3, P50: 2 * time.Millisecond, P99: 20 * time.Millisecond, Lost: 4},
		{Transport: "udp", Clients: 1, EchoesPerSec: 90e3, PerServerCPU: 120e3, PerCPU: 50e3, P50: 90 * time.Microsecond, P99: 900 * time.Microsecond},
		{Transport: "udp", Clients: 1, EchoesPerSec: 110e3, PerServerCPU: 140e3, PerCPU: 70e3, P50: 70 * time.Microsecond, P99: 800 * time.Microsecond},
		{Transport: "quic", Clients: 16, EchoesPerSec: 40e3, PerServerCPU: 90e3, PerCPU: 45e3, P50: 3 * time.Millisecond, P99: 12 * time.Millisecond},
	}
	var b bytes.Buffer
	printDatagramTable(&b, rs, []int{1, 16}, []string{"quic", "netcode", "udp"})
	want := `| clients | transport | echoes/s | server echoes per server-CPU-s | echoes per CPU-s (both processes) | p50 | p99 | lost |
|---|---|---|---|---|---|---|---|
| 1 | quic-go DATAGRAM | 30.0k | 50.0k (50.0k) | 30.0k | 2.00 ms | 20.0 ms | 4 |
| 1 | plain UDP | 100.0k | 130.0k (130.0k 120.0k 140.0k) | 60.0k | 80 µs | 800 µs | 0 |
| 16 | quic-go DATAGRAM | 40.0k | 90.0k (90.0k) | 45.0k | 3.00 ms | 12.0 ms | 0 |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestStreamTable checks the stream table's medians, ranges and CPU per
// GB.
func TestStreamTable(t *testing.T) {
	const gb = 1e9
	rs := []stResult{
		{Transport: "tcp", Upload: true, Bytes: gb, MBps: 900, SendCPU: 500 * time.Millisecond, RecvCPU: time.Second},
		{Transport: "tcp", Upload: false, Bytes: gb, MBps: 1000, SendCPU: 400 * time.Millisecond, RecvCPU: 1100 * time.Millisecond},
		{Transport: "tcp", Upload: true, Bytes: gb / 2, MBps: 800, SendCPU: 150 * time.Millisecond, RecvCPU: 500 * time.Millisecond},
		{Transport: "tcp", Upload: true, Bytes: gb, MBps: 1000, SendCPU: 600 * time.Millisecond, RecvCPU: 1200 * time.Millisecond},
	}
	var b bytes.Buffer
	printStreamTable(&b, rs, []string{"reliable", "tcp"})
	want := `| transport | direction | MB/s | sender CPU-s per GB | receiver CPU-s per GB |
|---|---|---|---|---|
| TCP | upload | 900 (800–1000) | 0.50 (0.30–0.60) | 1.00 (1.00–1.20) |
| TCP | download | 1000 | 0.40 | 1.10 |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
