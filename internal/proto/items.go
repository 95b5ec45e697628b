package legionpb

import (
	"cmp"
	"slices"
)

// ItemsPut is put as Items.put carries it: one entry per key, in key
// order.
func ItemsPut(put map[string][]byte) []*Item {
	if len(put) == 0 {
		return nil
	}
	items := make([]Item, len(put)) // one allocation for the entries
	out := make([]*Item, 0, len(put))
	for k, v := range put {
		e := &items[len(out)]
		e.Key, e.Value = k, v
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Item) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// PutMap is the items put by key; of two entries of one key, the later
// counts, as when the entries are read as a map.
func (x *Items) PutMap() map[string][]byte {
	put := x.GetPut()
	m := make(map[string][]byte, len(put))
	for _, e := range put {
		m[e.GetKey()] = e.GetValue()
	}
	return m
}
