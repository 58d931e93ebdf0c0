// Command binding_overhead is the Go side of bench/binding_overhead.sh: the
// per-call cost of submitting a tiny graph (out = a + b, two f32 [4]
// tensors, resident) and waiting for it, embedded, through package genie.
// The C program bench/binding_overhead.c makes the same calls directly.
//
//	binding_overhead [--iters N]
//
// Prints one line: `per_call_ns <mean ns per call>` over N timed calls
// (default 20000) after N/10 untimed ones. A call is Submit + Wait + Close.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"genie.dev/genie"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "binding_overhead:", err)
		os.Exit(1)
	}
}

func main() {
	iters := flag.Int("iters", 20000, "timed calls (after iters/10 untimed)")
	flag.Parse()
	if *iters < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: binding_overhead [--iters N]")
		os.Exit(2)
	}
	ctx, err := genie.Init(nil)
	check(err)
	defer ctx.Close()
	if !ctx.IsEmbedded() {
		check(fmt.Errorf("unset GENIE_MASTER_ADDR: this benchmark runs embedded"))
	}
	g, err := genie.NewGraph("tiny_add")
	check(err)
	defer g.Close()
	check(g.AddInput("a", genie.F32, []int64{4}))
	check(g.AddInput("b", genie.F32, []int64{4}))
	check(g.AddNode("add", "add", []string{"a", "b"}, []string{"out"}))
	check(g.MarkOutput("out"))
	a, err := ctx.TensorFromFloat32([]int64{4}, []float32{1, 2, 3, 4}, "")
	check(err)
	defer a.Close()
	b, err := ctx.TensorFromFloat32([]int64{4}, []float32{10, 20, 30, 40}, "")
	check(err)
	defer b.Close()
	inputs := map[string]*genie.Tensor{"a": a, "b": b}

	var t0 time.Time
	for i := -(*iters / 10); i < *iters; i++ {
		if i == 0 {
			t0 = time.Now()
		}
		f, err := ctx.Submit(g, inputs)
		check(err)
		check(f.Wait())
		f.Close()
	}
	fmt.Printf("per_call_ns %.1f\n", float64(time.Since(t0).Nanoseconds())/float64(*iters))
}
