package netcode_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/require"
)

// recordChan is a slog.Handler that passes each record's message and
// "why" on a channel.
type recordChan chan [2]string

func (c recordChan) Enabled(context.Context, slog.Level) bool { return true }
func (c recordChan) Handle(_ context.Context, r slog.Record) error {
	why := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "why" {
			why = a.Value.String()
		}
		return true
	})
	select {
	case c <- [2]string{r.Message, why}:
	default:
	}
	return nil
}
func (c recordChan) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c recordChan) WithGroup(string) slog.Handler      { return c }

// TestListenerLogsRefusals: over real UDP, a Listener logs a connection
// request it refuses, with the reason, through ServerConfig.Logger: a
// token sealed with another key, one for another protocol, each from an
// address of its own.
func TestListenerLogsRefusals(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			logs := make(recordChan, 16)
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.Logger = slog.New(logs) })
			for _, tc := range []struct {
				opt  tokenOpt
				want string
			}{
				{withKey(crypto.Key{5: 5}), "minted with another private key"},
				{func(p *token.Params) { p.ProtocolID = testProtocolID + 1 }, "wrong protocol id"},
			} {
				// From an address of its own: refusals are logged once per
				// address and second.
				conn, err := net.Dial(f.network, l.Addr().String())
				require.NoError(t, err)
				defer conn.Close()
				ct, err := token.Parse(mint(t, l.Addr(), tc.opt))
				require.NoError(t, err)
				_, err = conn.Write(protocol.AppendConnectionRequest(nil, ct.ProtocolID, ct.ExpireTimestamp, &ct.Nonce, ct.PrivateData[:]))
				require.NoError(t, err)
				for {
					select {
					case r := <-logs:
						if r[0] != "netcode: connection request refused" {
							continue
						}
						require.Contains(t, r[1], tc.want)
					case <-time.After(10 * time.Second):
						t.Fatalf("no refusal logged for %q", tc.want)
					}
					break
				}
			}
		})
	}
}
