package backend_test

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/token"
)

// A token backend that knows one player by a bearer secret. In production
// the key comes from crypto.ReadKeyFile, the secret check from your login
// system, and the handler is served over HTTPS.
func ExampleNewHandler() {
	key, err := crypto.GenerateKey() // shared with the game servers
	if err != nil {
		log.Fatal(err)
	}
	secret := sha256.Sum256([]byte("s3cret-of-player-42"))
	h, err := backend.NewHandler(&backend.Config{
		ProtocolID: 0x6e6574636f646531,
		PrivateKey: key,
		Authenticate: func(r *http.Request) (backend.Identity, error) {
			got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], secret[:]) != 1 {
				return backend.Identity{}, backend.ErrUnauthorized
			}
			return backend.Identity{ClientID: 42, UserData: []byte("rank=gold")}, nil
		},
		Servers: []backend.Server{
			{Addr: netip.MustParseAddrPort("192.0.2.10:40000")},
			{Addr: netip.MustParseAddrPort("192.0.2.11:40000")},
		},
		Challenge: `Bearer realm="game"`,
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h) // use httptest.NewTLSServer or http.ListenAndServeTLS for real
	defer srv.Close()

	for _, auth := range []string{"Bearer wrong", "Bearer s3cret-of-player-42"} {
		req, _ := http.NewRequest("POST", srv.URL+"/token", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status, resp.Header.Get("Content-Type"), len(body))
		if resp.StatusCode == http.StatusOK {
			tok, err := token.Parse(body)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("servers:", tok.ServerAddrs)
		}
	}
	// Output:
	// 401 Unauthorized text/plain; charset=utf-8 13
	// 200 OK application/octet-stream 2048
	// servers: [192.0.2.10:40000 192.0.2.11:40000]
}

// A token service for Cute Framework clients: Config.Cute makes the
// handler mint Cute Protocol tokens with the deployment's signing key.
func ExampleNewHandler_cute() {
	_, secretKey := cute.GenerateKeyPair() // the game servers hold the same pair
	h, err := backend.NewHandler(&backend.Config{
		Cute: &backend.CuteTokens{ApplicationID: 0x1234, SecretKey: secretKey},
		Authenticate: func(r *http.Request) (backend.Identity, error) {
			return backend.Identity{ClientID: 42}, nil // your login check here
		},
		Servers: []backend.Server{{Addr: netip.MustParseAddrPort("192.0.2.10:5000")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/token", "", nil)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t, err := cute.ParseToken(body)
	fmt.Println(resp.Status, len(body), err, t.ServerAddrs[0])
	// Output: 200 OK 1114 <nil> 192.0.2.10:5000
}
