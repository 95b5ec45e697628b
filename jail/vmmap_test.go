package jail

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// vmentry builds one kinfo_vmentry record in the kernel's layout, its
// path cut short as the kernel does.
func vmentry(typ int32, start, end, offset, fileid uint64, resident int32, spec uint64, path string) []byte {
	size := (kvePath + len(path) + 1 + 7) &^ 7
	b := make([]byte, size)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(size))
	le.PutUint32(b[kveType:], uint32(typ))
	le.PutUint64(b[kveStart:], start)
	le.PutUint64(b[kveEnd:], end)
	le.PutUint64(b[kveOffset:], offset)
	le.PutUint64(b[kveFileID:], fileid)
	le.PutUint32(b[kveResident:], uint32(resident))
	le.PutUint64(b[kveTypeSpec:], spec)
	copy(b[kvePath:], path)
	return b
}

func vmobject(me, backing, resident uint64) []byte {
	b := make([]byte, kvoPath+8)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(b)))
	le.PutUint32(b[kvoType:], kvmeTypeSwap)
	le.PutUint64(b[kvoResident:], resident)
	le.PutUint64(b[kvoTypeSpec:], backing)
	le.PutUint64(b[kvoMe:], me)
	return b
}

func TestDecodeVMMap(t *testing.T) {
	t.Parallel()
	var b []byte
	b = append(b, vmentry(kvmeTypeVnode, 0x1000, 0x11000, 0x2000, 77, 16, 0x5a, "/lib/libc.so.7")...)
	b = append(b, vmentry(kvmeTypeDefault, 0x20000, 0x40000, 0, 0, 3, 0xfffff800abc, "")...)
	b = append(b, vmentry(kvmeTypeSwap, 0x800000, 0x900000, 0, 0, 40, 0, "SHM_ANON")...)
	b = append(b, vmentry(kvmeTypeSwap, 0xa00000, 0xb00000, 0, 0, 10, 0, "/pgsql.5432")...)
	b = append(b, vmentry(kvmeTypeSwap, 0xc00000, 0xd00000, 0, 0, 12, 0, "SYSV shm key 5432001")...)
	b = append(b, vmentry(4 /* device */, 0xe00000, 0xe01000, 0, 0, 0, 0, "")...)
	got, err := DecodeVMMap(b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x1000, End: 0x11000, Offset: 0x2000, Kind: MapFile, File: "5a:4d", Resident: 16},
		{Start: 0x20000, End: 0x40000, Kind: MapAnon, Object: 0xfffff800abc, Resident: 3},
		{Start: 0x800000, End: 0x900000, Kind: MapPosixShm, Name: "SHM_ANON", Resident: 40},
		{Start: 0xa00000, End: 0xb00000, Kind: MapPosixShm, Name: "/pgsql.5432", Resident: 10},
		{Start: 0xc00000, End: 0xd00000, Kind: MapSysV, Name: "SYSV shm key 5432001", Resident: 12},
		{Start: 0xe00000, End: 0xe01000, Kind: MapOther},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	// Records that do not add up are refused: a changed layout must fail
	// the count, not miscount it.
	for name, bad := range map[string][]byte{
		"short size":        {8, 0, 0, 0, 1, 0, 0, 0},
		"size past the end": vmentry(kvmeTypeDefault, 0, 0x1000, 0, 0, 1, 1, "")[:100],
		"end before start":  vmentry(kvmeTypeDefault, 0x2000, 0x1000, 0, 0, 1, 1, ""),
		"too many resident": vmentry(kvmeTypeDefault, 0x1000, 0x2000, 0, 0, 500, 1, ""),
		"trailing bytes":    append(vmentry(kvmeTypeDefault, 0x1000, 0x2000, 0, 0, 1, 1, ""), 1, 2),
	} {
		if _, err := DecodeVMMap(bad, 4096); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestDecodeVMObjects(t *testing.T) {
	t.Parallel()
	b := append(vmobject(0x10, 0, 100), vmobject(0x20, 0x10, 10)...)
	got, err := DecodeVMObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]VMObject{{Addr: 0x10, Resident: 100}, {Addr: 0x20, Backing: 0x10, Resident: 10}}, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if _, err := DecodeVMObjects(vmobject(0, 0, 1)); err == nil {
		t.Fatal("an object without a handle must be refused")
	}
}

func FuzzDecodeVMMap(f *testing.F) {
	f.Add(vmentry(kvmeTypeDefault, 0x1000, 0x2000, 0, 0, 1, 1, ""))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		maps, err := DecodeVMMap(b, 4096)
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.End <= m.Start {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}
