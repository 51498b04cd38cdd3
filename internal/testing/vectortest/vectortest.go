// Package vectortest reads the golden vectors the C references produced,
// kept once in the module in this package's testdata: netcode-1.02.json
// (mas-bandwidth/netcode), reliable-vectors.json (mas-bandwidth/reliable)
// and cute/*.json (Cute Framework's cute_net.h): the JSON types they are
// written with, and the loaders.
package vectortest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Format is the value of the file's "format" field.
const Format = "netcode-1.02-golden-vectors"

// FormatVersion is the value of the file's "format_version" field: the
// version of the layout these types and the tests read. A file with another
// version is refused rather than misread.
const FormatVersion = 1

// Hex is a byte string written as hex; null decodes as nil.
type Hex []byte

// UnmarshalJSON decodes a hex string.
func (h *Hex) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*h = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	d, err := hex.DecodeString(s)
	*h = d
	return err
}

// U64 is a 64-bit integer, written as a decimal string (JSON numbers lose
// precision past 2^53) or, for small values, a plain number.
type U64 uint64

// UnmarshalJSON decodes a quoted or plain decimal integer.
func (v *U64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	n, err := strconv.ParseUint(s, 10, 64)
	*v = U64(n)
	return err
}

// CuteCommit is the Cute Framework commit whose cute_net.h produced the
// cute/*.json vectors. A file from another commit is refused: its bytes
// may differ.
const CuteCommit = "3075638a47b6497faf6fdb859d2be5b7b0e2611a"

// LoadCute decodes the Cute Protocol vectors file at path (see
// CutePath) into v, after checking that its generator names cute_net.h at
// CuteCommit.
func LoadCute(path string, v any) error {
	return load(path, v, func(b []byte) error {
		var head struct {
			Generator *struct {
				Implementation string `json:"implementation"`
				Commit         string `json:"commit"`
			} `json:"generator"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return err
		}
		switch {
		case head.Generator == nil:
			return fmt.Errorf("no generator")
		case head.Generator.Commit != CuteCommit:
			return fmt.Errorf("generator commit %q, want %q", head.Generator.Commit, CuteCommit)
		case !strings.Contains(head.Generator.Implementation, "cute_net.h"):
			return fmt.Errorf("generator %q is not cute_net.h", head.Generator.Implementation)
		}
		return nil
	})
}

// Load decodes the vectors file at path into v, after checking that it is
// the golden-vectors format at version FormatVersion and names the
// reference that generated it.
func Load(path string, v any) error {
	return load(path, v, checkNetcodeHead)
}

// load reads path, checks its head with check, and decodes it into v.
func load(path string, v any, check func([]byte) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := check(b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checkNetcodeHead checks the format, version and generator of a netcode
// vectors file.
func checkNetcodeHead(b []byte) error {
	var head struct {
		Format        string `json:"format"`
		FormatVersion *int   `json:"format_version"`
		Generator     *struct {
			Reference string `json:"reference"`
		} `json:"generator"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	switch {
	case head.Format != Format:
		return fmt.Errorf("format %q, want %q", head.Format, Format)
	case head.FormatVersion == nil:
		return fmt.Errorf("no format_version")
	case *head.FormatVersion != FormatVersion:
		return fmt.Errorf("format_version %d, want %d", *head.FormatVersion, FormatVersion)
	case head.Generator == nil || head.Generator.Reference == "":
		return fmt.Errorf("no generator reference")
	}
	return nil
}
