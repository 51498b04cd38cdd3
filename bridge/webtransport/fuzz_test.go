package webtransport_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/webtransport"
)

// FuzzParseConnected: whatever a relay writes on the token's stream, the
// client's parse neither panics nor accepts an index outside the slots;
// what the bridge writes parses back.
func FuzzParseConnected(f *testing.F) {
	f.Add([]byte(`{"type":"connected","clientIndex":3,"maxClients":64}`))
	f.Add([]byte(`{"type":"connected","clientIndex":64,"maxClients":64}`))
	f.Add([]byte(`{"type":"x"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, maxClients, err := webtransport.ParseConnected(b)
		if err != nil {
			return
		}
		require.True(t, idx >= 0 && idx < maxClients, "index %d of %d", idx, maxClients)
		again := fmt.Appendf(nil, `{"type":"connected","clientIndex":%d,"maxClients":%d}`, idx, maxClients)
		i2, m2, err := webtransport.ParseConnected(again)
		require.NoError(t, err)
		require.Equal(t, [2]int{idx, maxClients}, [2]int{i2, m2})
	})
}
