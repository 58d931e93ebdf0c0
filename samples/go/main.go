// Command mlp is the 2-layer MLP sample through the Go binding; the same
// program exists in C (samples/c/mlp.c), Rust and Python, and all print the
// same checksum.
//
//	y = relu(x @ w1 + b1) @ w2 + b2
//	x [4,64] input; w1 [64,128], b1 [128]; w2 [128,32], b2 [32]; y [4,32]
//
// Weights are allocated once as resident tensors on the context's default
// device (host memory embedded, the server when GENIE_MASTER_ADDR is set)
// and hold the seeded values of include/genie_seed.h (a function of each
// value's name), reimplemented below.
package main

import (
	"fmt"
	"math"
	"os"
	"strings"

	"genie.dev/genie"
)

// seeded returns the seeded f32 values of value name with shape: FNV-1a 64
// of the name seeds splitmix64; each value is uniform in [-s, s) with
// s = 1/sqrt(last dimension).
func seeded(name string, shape []int64) []float32 {
	state := uint64(0xcbf29ce484222325)
	for i := 0; i < len(name); i++ {
		state ^= uint64(name[i])
		state *= 0x100000001b3
	}
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	scale := 1.0
	if len(shape) > 0 && shape[len(shape)-1] > 0 {
		scale = 1.0 / math.Sqrt(float64(shape[len(shape)-1]))
	}
	out := make([]float32, n)
	for i := range out {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		r := z ^ (z >> 31)
		u := float64(float64(r>>40) / 16777216.0)
		out[i] = float32(float64(u*2-1) * scale)
	}
	return out
}

var shapes = map[string][]int64{
	"x": {4, 64}, "w1": {64, 128}, "b1": {128}, "w2": {128, 32}, "b2": {32},
}
var inputOrder = []string{"x", "w1", "b1", "w2", "b2"}

func buildGraph() (*genie.Graph, error) {
	g, err := genie.NewGraph("mlp")
	if err != nil {
		return nil, err
	}
	steps := []func() error{}
	for _, name := range inputOrder {
		name := name
		steps = append(steps, func() error { return g.AddInput(name, genie.F32, shapes[name]) })
	}
	node := func(op, name string, ins []string, out string, layer int, module string) {
		steps = append(steps,
			func() error { return g.AddNode(op, name, ins, []string{out}) },
			func() error { return g.SetPhase(name, genie.PhaseForward) },
			func() error { return g.SetLayer(name, layer) },
			func() error { return g.SetModule(name, module) })
	}
	node("matmul", "fc1.matmul", []string{"x", "w1"}, "fc1.mm", 0, "mlp.fc1")
	node("add", "fc1.bias", []string{"fc1.mm", "b1"}, "fc1.out", 0, "mlp.fc1")
	node("relu", "act1", []string{"fc1.out"}, "act1.out", 0, "mlp.act1")
	node("matmul", "fc2.matmul", []string{"act1.out", "w2"}, "fc2.mm", 1, "mlp.fc2")
	node("add", "fc2.bias", []string{"fc2.mm", "b2"}, "y", 1, "mlp.fc2")
	roles := []struct {
		value string
		role  genie.Role
	}{
		{"x", genie.RoleInput}, {"w1", genie.RoleWeight}, {"b1", genie.RoleWeight},
		{"w2", genie.RoleWeight}, {"b2", genie.RoleWeight}, {"fc1.out", genie.RoleActivation},
		{"act1.out", genie.RoleActivation}, {"y", genie.RoleOutput},
	}
	for _, r := range roles {
		r := r
		steps = append(steps, func() error { return g.SetRole(r.value, r.role) })
	}
	steps = append(steps, func() error { return g.MarkOutput("y") }, g.Validate)
	for _, step := range steps {
		if err := step(); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

func run() error {
	g, err := buildGraph()
	if err != nil {
		return fmt.Errorf("building the graph: %w", err)
	}
	defer g.Close()
	ctx, err := genie.Init(nil) // embedded, or remote when GENIE_MASTER_ADDR is set
	if err != nil {
		return err
	}
	defer ctx.Close()
	mode := "remote"
	if ctx.IsEmbedded() {
		mode = "embedded"
	}
	fmt.Printf("mode %s\n", mode)

	inputs := map[string]*genie.Tensor{}
	for _, name := range inputOrder {
		t, err := ctx.TensorFromFloat32(shapes[name], seeded(name, shapes[name]), "")
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer t.Close()
		inputs[name] = t
	}
	fut, err := ctx.Submit(g, inputs)
	if err != nil {
		return err
	}
	defer fut.Close()
	if err := fut.Wait(); err != nil {
		return fmt.Errorf("executing the graph: %w", err)
	}
	y, err := fut.OutputByName("y")
	if err != nil {
		return err
	}
	defer y.Close()
	info, err := y.Info()
	if err != nil {
		return err
	}
	vals, err := y.Float32s()
	if err != nil {
		return err
	}
	dims := make([]string, len(info.Shape))
	for i, d := range info.Shape {
		dims[i] = fmt.Sprint(d)
	}
	sum := 0.0
	for _, v := range vals {
		sum += float64(v)
	}
	fmt.Printf("output y shape [%s] dtype %s\n", strings.Join(dims, ", "), info.DType)
	fmt.Printf("checksum y = %.4f\n", sum)
	return nil
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: mlp (no arguments; GENIE_MASTER_ADDR selects remote mode)")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mlp:", err)
		os.Exit(1)
	}
}
