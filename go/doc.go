// Package gentrace streams a Go program's execution trace (runtime/trace)
// to gentraced, the gentrace collector, one Go trace generation (about a
// second) at a time, so a fleet's Go services are traced all the time and
// any window can be fetched later as a Go trace file:
//
//	curl -o w.trace 'localhost:7171/v1/trace?service=NAME&last=30s&format=go'
//	go tool trace w.trace
//
// Use:
//
//	gentrace.Start(gentrace.Config{}) // GENTRACE_ADDR, GENTRACE_SERVICE, ...
//	defer gentrace.Stop()
//
// and annotate with runtime/trace as usual (NewTask, WithRegion, Log).
//
// The client never makes the program wait and never writes anything
// anywhere on its own: the runtime's trace bytes are copied into a bounded
// spool and one goroutine sends them over TCP (the gentrace protocol,
// version 2). When gentraced is away the client spools, reconnects with
// backoff and resumes; when the spool is full it drops or evicts whole Go
// generations and counts them, and those counts reach gentraced with the
// next generation sent. With Config.FlightRecorder (Go 1.25 and later) only
// a recent window is kept in memory and Snapshot sends it.
//
// The module has no dependencies beyond the standard library. Its path is
// the plain "gentrace", which no registry serves: require it with a replace
// directive pointing at a checkout (go mod edit -replace=gentrace=PATH/go),
// or vendor the files. See docs/GO.md in the gentrace repository.
package gentrace
