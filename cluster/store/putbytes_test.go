package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// A put stores its command's bytes with the metadata replaced
// (withMetadata), not the decoded object encoded again. For every kind,
// objects filled at random (strings that need escaping, times in other
// zones, large numbers, empty and nil lists and maps) are encoded by
// legion.MarshalJSON as a writer encodes them, decoded as a put decodes
// them and given new metadata. What withMetadata makes decodes to that
// very object, the one the put hands its watchers; and wherever
// encoding the decoded object gives the writer's bytes again, it is
// those bytes, as the old encoding wrote them. (Where it does not, as
// for a port named "914" or a list pointer holding nil, the two differ in
// spelling only.) A value that does not survive its own encoding (a
// negative quantity) is refused by the decoding and skipped, as a put of
// it fails.
func TestPutStoresTheObjectItDecoded(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 34))
	for _, kind := range legion.Kinds() {
		decoded, same := 0, 0
		for range 300 {
			o, err := legion.New(kind)
			if err != nil {
				t.Fatal(err)
			}
			fill(rnd, reflect.ValueOf(o).Elem(), 0)
			reflect.ValueOf(o).Elem().FieldByName("Header").Set(reflect.ValueOf(legion.Header{APIVersion: legion.APIVersion, Kind: kind,
				Metadata: *o.GetMetadata()}))
			data, err := legion.MarshalJSON(o)
			if err != nil {
				continue // not encodable: no put is made of it
			}
			in, err := legion.FromJSONAs(kind, data)
			if err != nil || in.GetKind() != kind {
				continue
			}
			decoded++
			again, err := legion.MarshalJSON(in)
			if err != nil {
				t.Fatal(err)
			}
			m := in.GetMetadata()
			m.Name, m.Namespace, m.Version, m.UID, m.Generation = "n-"+randomString(rnd), randomString(rnd), rnd.Uint64(), uidFromIndex(rnd.Uint64N(1<<40)), rnd.Uint64()
			got := withMetadata(data, m)
			back, err := legion.FromJSONAs(kind, got)
			if err != nil || !reflect.DeepEqual(back, in) {
				t.Fatalf("%s: what withMetadata made decodes to another object (%v):\n%s\nthe object:\n%#v", kind, err, got, in)
			}
			if !bytes.Equal(again, data) {
				continue
			}
			same++
			if want, _ := legion.MarshalJSON(in); !bytes.Equal(got, want) {
				t.Fatalf("%s: the command's bytes with the metadata replaced:\n%s\nencoding the decoded object:\n%s", kind, got, want)
			}
		}
		t.Logf("%s: %d decoded, %d same", kind, decoded, same)
		if decoded < 150 || same < 100 {
			t.Errorf("%s: %d of 300 random objects decoded, %d encoded again as they were; want at least 150 and 100", kind, decoded, same)
		}
	}
	// Without a metadata member where MarshalJSON puts it, the caller
	// encodes the object.
	for _, data := range []string{`{"apiVersion":"v1","kind":"Task","spec":{},"metadata":{}}`, `[]`, `{"apiVersion":1`} {
		if got := withMetadata([]byte(data), &legion.Metadata{Name: "x"}); got != nil {
			t.Errorf("withMetadata(%s) = %s, want nil", data, got)
		}
	}
}

// fill sets v, and what it holds, to random values.
func fill(rnd *rand.Rand, v reflect.Value, depth int) {
	if !v.CanSet() {
		return
	}
	switch v.Interface().(type) {
	case time.Time:
		zone := time.UTC
		if rnd.IntN(2) == 0 {
			zone = time.FixedZone("", (rnd.IntN(27)-12)*3600+rnd.IntN(2)*1800)
		}
		v.Set(reflect.ValueOf(time.Unix(rnd.Int64N(1<<34), rnd.Int64N(1e9)*int64(rnd.IntN(2))).In(zone)))
		return
	case time.Duration, legion.Duration:
		v.SetInt(rnd.Int64N(1<<20) * int64(time.Millisecond)) // whole milliseconds, as a Duration must be
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randomString(rnd))
	case reflect.Bool:
		v.SetBool(rnd.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, 1, 80, rnd.Int64N(int64(1) << (v.Type().Bits() - 2))}[rnd.IntN(4)]) // quantities are not negative
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		bits := v.Type().Bits()
		if bits == 64 {
			v.SetUint(rnd.Uint64())
		} else {
			v.SetUint(rnd.Uint64N(1 << bits))
		}
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{0, 0.1, 1e21, -3.5, 123456.789}[rnd.IntN(5)])
	case reflect.Pointer:
		if depth > 6 || rnd.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(rnd, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth > 6 {
			return
		}
		n := rnd.IntN(4) - 1 // -1: nil
		if n < 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rnd, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if depth > 6 || v.Type().Key().Kind() != reflect.String {
			return
		}
		n := rnd.IntN(4) - 1
		if n < 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(randomString(rnd))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(rnd, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rnd, v.Field(i), depth+1)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(rnd, v.Index(i), depth+1)
		}
	}
}

// randomString is one of a few strings JSON writes in their own ways.
func randomString(rnd *rand.Rand) string {
	return []string{"", "a", "web-1", "<b>&c", "é\u2028x", `q"\`, "1e21", "10.0.0.1", "500m", "1Gi", "30s", "tcp", "running",
		fmt.Sprint(rnd.IntN(1000))}[rnd.IntN(14)]
}
