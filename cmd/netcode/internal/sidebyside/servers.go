package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/gonetcode/netcode/token"
	"github.com/quic-go/quic-go"
)

// protocolID is the netcode protocol id of the harnesses' tokens.
const protocolID = 0x6e6574636f646531 // "netcode1"

// maxServerClients is the netcode server's slots: every client count the
// harness runs fits.
const maxServerClients = 1024

// alpn is the TLS application protocol of the quic-go connections.
const alpn = "sidebyside"

// netcodeKey returns a new random netcode private key.
func netcodeKey() ([]byte, error) {
	k, err := crypto.GenerateKey()
	return k[:], err
}

// serverConfig is the netcode server both harnesses run: the library's
// defaults, with room for max clients.
func serverConfig(key []byte, max int) (*netcode.ServerConfig, error) {
	var k crypto.Key
	if len(key) != len(k) {
		return nil, fmt.Errorf("a netcode key has %d bytes, not %d", len(k), len(key))
	}
	copy(k[:], key)
	return &netcode.ServerConfig{ProtocolID: protocolID, PrivateKey: k, MaxClients: max}, nil
}

// mint returns a connect token for client id of the server at addr.
func mint(key []byte, addr string, id uint64) ([]byte, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	var k crypto.Key
	copy(k[:], key)
	return token.Generate(&token.Params{
		ProtocolID:     protocolID,
		ClientID:       id,
		PrivateKey:     k,
		ExpireSeconds:  3600,
		TimeoutSeconds: 10,
		ServerAddrs:    []netip.AddrPort{ap},
	})
}

// serverTLS is the quic-go server's TLS configuration: a development
// certificate, which the client does not verify (it is a benchmark).
func serverTLS() (*tls.Config, error) {
	cert, err := devcert.New("127.0.0.1")
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{alpn}}, nil
}

func clientTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}
}

// quicDatagramConfig enables DATAGRAM frames and otherwise keeps quic-go's
// defaults.
func quicDatagramConfig() *quic.Config { return &quic.Config{EnableDatagrams: true} }

// udpBufBytes is the raw UDP echoes' read buffer: more than any datagram
// the harnesses send.
const udpBufBytes = 2048

// serveUDPEcho starts a plain UDP echo server on 127.0.0.1: one socket,
// readers goroutines reading it, a read and a write system call per
// datagram. It returns its address and a function that stops it.
func serveUDPEcho(readers int) (string, func(), error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", nil, err
	}
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			buf := make([]byte, udpBufBytes)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		})
	}
	return c.LocalAddr().String(), func() { c.Close(); wg.Wait() }, nil
}

// serveDatagrams starts an echo server of transport kind on 127.0.0.1 and
// returns its address and a function that stops it.
func serveDatagrams(kind string, key []byte) (string, func(), error) {
	var wg sync.WaitGroup
	switch kind {
	case "udp":
		return serveUDPEcho(runtime.GOMAXPROCS(0))
	case "netcode":
		cfg, err := serverConfig(key, maxServerClients)
		if err != nil {
			return "", nil, err
		}
		l, err := netcode.Listen("udp4", "127.0.0.1:0", cfg)
		if err != nil {
			return "", nil, err
		}
		wg.Go(func() {
			for {
				c, err := l.AcceptConn(context.Background())
				if err != nil {
					return
				}
				wg.Go(func() {
					defer c.Close()
					buf := make([]byte, netcode.MaxPayloadBytes)
					for {
						n, err := c.Read(buf)
						if err != nil {
							return
						}
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
				})
			}
		})
		return l.Addr().String(), func() { l.Close(); wg.Wait() }, nil
	case "quic":
		tc, err := serverTLS()
		if err != nil {
			return "", nil, err
		}
		l, err := quic.ListenAddr("127.0.0.1:0", tc, quicDatagramConfig())
		if err != nil {
			return "", nil, err
		}
		var mu sync.Mutex
		var conns []*quic.Conn
		wg.Go(func() {
			for {
				c, err := l.Accept(context.Background())
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				wg.Go(func() {
					for {
						b, err := c.ReceiveDatagram(context.Background())
						if err != nil {
							return
						}
						// SendDatagram waits while quic-go's send queue
						// is full; it fails once the connection closed.
						if err := c.SendDatagram(b); err != nil {
							return
						}
					}
				})
			}
		})
		stop := func() {
			l.Close()
			mu.Lock()
			for _, c := range conns {
				c.CloseWithError(0, "")
			}
			mu.Unlock()
			wg.Wait()
		}
		return l.Addr().String(), stop, nil
	}
	return "", nil, fmt.Errorf("no datagram transport %q", kind)
}
