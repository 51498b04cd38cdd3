package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPrintHandshakeCPU(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cpu, serverCPU    time.Duration
		want, mustNotHave string
	}{
		{"measured", 4 * time.Millisecond, 2 * time.Millisecond, "CPU per connect in the process 1ms, in the server 500µs (2ms server CPU in all)", "not measured"},
		{"no server sample", 4 * time.Millisecond, 0, "CPU per connect in the process 1ms, in the server not measured", "server 0s"},
		{"no clocks", 0, 0, "CPU per connect in the process not measured, in the server not measured", "process 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Netcode: Phase{Name: "netcode", Clients: 4, Connected: 4, ConnectCPU: tc.cpu, ConnectServerCPU: tc.serverCPU}}
			var out bytes.Buffer
			r.Print(&out)
			assert.Contains(t, out.String(), tc.want)
			assert.NotContains(t, out.String(), tc.mustNotHave)
		})
	}
}
