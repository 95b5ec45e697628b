package jail

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Decoding of the kernel's records behind the memory count, kept portable
// so it is tested anywhere; the FreeBSD source (vmsource_freebsd.go) only
// fetches the bytes. Layouts are struct kinfo_vmentry and struct
// kinfo_vmobject of FreeBSD 14 and 15 <sys/user.h> on 64-bit machines,
// both little-endian (amd64, arm64). Each record starts with its own size,
// as the path at its end is cut short. Any record that does not add up is
// refused, so a layout change fails the count (and the rctl backstop
// holds) rather than miscount.

// KVME_TYPE_* of <sys/user.h>.
const (
	kvmeTypeDefault = 1
	kvmeTypeVnode   = 2
	kvmeTypeSwap    = 3
)

// Offsets in struct kinfo_vmentry.
const (
	kveType       = 4
	kveStart      = 8
	kveEnd        = 16
	kveOffset     = 24
	kveFileID     = 32
	kveResident   = 48
	kveTypeSpec   = 88 // kve_vn_fsid for vnodes, kve_obj otherwise
	kvePath       = 136
	kveMinimumLen = kvePath
)

// Offsets in struct kinfo_vmobject.
const (
	kvoType       = 4
	kvoResident   = 40
	kvoTypeSpec   = 64 // kvo_backing_obj for anonymous objects
	kvoMe         = 72
	kvoPath       = 160
	kvoMinimumLen = kvoPath
)

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// DecodeVMMap reads the records of sysctl kern.proc.vmmap.<pid>. Shared
// memory, for which the map names no object, is told apart by the path
// the kernel gives it (pathShm).
func DecodeVMMap(b []byte, pageSize int64) ([]Mapping, error) {
	le := binary.LittleEndian
	var out []Mapping
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("kern.proc.vmmap: %d trailing bytes", len(b)-off)
		}
		size := int(int32(le.Uint32(b[off:])))
		if size < kveMinimumLen || size > len(b)-off {
			return nil, fmt.Errorf("kern.proc.vmmap: record at %d: size %d, expected %d to %d", off, size, kveMinimumLen, len(b)-off)
		}
		r := b[off : off+size]
		off += size
		m := Mapping{
			Start:    le.Uint64(r[kveStart:]),
			End:      le.Uint64(r[kveEnd:]),
			Offset:   le.Uint64(r[kveOffset:]),
			Resident: uint64(le.Uint32(r[kveResident:])),
		}
		if m.End <= m.Start || int64(m.Resident) > int64(m.End-m.Start)/pageSize+1 {
			return nil, fmt.Errorf("kern.proc.vmmap: record %x-%x with %d resident pages: does not add up (layout changed?)", m.Start, m.End, m.Resident)
		}
		path := cString(r[kvePath:])
		switch int32(le.Uint32(r[kveType:])) {
		case kvmeTypeVnode:
			m.Kind = MapFile
			m.File = fmt.Sprintf("%x:%x", le.Uint64(r[kveTypeSpec:]), le.Uint64(r[kveFileID:]))
		case kvmeTypeDefault, kvmeTypeSwap:
			if kind, name, ok := pathShm(path); ok {
				m.Kind, m.Name = kind, name
				break
			}
			m.Kind = MapAnon
			m.Object = le.Uint64(r[kveTypeSpec:])
		default:
			m.Kind = MapOther
		}
		out = append(out, m)
	}
	return out, nil
}

// pathShm recognises shared memory by the path the map gives an
// anonymous mapping: plain anonymous memory has none; a POSIX segment has
// its name or SHM_ANON; anything else names a SysV segment.
func pathShm(path string) (kind, name string, ok bool) {
	switch {
	case path == "":
		return "", "", false
	case path == "SHM_ANON" || strings.HasPrefix(path, "/"):
		return MapPosixShm, path, true
	}
	return MapSysV, path, true
}

// DecodeVMObjects reads the records of sysctl vm.swap_objects.
func DecodeVMObjects(b []byte) ([]VMObject, error) {
	le := binary.LittleEndian
	var out []VMObject
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("vm.swap_objects: %d trailing bytes", len(b)-off)
		}
		size := int(int32(le.Uint32(b[off:])))
		if size < kvoMinimumLen || size > len(b)-off {
			return nil, fmt.Errorf("vm.swap_objects: record at %d: size %d, expected %d to %d", off, size, kvoMinimumLen, len(b)-off)
		}
		r := b[off : off+size]
		off += size
		o := VMObject{Addr: le.Uint64(r[kvoMe:]), Backing: le.Uint64(r[kvoTypeSpec:]), Resident: le.Uint64(r[kvoResident:])}
		if o.Addr == 0 {
			return nil, fmt.Errorf("vm.swap_objects: record at %d has no handle (layout changed?)", off-size)
		}
		out = append(out, o)
	}
	return out, nil
}
