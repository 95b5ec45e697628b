package dispatcher

import (
	"iter"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// mayServeHTTPS: every node reads the routes' certificates until one is
// labelled legion.ingress=true; then only labelled ones do.
func mayServeHTTPS(nodes iter.Seq[*legion.Node], node string) bool {
	any := false
	for n := range nodes {
		if n.Metadata.Labels[IngressLabel] == "true" {
			if n.Metadata.Name == node {
				return true
			}
			any = true
		}
	}
	return !any
}

// valueOf is a Secret's or Config's data; a missing one is absent (the
// admission checked it; a deleted one fails the task's start).
func valueOf(st *store.Store, kind legion.Kind, namespace, name string) ([]byte, bool) {
	o, _, err := st.Get(kind, namespace, name)
	if err != nil {
		return nil, false
	}
	switch x := o.(type) {
	case *legion.Secret:
		return x.Spec.Data, true
	case *legion.Config:
		return x.Spec.Data, true
	}
	return nil, false
}
