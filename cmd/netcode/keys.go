package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
)

// defaultProtocolID is "netcode1" in ASCII.
const defaultProtocolID = 0x6e6574636f646531

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", "[-base64] [-o file]", stdout, stderr)
	b64 := fs.Bool("base64", false, "print the key in base64 instead of hex")
	out := fs.String("o", "", "write the key to this file (created with mode 0600; an existing file is never overwritten) instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	text := formatKey(key, *b64) + "\n"
	if *out == "" {
		_, err = io.WriteString(stdout, text)
		return err
	}
	return writeNew(*out, []byte(text))
}

// writeNew writes a secret file, refusing to overwrite an existing one.
func writeNew(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func formatKey(k crypto.Key, b64 bool) string {
	if b64 {
		return base64.StdEncoding.EncodeToString(k[:])
	}
	return hex.EncodeToString(k[:])
}

// parseKey reads a key given as hex or base64 text, or as the name of a file
// holding such text (or the 32 raw bytes). A key file that group or others
// may read draws a warning on warn.
func parseKey(s string, warn io.Writer) ([netcode.KeyBytes]byte, error) {
	var key [netcode.KeyBytes]byte
	if s == "" {
		return key, errors.New("no key: use -key with a key in hex or base64, or a key file")
	}
	if b, err := decodeKeyText(s); err == nil {
		copy(key[:], b)
		return key, nil
	}
	st, err := os.Stat(s)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return key, fmt.Errorf("-key %s: no such key file (and not a 32-byte key in hex or base64)", s)
	case err != nil:
		return key, fmt.Errorf("-key: %w", err)
	case !st.Mode().IsRegular():
		return key, fmt.Errorf("-key %s: not a regular file", s)
	case st.Size() > 4096:
		return key, fmt.Errorf("key file %s is too large", s)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(warn, "netcode: warning: key file %s is readable by group or others (mode %#o); make it private: chmod 600 %s\n",
			s, st.Mode().Perm(), s)
	}
	b, err := os.ReadFile(s)
	if err != nil {
		return key, err
	}
	if len(b) == netcode.KeyBytes && !isText(b) {
		copy(key[:], b)
		return key, nil
	}
	d, err := decodeKeyText(string(bytes.TrimSpace(b)))
	if err != nil {
		return key, fmt.Errorf("key file %s does not hold a 32-byte key in hex or base64", s)
	}
	copy(key[:], d)
	return key, nil
}

func decodeKeyText(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == netcode.KeyBytes {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == netcode.KeyBytes {
			return b, nil
		}
	}
	return nil, errors.New("not a key")
}

func isText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			if c != '\n' && c != '\r' && c != '\t' {
				return false
			}
		}
	}
	return true
}

// protocolFlag is a uint64 flag that accepts decimal and 0x hex.
type protocolFlag uint64

func (p *protocolFlag) String() string { return fmt.Sprintf("%#x", uint64(*p)) }

func (p *protocolFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return errors.New("not a 64-bit unsigned integer (decimal or 0x hex)")
	}
	*p = protocolFlag(v)
	return nil
}
