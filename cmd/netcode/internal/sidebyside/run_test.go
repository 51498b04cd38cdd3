package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain makes the test binary a server process when startChild runs it
// (os.Executable is the test binary here), and checks that a test leaves
// no goroutine behind.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		if err := runChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestDatagramRun runs each datagram transport briefly, its server in a
// child process, and checks that echoes came back and were measured. It
// asserts no figure of speed.
func TestDatagramRun(t *testing.T) {
	for _, tr := range datagramTransports {
		t.Run(tr, func(t *testing.T) {
			res, err := runDatagram(context.Background(), dgConfig{Transport: tr, Clients: 2, Window: 2, Size: 100,
				Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.EchoesPerSec <= 0 || res.P50 <= 0 || res.P99 < res.P50 || res.PerServerCPU <= 0 || res.PerCPU <= 0 || res.PerCPU > res.PerServerCPU {
				t.Errorf("%s: implausible figures %+v", tr, res)
			}
			if (tr == "quic") != (res.PacketsPerEcho > 0) {
				t.Errorf("%s: packets per echo %v", tr, res.PacketsPerEcho)
			}
		})
	}
}

// TestStreamRun moves 2 MiB each way over each stream transport, each end
// in a child process; runStream checks the bytes received.
func TestStreamRun(t *testing.T) {
	for _, tr := range streamTransports {
		for _, upload := range []bool{true, false} {
			t.Run(tr+"/"+direction(upload), func(t *testing.T) {
				res, err := runStream(context.Background(), "", tr, upload, 2<<20)
				if err != nil {
					t.Fatal(err)
				}
				if res.MBps <= 0 || res.SendCPU <= 0 || res.RecvCPU <= 0 {
					t.Errorf("implausible figures %+v", res)
				}
			})
		}
	}
}
