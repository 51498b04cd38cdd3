package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

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
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: keygen never overwrites a file (a key in use would be lost); remove it first or choose another -o", name)
	}
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

// parseKey reads a key given as hex or base64 text, or as the name of a
// file holding such text (or the 32 raw bytes), with crypto.ReadKeyFile. A
// key file that others may read gets a warning on warn.
//
// Its errors have one shape: "key file NAME: what is wrong" for a file,
// "-key: what is wrong" for a key given as text (never quoted: it may be a
// secret).
func parseKey(s string, warn io.Writer) (crypto.Key, error) {
	if s == "" {
		return crypto.Key{}, errors.New("no key: give -key a key in hex or base64, or a key file (netcode keygen -o server.key makes one)")
	}
	if _, err := os.Lstat(s); err == nil {
		k, exposed, err := crypto.ReadKeyFile(s)
		if err != nil {
			return k, keyError("key file "+s, err)
		}
		if exposed {
			fmt.Fprintf(warn, "netcode: warning: key file %s is readable by other users; anyone with the key can mint tokens (chmod 600 %s)\n", s, s)
		}
		return k, nil
	}
	k, err := crypto.ParseKey([]byte(s))
	if err == nil {
		return k, nil
	}
	if errors.Is(err, crypto.ErrNotAKey) && !errors.Is(err, crypto.ErrZeroKey) && looksLikeFileName(s) {
		// A path: say that the file is missing.
		return k, fmt.Errorf("key file %s: %w (nor is it a key in hex or base64)", s, fs.ErrNotExist)
	}
	// Anything else (zz12, a key one digit short) is worded alike, and
	// never quoted: it may be a secret.
	return k, keyError("-key", err)
}

// keyError says what is wrong with the key from where (a file or -key), in
// the words of the key errors that have one.
func keyError(where string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, crypto.ErrZeroKey):
		return fmt.Errorf("%s: %w: anyone could mint tokens with it, and servers refuse it (netcode keygen makes a random one)", where, crypto.ErrZeroKey)
	case errors.Is(err, crypto.ErrNotAKey) && where == "-key":
		return fmt.Errorf("%s: %w, and no file of that name exists", where, crypto.ErrNotAKey)
	case errors.Is(err, crypto.ErrNotAKey):
		return fmt.Errorf("%s: %w", where, crypto.ErrNotAKey)
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", where, pe.Err) // the name is in where
	}
	return err // crypto.ReadKeyFile's own, which name the file
}

// looksLikeFileName reports whether s is meant as a file name rather than
// a key: it has a path separator or a dot, which neither a hex nor a base64
// key has.
func looksLikeFileName(s string) bool {
	return strings.ContainsAny(s, `/\.`)
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
