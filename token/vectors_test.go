package token_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/gonetcode/netcode/token"
)

// hexBytes is a byte string written as hex in the vectors file.
type hexBytes = vectortest.Hex

type vecAddr struct {
	Address string   `json:"address"`
	Type    int      `json:"type"`
	Port    uint16   `json:"port"`
	Encoded hexBytes `json:"encoded"`
}

// addrPort parses the vectors' address strings, which may lack a port.
func (a vecAddr) addrPort(t testing.TB) netip.AddrPort {
	t.Helper()
	if ap, err := netip.ParseAddrPort(a.Address); err == nil {
		return ap
	}
	ip, err := netip.ParseAddr(strings.Trim(a.Address, "[]"))
	require.NoError(t, err, a.Address)
	return netip.AddrPortFrom(ip, 0)
}

func addrList(t testing.TB, in []vecAddr) []netip.AddrPort {
	out := make([]netip.AddrPort, len(in))
	for i, a := range in {
		out[i] = a.addrPort(t)
	}
	return out
}

type vecTokenInputs struct {
	ClientID          uint64    `json:"client_id,string"`
	ClientToServerKey hexBytes  `json:"client_to_server_key"`
	ServerToClientKey hexBytes  `json:"server_to_client_key"`
	CreateTimestamp   uint64    `json:"create_timestamp,string"`
	ExpireTimestamp   uint64    `json:"expire_timestamp,string"`
	Internal          []vecAddr `json:"internal_server_addresses"`
	Public            []vecAddr `json:"public_server_addresses"`
	Nonce             hexBytes  `json:"nonce"`
	PrivateKey        hexBytes  `json:"private_key"`
	ProtocolID        uint64    `json:"protocol_id,string"`
	TimeoutSeconds    int32     `json:"timeout_seconds"`
	UserData          hexBytes  `json:"user_data"`
	VersionInfo       hexBytes  `json:"version_info"`
}

type vecConnectToken struct {
	Name                 string         `json:"name"`
	Inputs               vecTokenInputs `json:"inputs"`
	PrivateUsedBytes     int            `json:"private_used_bytes"`
	PrivatePlaintext     hexBytes       `json:"private_plaintext"`
	PrivateAD            hexBytes       `json:"private_associated_data"`
	PrivateEncrypted     hexBytes       `json:"private_encrypted"`
	PrivateMAC           hexBytes       `json:"private_mac"`
	PublicUsedBytes      int            `json:"public_used_bytes"`
	ConnectToken         hexBytes       `json:"connect_token"`
	ConnectionRequestPkt hexBytes       `json:"connection_request_packet"`
}

type vecInvalidToken struct {
	Name           string   `json:"name"`
	Reason         string   `json:"reason"`
	Base           string   `json:"base"`
	ModifiedOffset int      `json:"modified_offset"`
	ModifiedBytes  hexBytes `json:"modified_bytes"`
	ConnectToken   hexBytes `json:"connect_token"`
}

type vecInvalidPrivate struct {
	Name             string   `json:"name"`
	Reason           string   `json:"reason"`
	Base             string   `json:"base"`
	ModifiedOffset   int      `json:"modified_offset"`
	ModifiedBytes    hexBytes `json:"modified_bytes"`
	PrivatePlaintext hexBytes `json:"private_plaintext"`
	PrivateEncrypted hexBytes `json:"private_encrypted"`
	RequestPacket    hexBytes `json:"connection_request_packet"`
	CurrentTimestamp uint64   `json:"current_timestamp,string"`
}

type vecChallenge struct {
	Name      string   `json:"name"`
	ClientID  uint64   `json:"client_id,string"`
	UserData  hexBytes `json:"user_data"`
	Key       hexBytes `json:"challenge_key"`
	Sequence  uint64   `json:"challenge_token_sequence,string"`
	Nonce     hexBytes `json:"nonce"`
	AD        hexBytes `json:"associated_data"`
	Plaintext hexBytes `json:"plaintext"`
	Encrypted hexBytes `json:"encrypted"`
	MAC       hexBytes `json:"mac"`
}

type vectors struct {
	Format    string `json:"format"`
	Constants struct {
		VersionInfo               hexBytes `json:"version_info"`
		ConnectTokenBytes         int      `json:"connect_token_bytes"`
		ConnectTokenPrivateBytes  int      `json:"connect_token_private_bytes"`
		ConnectTokenNonceBytes    int      `json:"connect_token_nonce_bytes"`
		ChallengeTokenBytes       int      `json:"challenge_token_bytes"`
		KeyBytes                  int      `json:"key_bytes"`
		MACBytes                  int      `json:"mac_bytes"`
		UserDataBytes             int      `json:"user_data_bytes"`
		MaxServersPerConnect      int      `json:"max_servers_per_connect"`
		ConnectionRequestPktBytes int      `json:"connection_request_packet_bytes"`
	} `json:"constants"`
	Common struct {
		PrivateKey        hexBytes `json:"private_key"`
		ProtocolID        uint64   `json:"protocol_id,string"`
		CreateTimestamp   uint64   `json:"create_timestamp,string"`
		ExpireSeconds     int64    `json:"expire_seconds"`
		TimeoutSeconds    int32    `json:"timeout_seconds"`
		ClientID          uint64   `json:"client_id,string"`
		Nonce             hexBytes `json:"connect_token_nonce"`
		ClientToServerKey hexBytes `json:"client_to_server_key"`
		ServerToClientKey hexBytes `json:"server_to_client_key"`
		ChallengeKey      hexBytes `json:"challenge_key"`
		WrongKey          hexBytes `json:"wrong_key"`
		UserData          hexBytes `json:"user_data"`
	} `json:"common_inputs"`
	AddressEncoding      []vecAddr           `json:"address_encoding"`
	ConnectTokens        []vecConnectToken   `json:"connect_tokens"`
	InvalidConnectTokens []vecInvalidToken   `json:"invalid_connect_tokens"`
	InvalidPrivateTokens []vecInvalidPrivate `json:"invalid_private_connect_tokens"`
	ChallengeTokens      []vecChallenge      `json:"challenge_tokens"`
}

func loadVectors(t testing.TB) *vectors {
	t.Helper()
	return vectortest.Once[vectors](t, "netcode-1.02.json", vectortest.Load)
}

func key(t testing.TB, b []byte) crypto.Key {
	t.Helper()
	require.Len(t, b, crypto.KeyBytes)
	return crypto.Key(b)
}

func nonce(t testing.TB, b []byte) [crypto.TokenNonceBytes]byte {
	t.Helper()
	require.Len(t, b, crypto.TokenNonceBytes)
	return [crypto.TokenNonceBytes]byte(b)
}

func userData(t testing.TB, b []byte) [token.UserDataBytes]byte {
	t.Helper()
	require.Len(t, b, token.UserDataBytes)
	return [token.UserDataBytes]byte(b)
}

// params builds the token parameters a connect token vector was made from.
func (in *vecTokenInputs) params(t testing.TB) token.Params {
	p := token.Params{
		ProtocolID:     in.ProtocolID,
		ClientID:       in.ClientID,
		PrivateKey:     key(t, in.PrivateKey),
		ServerAddrs:    addrList(t, in.Public),
		InternalAddrs:  addrList(t, in.Internal),
		TimeoutSeconds: in.TimeoutSeconds,
		UserData:       userData(t, in.UserData),
	}
	if in.ExpireTimestamp == math.MaxUint64 {
		p.NeverExpire = true
	} else {
		p.ExpireSeconds = int64(in.ExpireTimestamp - in.CreateTimestamp)
	}
	return p
}

// findToken returns the connect token vector of that name.
func findToken(t testing.TB, v *vectors, name string) *vecConnectToken {
	t.Helper()
	for i := range v.ConnectTokens {
		if v.ConnectTokens[i].Name == name {
			return &v.ConnectTokens[i]
		}
	}
	t.Fatalf("no connect token vector %q", name)
	return nil
}

// assertBytes checks that got equals want, reporting only the first
// difference rather than both byte strings in full.
func assertBytes(t testing.TB, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	window := func(b []byte) string {
		end := min(i+16, len(b))
		if i >= end {
			return "(end)"
		}
		return hex.EncodeToString(b[i:end])
	}
	msg := ""
	if len(msgAndArgs) > 0 {
		msg = fmt.Sprintf(fmt.Sprint(msgAndArgs[0]), msgAndArgs[1:]...) + ": "
	}
	t.Errorf("%sbytes differ: len want %d, got %d; first difference at %d: want %s, got %s",
		msg, len(want), len(got), i, window(want), window(got))
	return false
}

// requireBytes is assertBytes that stops the test.
func requireBytes(t testing.TB, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	if !assertBytes(t, want, got, msgAndArgs...) {
		t.FailNow()
	}
}
