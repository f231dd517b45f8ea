// Command xtrace counts user regions, tasks and logs in a Go execution
// trace with golang.org/x/exp/trace, the reader the Go team publishes: the
// independent side of gentrace's Go-trace tests. It prints
// "regions=R tasks=T logs=L" (region and task begins; ends must match) and
// exits 1 if the trace does not parse or begins and ends disagree.
//
//	xtrace FILE
package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: xtrace FILE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xtrace:", err)
		os.Exit(1)
	}
	var rb, re, tb, te, logs int
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "xtrace:", err)
			os.Exit(1)
		}
		switch ev.Kind() {
		case trace.EventRegionBegin:
			rb++
		case trace.EventRegionEnd:
			re++
		case trace.EventTaskBegin:
			tb++
		case trace.EventTaskEnd:
			te++
		case trace.EventLog:
			logs++
		}
	}
	fmt.Printf("regions=%d tasks=%d logs=%d\n", rb, tb, logs)
	if rb != re || tb != te {
		fmt.Fprintf(os.Stderr, "xtrace: region ends %d, task ends %d\n", re, te)
		os.Exit(1)
	}
}
