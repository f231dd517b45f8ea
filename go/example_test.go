package gentrace_test

import (
	"context"
	"log"
	"runtime/trace"

	"gentrace"
)

// Stream the program's execution trace to the gentraced named by
// GENTRACE_ADDR (default 127.0.0.1:7170) for as long as main runs. Regions,
// tasks and logs of runtime/trace show up in the windows gentraced serves
// (GET /v1/trace?service=NAME&format=go opens in `go tool trace`).
func Example() {
	if err := gentrace.Start(gentrace.Config{Service: "checkout"}); err != nil {
		log.Fatal(err)
	}
	defer gentrace.Stop()

	ctx, task := trace.NewTask(context.Background(), "order")
	trace.WithRegion(ctx, "charge", func() {
		trace.Log(ctx, "order", "id=42")
	})
	task.End()
}
