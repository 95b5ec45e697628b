// Package netplan reads and writes the cluster's address plan in the
// store: written once by init, read by the VIP allocator and by the
// dispatcher, which tells each node its ranges. It imports the object
// model, the store and netbsd/addrplan only.
package netplan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/netbsd/addrplan"
)

// Getter reads one object, as *store.Store does.
type Getter interface {
	Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error)
}

// Read is the cluster's address plan as init stored it, or the
// default plan for a cluster initialised before ranges were stored.
func Read(st Getter) (addrplan.Plan, error) {
	o, _, err := st.Get(legion.KindConfig, legion.SystemNamespace, addrplan.ConfigName)
	if errors.Is(err, store.ErrNotFound) {
		return addrplan.Default(), nil
	}
	if err != nil {
		return addrplan.Plan{}, err
	}
	c, ok := o.(*legion.Config)
	if !ok {
		return addrplan.Plan{}, fmt.Errorf("config %s/%s: not a Config", legion.SystemNamespace, addrplan.ConfigName)
	}
	var p addrplan.Plan
	if err := json.Unmarshal(c.Spec.Data, &p); err != nil {
		return addrplan.Plan{}, fmt.Errorf("config %s/%s: expected the JSON of an address plan: %w", legion.SystemNamespace, addrplan.ConfigName, err)
	}
	if err := p.Validate(); err != nil {
		return addrplan.Plan{}, fmt.Errorf("config %s/%s: %w", legion.SystemNamespace, addrplan.ConfigName, err)
	}
	return p, nil
}

// Write stores the plan init chose; it is written once and never
// changed, since every pod address and VIP is in it.
func Write(ctx context.Context, st *store.Store, p addrplan.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	c := &legion.Config{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindConfig,
		Metadata: legion.Metadata{Name: addrplan.ConfigName, Namespace: legion.SystemNamespace}}}
	c.Spec.Data = data
	if _, _, err := st.Put(ctx, c, store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}}); err != nil {
		return fmt.Errorf("storing the cluster's ranges: %w", err)
	}
	return nil
}
