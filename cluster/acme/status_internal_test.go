package acme

import (
	"context"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/cluster/store/storetest"
)

// A pass's last status write compares with the route as stored: when the
// outcome is the status the pass began with (a renewal from an authority
// that gave the same expiry), the challenges the order wrote meanwhile
// are still replaced.
func TestStatusWriteComparesWithTheStoredRoute(t *testing.T) {
	st := storetest.Solo(t, nil)
	ctx := context.Background()
	o, _ := legion.New(legion.KindRoute)
	r := o.(*legion.Route)
	r.Metadata.Name, r.Metadata.Namespace = "shop", "default"
	r.Spec.Host, r.Spec.Service = "shop.test", "web"
	if _, _, err := st.Put(ctx, r, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &Controller{Store: st}
	c.defaults()
	issued := legion.RouteStatus{Message: "certificate for shop.test valid"}
	set := func(s legion.RouteStatus) {
		t.Helper()
		cur, _, err := st.Get(legion.KindRoute, "default", "shop")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.writeStatus(ctx, cur.(*legion.Route), func(*legion.Route) legion.RouteStatus { return s }); err != nil {
			t.Fatal(err)
		}
	}
	set(issued)
	atPassStart, _, _ := st.Get(legion.KindRoute, "default", "shop") // the pass's copy
	set(legion.RouteStatus{Message: "validating shop.test", Challenges: []legion.ACMEChallenge{{Host: "shop.test", Token: "t", KeyAuthorization: "t.k"}}})
	if err := c.writeStatus(ctx, atPassStart.(*legion.Route), func(*legion.Route) legion.RouteStatus { return issued }); err != nil {
		t.Fatal(err)
	}
	got, _, _ := st.Get(legion.KindRoute, "default", "shop")
	if s := got.(*legion.Route).Status; s.Message != issued.Message || len(s.Challenges) != 0 {
		t.Errorf("status %+v, want %+v", s, issued)
	}
}
