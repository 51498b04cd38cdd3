package vectortest

import (
	"path/filepath"
	"runtime"
)

// Path returns the path of internal/testing/vectortest/testdata/name, so that a
// test in any package can read a vectors file kept there, whatever its
// working directory.
func Path(name string) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("testdata", name)
	}
	return filepath.Join(filepath.Dir(file), "testdata", name)
}

// CutePath returns the path of the Cute Protocol vectors file name
// (primitives.json, token.json, packets.json, replay.json,
// transcript.json, and transport/ack.json, transport/transport.json,
// transport/transcript.json: Cute Framework's client/server layer) in
// internal/testing/vectortest/testdata/cute.
func CutePath(name string) string { return Path(filepath.Join("cute", name)) }
