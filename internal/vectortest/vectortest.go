// Package vectortest reads the golden vectors the C reference produced
// (testdata/netcode-1.02.json in each package that tests against them):
// the JSON types they are written with, and the file's loader.
package vectortest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
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

// Load decodes the vectors file at path into v, after checking that it is
// the golden-vectors format at version FormatVersion and names the
// reference that generated it.
func Load(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var head struct {
		Format        string `json:"format"`
		FormatVersion *int   `json:"format_version"`
		Generator     *struct {
			Reference string `json:"reference"`
		} `json:"generator"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case head.Format != Format:
		return fmt.Errorf("%s: format %q, want %q", path, head.Format, Format)
	case head.FormatVersion == nil:
		return fmt.Errorf("%s: no format_version", path)
	case *head.FormatVersion != FormatVersion:
		return fmt.Errorf("%s: format_version %d, want %d", path, *head.FormatVersion, FormatVersion)
	case head.Generator == nil || head.Generator.Reference == "":
		return fmt.Errorf("%s: no generator reference", path)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
