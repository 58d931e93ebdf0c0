package genie_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"genie.dev/genie"
)

func TestClusterStateEmbedded(t *testing.T) {
	ctx := newContext(t, &genie.Options{IgnoreEnv: true, HeartbeatInterval: 1234 * time.Millisecond,
		HeartbeatTimeout: 5678 * time.Millisecond, GPUPollInterval: 910 * time.Millisecond,
		HealthInterval: 1112 * time.Millisecond, DisableGraphDeltas: true})
	st, err := ctx.ClusterState()
	must(t, err)
	if st.Mode != "embedded" || st.Master != nil {
		t.Fatalf("mode %q master %v", st.Mode, st.Master)
	}
	if st.Node.ID != ctx.NodeID() || len(st.Nodes) != 1 || st.Nodes[0].ID != ctx.NodeID() {
		t.Fatalf("node %q nodes %+v (context %q)", st.Node.ID, st.Nodes, ctx.NodeID())
	}
	if st.Backend.Selected != "tcp" || st.Backend.Reason == "" {
		t.Fatalf("backend %+v", st.Backend)
	}
	if len(st.InitPhases) == 0 || st.InitPhases[0].Name != "config" || st.Health.Level == "" {
		t.Fatalf("init phases %+v health %+v", st.InitPhases, st.Health)
	}
	want := map[string]int64{"heartbeat_interval_ms": 1234, "heartbeat_timeout_ms": 5678,
		"gpu_poll_interval_ms": 910, "health_interval_ms": 1112}
	for k, v := range want {
		if st.Intervals[k] != v {
			t.Fatalf("intervals %v, want %v", st.Intervals, want)
		}
	}
	if !strings.Contains(st.JSON, `"init_phases"`) {
		t.Fatalf("JSON %s", st.JSON)
	}
}

func TestClusterMembersNeedsEtcd(t *testing.T) {
	_, err := genie.ClusterMembers(&genie.Options{IgnoreEnv: true})
	expectErr(t, err, genie.ErrInvalidArgument, "etcd")
}

func TestDiscover(t *testing.T) {
	d, err := genie.Discover(nil)
	must(t, err)
	if d.TCP != nil || d.Selection.Selected != "tcp" || d.RDMA.Reason == "" || d.GPUs.Reason == "" {
		t.Fatalf("discovery %+v", d)
	}
	srv, err := genie.NewServer(&genie.Options{IgnoreEnv: true, NodeID: "go-disc"}, "", 0)
	must(t, err)
	defer srv.Close()
	port, err := srv.Port()
	must(t, err)
	d, err = genie.Discover(&genie.DiscoverOptions{Host: "127.0.0.1", Port: port})
	must(t, err)
	if d.TCP == nil || !d.TCP.Reachable || d.TCP.ServerNodeID != "go-disc" {
		t.Fatalf("tcp probe %+v", d.TCP)
	}
	d, err = genie.Discover(&genie.DiscoverOptions{Host: "127.0.0.1", Port: 1})
	must(t, err)
	if d.TCP == nil || d.TCP.Reachable || d.TCP.Reason == "" {
		t.Fatalf("closed port reported as %+v", d.TCP)
	}
	_, err = genie.Discover(&genie.DiscoverOptions{Host: "127.0.0.1", Port: 70000})
	expectErr(t, err, genie.ErrInvalidArgument, "")
}

func TestPlanExplain(t *testing.T) {
	ctx := newContext(t, nil)
	g := buildMLP(t)
	plan, err := ctx.PlanExplain(g)
	must(t, err)
	var names []string
	for _, n := range plan.Nodes {
		names = append(names, n.Name)
		dev := n.Device[strings.LastIndex(n.Device, "/")+1:]
		if !strings.HasPrefix(dev, "cpu") || n.Rule == "" || n.Why == "" {
			t.Fatalf("plan node %+v", n)
		}
	}
	if strings.Join(names, ",") != "fc,act" || len(plan.Devices) == 0 {
		t.Fatalf("plan nodes %v devices %v", names, plan.Devices)
	}
	// The graph is unchanged and still runs.
	checkClose(t, runMLP(t, ctx, g), mlpExpected())

	dyn, err := genie.NewGraph("dyn")
	must(t, err)
	defer dyn.Close()
	must(t, dyn.AddInput("x", genie.F32, []int64{-1, 4}))
	must(t, dyn.AddNode("relu", "r", []string{"x"}, []string{"y"}))
	must(t, dyn.MarkOutput("y"))
	_, err = ctx.PlanExplain(dyn)
	expectErr(t, err, genie.ErrInvalidGraph, "")

	// Bound, the bound size resolves the dynamic dimension.
	for _, rows := range []int64{3, 1000} {
		x, err := ctx.Alloc(genie.F32, []int64{rows, 4}, "")
		must(t, err)
		bp, err := ctx.PlanExplainBound(dyn, map[string]*genie.Tensor{"x": x})
		must(t, err)
		if len(bp.Nodes) != 1 || bp.Nodes[0].Name != "r" || bp.Nodes[0].Bytes != float64(2*rows*4*4) {
			t.Fatalf("bound plan for %d rows: %+v", rows, bp.Nodes)
		}
		x.Close()
	}
	wrong, err := ctx.Alloc(genie.I32, []int64{3, 4}, "")
	must(t, err)
	defer wrong.Close()
	_, err = ctx.PlanExplainBound(dyn, map[string]*genie.Tensor{"x": wrong})
	expectErr(t, err, genie.ErrDtypeMismatch, "")
	closed, err := ctx.Alloc(genie.F32, []int64{3, 4}, "")
	must(t, err)
	closed.Close()
	_, err = ctx.PlanExplainBound(dyn, map[string]*genie.Tensor{"x": closed})
	expectErr(t, err, genie.ErrInvalidHandle, "")
}

func TestSubscribeBackendSelected(t *testing.T) {
	ctx := newContext(t, nil)
	events := make(chan genie.Event, 4)
	sub, err := ctx.Subscribe(genie.EventBackendSelected|genie.EventNodeLost, func(e genie.Event) { events <- e })
	must(t, err)
	if sub.Mask() != genie.EventBackendSelected|genie.EventNodeLost {
		t.Fatalf("mask %v", sub.Mask())
	}
	select {
	case e := <-events:
		if e.Type != genie.EventBackendSelected || e.Fields["backend"] != "tcp" || e.Fields["reason"] == "" ||
			e.Fields["type"] != "BACKEND_SELECTED" || e.TimeMs <= 0 {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("BACKEND_SELECTED was not delivered after subscribing")
	}
	st, err := ctx.ClusterState()
	must(t, err)
	if st.Counters["subscriptions"] != 1 {
		t.Fatalf("counters %v", st.Counters)
	}
	must(t, sub.Close())
	must(t, sub.Close()) // twice: nothing
	st, err = ctx.ClusterState()
	must(t, err)
	if st.Counters["subscriptions"] != 0 {
		t.Fatalf("after Close: counters %v", st.Counters)
	}

	// A panicking callback is recovered; other subscribers still get events.
	bad, err := ctx.Subscribe(genie.EventBackendSelected, func(genie.Event) { panic("on purpose") })
	must(t, err)
	good := make(chan struct{}, 1)
	okSub, err := ctx.Subscribe(genie.EventBackendSelected, func(genie.Event) { good <- struct{}{} })
	must(t, err)
	select {
	case <-good:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery after a panicking callback")
	}
	must(t, bad.Close())
	must(t, okSub.Close())
	if bad.Panic() != "on purpose" {
		t.Fatalf("recovered panic %v", bad.Panic())
	}

	// Closing a subscription from its own callback.
	var mu sync.Mutex
	var self *genie.Subscription
	closed := make(chan error, 1)
	mu.Lock()
	self, err = ctx.Subscribe(genie.EventBackendSelected, func(genie.Event) {
		mu.Lock()
		s := self
		mu.Unlock()
		closed <- s.Close()
	})
	mu.Unlock()
	must(t, err)
	select {
	case err := <-closed:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the self-closing callback did not run")
	}
}

func TestSubscribeNodeLost(t *testing.T) {
	hb := genie.Options{IgnoreEnv: true, HeartbeatInterval: 50 * time.Millisecond,
		HeartbeatTimeout: 200 * time.Millisecond}
	srvOpts := hb
	srvOpts.NodeID = "go-master"
	srv, err := genie.NewServer(&srvOpts, "", 0)
	must(t, err)
	defer srv.Close()
	port, err := srv.Port()
	must(t, err)
	cOpts := hb
	cOpts.MasterAddr, cOpts.MasterPort, cOpts.Timeout = "127.0.0.1", port, 5*time.Second
	ctx := newContext(t, &cOpts)
	st, err := ctx.ClusterState()
	must(t, err)
	if st.Mode != "remote" || st.Master == nil || st.Master.NodeID != "go-master" {
		t.Fatalf("remote state %+v", st)
	}
	lost := make(chan genie.Event, 8)
	sub, err := ctx.Subscribe(genie.EventNodeLost, func(e genie.Event) { lost <- e })
	must(t, err)
	defer sub.Close()
	select {
	case e := <-lost:
		t.Fatalf("NODE_LOST while the master is up: %s", e.JSON)
	case <-time.After(600 * time.Millisecond):
	}
	must(t, srv.Close())
	select {
	case e := <-lost:
		node, _ := e.Fields["node"].(map[string]interface{})
		if e.Type != genie.EventNodeLost || node["id"] != "go-master" || e.Fields["reason"] == "" {
			t.Fatalf("event %s", e.JSON)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no NODE_LOST after the master stopped")
	}
}

func TestClusterBadInput(t *testing.T) {
	ctx, err := genie.Init(&genie.Options{IgnoreEnv: true})
	must(t, err)
	nop := func(genie.Event) {}
	_, err = ctx.Subscribe(0, nop)
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = ctx.Subscribe(1<<9, nop)
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = ctx.Subscribe(genie.EventAll, nil)
	expectErr(t, err, genie.ErrInvalidArgument, "nil")
	sub, err := ctx.Subscribe(genie.EventAll, nop)
	must(t, err)
	must(t, ctx.Close())
	must(t, sub.Close()) // ended with the context
	_, err = ctx.ClusterState()
	expectErr(t, err, genie.ErrInvalidHandle, "closed")
	_, err = ctx.Subscribe(genie.EventAll, nop)
	expectErr(t, err, genie.ErrInvalidHandle, "closed")
	g := buildMLP(t)
	_, err = ctx.PlanExplain(g)
	expectErr(t, err, genie.ErrInvalidHandle, "closed")
	_, err = genie.Init(&genie.Options{IgnoreEnv: true, HeartbeatInterval: 5 * time.Millisecond})
	expectErr(t, err, genie.ErrInvalidArgument, "")
	if s := (genie.EventNodeLost | genie.EventHealthChanged).String(); s != "NODE_LOST|HEALTH_CHANGED" {
		t.Fatalf("EventType.String %q", s)
	}
}
