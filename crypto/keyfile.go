package crypto

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// maxKeyFileBytes bounds what ReadKeyFile reads: a key file holds 32 bytes,
// or 64 hex digits or 44 base64 characters and a newline.
const maxKeyFileBytes = 4096

// ErrNotAKey is returned (wrapped) for text or a file that does not hold a
// 32-byte key in one of the forms ParseKey accepts.
var ErrNotAKey = errors.New("netcode/crypto: not a 32-byte key in hex or base64")

// ParseKey decodes a key as "netcode keygen" writes it: 64 hex digits, or
// base64 (standard or URL alphabet, padded or not), with surrounding white
// space ignored; or exactly KeyBytes raw bytes that are not printable text.
// An all-zero key is refused: servers refuse it too.
func ParseKey(b []byte) (Key, error) {
	var k Key
	if len(b) == KeyBytes && !isText(b) {
		copy(k[:], b)
		return checkKey(k)
	}
	s := string(bytes.TrimSpace(b))
	if d, err := hex.DecodeString(s); err == nil && len(d) == KeyBytes {
		copy(k[:], d)
		return checkKey(k)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if d, err := enc.DecodeString(s); err == nil && len(d) == KeyBytes {
			copy(k[:], d)
			return checkKey(k)
		}
	}
	return Key{}, ErrNotAKey
}

// ErrZeroKey is returned (possibly wrapped) for an all-zero key, a key
// anyone could mint connect tokens with, which servers refuse. It is a kind
// of ErrNotAKey: errors.Is(err, ErrNotAKey) holds for it too.
var ErrZeroKey error = zeroKeyError{}

type zeroKeyError struct{}

func (zeroKeyError) Error() string        { return "netcode/crypto: the key is all zeros" }
func (zeroKeyError) Is(target error) bool { return target == ErrNotAKey }

func checkKey(k Key) (Key, error) {
	if k == (Key{}) {
		return Key{}, ErrZeroKey
	}
	return k, nil
}

// ReadKeyFile reads the key in the named file, in any form ParseKey
// accepts ("netcode keygen -o" writes one).
//
// A missing file gives an error for which errors.Is(err, fs.ErrNotExist)
// is true; a file that is not a regular file, is larger than 4096
// bytes or holds no key gives an error naming the file.
//
// exposed reports a file that its permission bits let the group or others
// read. The key is read anyway; the caller should warn, because anyone who
// holds the key can mint connect tokens for every server that uses it.
// On Windows, where permission bits do not describe who may read a file,
// exposed is always false.
func ReadKeyFile(name string) (key Key, exposed bool, err error) {
	f, err := os.Open(name)
	if err != nil {
		return Key{}, false, err // an *fs.PathError naming the file
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Key{}, false, err
	}
	if !st.Mode().IsRegular() {
		return Key{}, false, fmt.Errorf("key file %s: not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return Key{}, false, fmt.Errorf("key file %s: %w", name, err)
	}
	if len(b) > maxKeyFileBytes {
		return Key{}, false, fmt.Errorf("key file %s: larger than %d bytes, not a key file", name, maxKeyFileBytes)
	}
	key, err = ParseKey(b)
	if err != nil {
		return Key{}, false, fmt.Errorf("key file %s: %w", name, err)
	}
	exposed = runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0
	return key, exposed, nil
}

// isText reports whether b is printable ASCII and white space.
func isText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}
