package gotest

import (
	"context"
	"fmt"
	"os"
	rtrace "runtime/trace"
	"sort"
	"testing"
	"time"

	"gentrace"
)

// benchOps is the traced program of the benchmark: regions and logs.
func benchOps(b *testing.B) {
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rtrace.WithRegion(ctx, "op", func() {
			rtrace.Log(ctx, "bench", "value")
		})
	}
}

// TestBenchGo (make bench-go; GENTRACE_BENCH=1): the same Go benchmark
// traced into io.Discard and traced through the client into a real
// gentraced, alternating rounds in one run; prints the BENCH line with the
// median of each. The goal (bar) is a ratio within 1.02.
func TestBenchGo(t *testing.T) {
	if os.Getenv("GENTRACE_BENCH") == "" {
		t.Skip("a benchmark: make bench-go")
	}
	d := startDaemon(t, t.TempDir(), "")
	const rounds = 7
	var discard, client []float64
	var st gentrace.Stats
	for r := 0; r < rounds; r++ {
		for _, viaClient := range []bool{r%2 == 1, r%2 == 0} {
			if viaClient {
				if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "bench-go"}); err != nil {
					t.Fatal(err)
				}
			} else if err := rtrace.Start(discardW{}); err != nil {
				t.Fatal(err)
			}
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				benchOps(b)
			})
			ns := float64(res.T.Nanoseconds()) / float64(res.N)
			if viaClient {
				st = gentrace.GetStats()
				if err := gentrace.Stop(); err != nil {
					t.Fatal(err)
				}
				client = append(client, ns)
			} else {
				rtrace.Stop()
				discard = append(discard, ns)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	c, b := med(client), med(discard)
	ratio := c / b
	pass := 0
	if ratio <= 1.02 {
		pass = 1
	}
	t.Logf("client rounds %v ns/op, io.Discard rounds %v ns/op; last client stats %+v", client, discard, st)
	fmt.Printf("BENCH id=go_client_overhead value=%.1f unit=ns/op baseline=io_discard:%.1f ratio=%.3f bar=1.02 pass=%d\n",
		c, b, ratio, pass)
}

type discardW struct{}

func (discardW) Write(p []byte) (int, error) { return len(p), nil }
