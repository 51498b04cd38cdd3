package webtransport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/netsim"
)

// linkPair is a server's link and the client's session at the other end,
// over QUIC on a simulated network with no delay, in a synctest bubble:
// once the bubble's time has moved on and synctest.Wait has returned,
// every datagram sent has reached the link's queue.
type linkPair struct {
	l      *link
	client *wt.Session
	conn   *quic.Conn // the client's
	stop   func()
}

// quietQUIC stops quic-go's warning that a connection (netsim's) is no
// *net.UDPConn, whose buffers it could size.
func quietQUIC(t *testing.T) { t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true") }

// newLinkPair opens a WebTransport session from a client to a server (as
// the Server's, with its QUIC configuration and a development
// certificate) at addr on a network of its own, and returns the server's
// link to it. Call it inside a synctest bubble; stop ends everything.
func newLinkPair(t *testing.T, addr netip.AddrPort) *linkPair {
	t.Helper()
	n := netsim.New(1, netsim.Config{})
	spc, err := n.Listen(addr)
	require.NoError(t, err)
	cpc, err := n.Listen(netip.AddrPortFrom(addr.Addr(), 0))
	require.NoError(t, err)
	dev, err := newDevCerts([]string{addr.Addr().String()}, 0)
	require.NoError(t, err)
	hashes, err := dev.hashes()
	require.NoError(t, err)

	links := make(chan *link, 1)
	h3 := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{GetCertificate: dev.getCertificate, MinVersion: tls.VersionTLS13}),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	ws := &wt.Server{H3: h3, CheckOrigin: func(*http.Request) bool { return true }}
	h3.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := ws.Upgrade(w, r)
		if !assert.NoError(t, err) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		links <- newLink(sess, r.Context().Value(connKey{}).(*quic.Conn))
	})
	ln, err := quic.ListenEarly(spc, h3.TLSConfig, quicConfig())
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go ws.ServeQUICConn(c)
		}
	}()

	// The client's connection outlives its session (unlike
	// wt.Transport.Dial's), so that a session's close arrives alone.
	ct := &quic.Transport{Conn: cpc}
	o := &Options{CertificateHashes: hashes}
	tc := http3.ConfigureTLSConfig(o.tlsConfig())
	cconn, err := ct.DialEarly(context.Background(), spc.LocalAddr(), tc,
		&quic.Config{EnableDatagrams: true, EnableStreamResetPartialDelivery: true})
	require.NoError(t, err)
	d := &wt.Transport{}
	cc, err := d.NewClientConn(cconn)
	require.NoError(t, err)
	_, client, err := cc.Dial(context.Background(), fmt.Sprintf("https://%s/link", addr), nil)
	require.NoError(t, err)
	l := <-links
	return &linkPair{l: l, client: client, conn: cconn, stop: func() {
		l.Cut()
		_ = client.CloseWithError(0, "")
		_ = cconn.CloseWithError(0, "")
		_ = d.Close()
		_ = ct.Close()
		_ = ln.Close()
		_ = ws.Close()
		<-served
		_ = cpc.Close()
		_ = spc.Close()
		_ = n.Close()
	}}
}

// linkFamilies are the server addresses of the link tests, one of each
// family.
var linkFamilies = []struct{ name, addr string }{
	{"IPv4", "127.0.0.1:4433"},
	{"IPv6", "[::1]:4433"},
}

// TestLinkReadsWhatWasQueued: the datagrams a client sent before its
// session ended are all read from the link, in order, and then the end,
// however the session ended. They wait in quic-go's queue of the session
// (up to 32), unread, until the session has ended: as a client's
// disconnect packets do when it closes just after sending them. Before,
// Read used the session's context, which quic-go's ReceiveDatagram looks
// at before its queue: the first Read after the end failed and every
// queued datagram was lost.
func TestLinkReadsWhatWasQueued(t *testing.T) {
	quietQUIC(t)
	const sent = 20 // fewer than quic-go's queue of a session holds (32)
	for _, family := range linkFamilies {
		for _, end := range []struct {
			name   string
			end    func(p *linkPair)
			code   websocket.StatusCode
			reason string
		}{
			{"client closes the session", func(p *linkPair) { _ = p.client.CloseWithError(4003, "bye") }, 4003, "bye"},
			{"client closes the session with no code", func(p *linkPair) { _ = p.client.CloseWithError(0, "") }, websocket.StatusNormalClosure, ""},
			{"client closes the connection", func(p *linkPair) { _ = p.conn.CloseWithError(0, "") }, websocket.StatusNormalClosure, ""},
		} {
			t.Run(family.name+"/"+end.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := newLinkPair(t, netip.MustParseAddrPort(family.addr))
					defer p.stop()
					for i := range sent {
						require.NoError(t, p.client.SendDatagram([]byte{byte(i)}))
					}
					time.Sleep(time.Second) // the bubble's time: a paced packet leaves
					synctest.Wait()         // all queued, none read
					end.end(p)
					<-p.l.ctx.Done() // the session has ended on the server
					synctest.Wait()
					buf := make([]byte, 16)
					for i := range sent {
						n, err := p.l.Read(buf)
						require.NoError(t, err, "datagram %d of %d, queued before the session ended", i, sent)
						require.Equal(t, []byte{byte(i)}, buf[:n], "in order")
					}
					_, err := p.l.Read(buf)
					require.Error(t, err, "then the end")
					code, reason := p.l.ReadEnd(err)
					assert.Equal(t, end.code, code)
					assert.Equal(t, end.reason, reason)
				})
			})
		}
	}
}

// TestLinkReadEndsWithTheLink: a Read waiting on a session whose client
// never ends it returns once the link's Close or Cut has ended it, and
// leaves no goroutine behind (synctest.Test fails if one is left).
func TestLinkReadEndsWithTheLink(t *testing.T) {
	quietQUIC(t)
	for _, family := range linkFamilies {
		for _, end := range []struct {
			name string
			end  func(l *link)
		}{
			{"Close", func(l *link) { l.Close(websocket.StatusGoingAway, "bridge closing") }},
			{"Cut", func(l *link) { l.Cut() }},
		} {
			t.Run(family.name+"/"+end.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := newLinkPair(t, netip.MustParseAddrPort(family.addr))
					defer p.stop()
					read := make(chan error, 1)
					go func() {
						buf := make([]byte, 16)
						for {
							if _, err := p.l.Read(buf); err != nil {
								read <- err
								return
							}
						}
					}()
					require.NoError(t, p.client.SendDatagram([]byte{1}))
					synctest.Wait() // read, and waiting for more
					require.Empty(t, read)
					end.end(p.l)
					require.Error(t, <-read)
				})
			})
		}
	}
}
