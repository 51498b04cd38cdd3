package vectortest

import (
	"reflect"
	"sync"
	"testing"
)

// onceKey names one decoding of one file: the file and the type it is
// decoded into.
type onceKey struct {
	name string
	typ  reflect.Type
}

// onceEntry is the result of one decoding, made once per process.
type onceEntry struct {
	once sync.Once
	v    any
	err  error
}

var decoded sync.Map // onceKey → *onceEntry

// Once returns the vectors file name (in this package's testdata, as Path
// names it) decoded into a T by load (Load, LoadCute or Decode). Each file is
// read and decoded once per process for each T, however many tests ask, and
// the result is shared: tests must not modify it. Once fails t if the file
// cannot be loaded.
func Once[T any](t testing.TB, name string, load func(path string, v any) error) *T {
	t.Helper()
	e, _ := decoded.LoadOrStore(onceKey{name, reflect.TypeFor[T]()}, new(onceEntry))
	entry := e.(*onceEntry)
	entry.once.Do(func() {
		v := new(T)
		entry.v, entry.err = v, load(Path(name), v)
	})
	if entry.err != nil {
		t.Fatalf("golden vectors %s: %v", name, entry.err)
	}
	return entry.v.(*T)
}

// Decode decodes the JSON file at path into v, for vectors files without
// the netcode head that Load checks (reliable-vectors.json).
func Decode(path string, v any) error {
	return load(path, v, func([]byte) error { return nil })
}
