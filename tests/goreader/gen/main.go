// Command gogen writes a Go execution trace with a known workload, for the
// tests of gentrace's Go trace reader and importer, and prints what it
// recorded: "regions=R tasks=T logs=L".
//
// A producer goroutine starts tasks and hands each to one of several
// workers over a channel; the worker runs regions inside the task, logs,
// and ends the task, so task begins and ends are on different goroutines.
// The run lasts long enough (-duration) to span several generations (Go
// 1.22+ cuts one about every second) and forces a few GCs.
//
// It builds with Go 1.19 (old trace format) as well as with the current
// toolchain: it uses only runtime/trace API that exists since Go 1.11.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sync"
	"time"
)

type job struct {
	ctx  context.Context
	task *trace.Task
	n    int
}

func main() {
	out := flag.String("o", "trace.out", "trace file to write")
	dur := flag.Duration("duration", 2500*time.Millisecond, "how long to run")
	workers := flag.Int("workers", 3, "worker goroutines")
	flag.Parse()

	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	regions, tasks, logs := 0, 0, 0
	count := func(r, t, l int) {
		mu.Lock()
		regions, tasks, logs = regions+r, tasks+t, logs+l
		mu.Unlock()
	}

	ch := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := range ch {
				r := trace.StartRegion(j.ctx, "work")
				trace.WithRegion(j.ctx, "step", func() { spin(20) })
				trace.Logf(j.ctx, "worker", "job %d done by %d", j.n, w)
				r.End()
				j.task.End() // on another goroutine than NewTask
				count(2, 0, 1)
			}
		}(w)
	}

	deadline := time.Now().Add(*dur)
	var sink [][]byte
	for n := 0; time.Now().Before(deadline); n++ {
		ctx, task := trace.NewTask(context.Background(), "job")
		r := trace.StartRegion(ctx, "produce")
		trace.Log(ctx, "queue", "enqueued")
		r.End()
		count(1, 1, 1)
		ch <- job{ctx: ctx, task: task, n: n}
		sink = append(sink, make([]byte, 4096))
		if n%200 == 199 {
			sink = nil
			runtime.GC()
		}
		time.Sleep(200 * time.Microsecond)
	}
	close(ch)
	wg.Wait()
	_ = sink
	trace.Stop()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("regions=%d tasks=%d logs=%d\n", regions, tasks, logs)
}

func spin(us int) {
	t := time.Now()
	for time.Since(t) < time.Duration(us)*time.Microsecond {
	}
}
