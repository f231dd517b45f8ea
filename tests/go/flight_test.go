//go:build go1.25

package gotest

import (
	"context"
	"encoding/json"
	"fmt"
	rtrace "runtime/trace"
	"strconv"
	"testing"
	"time"

	"gentrace"
)

// With Config.FlightRecorder nothing is streamed until Snapshot; then the
// recorder's window goes to gentraced, and a second snapshot sends only
// generations the first did not.
func TestFlightRecorder_snapshotSendsTheRecentWindow(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	t0 := time.Now()
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "flight-svc",
		FlightRecorder: &gentrace.FlightRecorderConfig{MinAge: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	defer gentrace.Stop()
	ctx := context.Background()
	mark := func(name string, n int) {
		for i := 0; i < n; i++ {
			rtrace.WithRegion(ctx, name, func() { rtrace.Logf(ctx, "stage", "%s %d", name, i) })
			time.Sleep(5 * time.Millisecond)
		}
	}
	mark("before", 100) // about 0.5 s
	time.Sleep(2 * time.Second)
	if st := gentrace.GetStats(); st.Generations != 0 || st.Stored != 0 {
		t.Fatalf("flight recorder streamed before Snapshot: %+v", st)
	}
	mark("recent", 20)
	tSnap := time.Now()
	if err := gentrace.Snapshot(); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t)
	checkEdges(t, d, gentrace.GetStats().Session, t0, tSnap)
	st1 := gentrace.GetStats()
	if st1.Stored == 0 || st1.Stored != st1.Generations {
		t.Fatalf("after the first snapshot: %+v", st1)
	}
	resp, b := d.get(t, "/v1/trace?format=go&last=1h&session="+st1.Session)
	mustEqual(t, "status", resp.StatusCode, 200)
	s := readGo(t, b)
	mustEqual(t, "recent regions", s.regions["recent"], 20)
	for i := 0; i < 20; i++ {
		mustEqual(t, "log", s.logs[fmt.Sprintf("recent %d", i)], 1)
	}

	mark("later", 10)
	if err := gentrace.Snapshot(); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t)
	st2 := gentrace.GetStats()
	if st2.Rejected != 0 || st2.Stored <= st1.Stored || st2.Stored != st2.Generations {
		t.Fatalf("second snapshot: %+v (first %+v)", st2, st1)
	}
	_, b = d.get(t, "/v1/trace?format=go&last=1h&session="+st2.Session)
	s = readGo(t, b)
	mustEqual(t, "later regions", s.regions["later"], 10)
}

func waitDelivered(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st := gentrace.GetStats(); st.Pending == 0 && st.Generations > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("snapshot not delivered: %+v", gentrace.GetStats())
}

// checkEdges: the stored generations' wall-clock spans (from their CLOCK
// records) lie where they were recorded, not where they were sent, and
// each is about a generation long (the runtime starts one a second; edges
// taken when the snapshot is split would make the first one span from
// Start to the snapshot).
func checkEdges(t *testing.T, d *daemon, session string, from, to time.Time) {
	t.Helper()
	_, b := d.get(t, "/v1/agents/"+session+"/generations")
	var v struct {
		Generations []struct {
			Gen   uint64 `json:"gen"`
			Start string `json:"start_ns"`
			End   string `json:"end_ns"`
		} `json:"generations"`
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Generations) == 0 {
		t.Fatalf("%v: %s", err, b)
	}
	for _, g := range v.Generations {
		s, _ := strconv.ParseInt(g.Start, 10, 64)
		e, _ := strconv.ParseInt(g.End, 10, 64)
		if s < from.Add(-time.Second).UnixNano() || e > to.Add(time.Second).UnixNano() ||
			e < s || e-s > int64(1800*time.Millisecond) {
			t.Fatalf("generation %d spans [%d, %d], recorded within [%d, %d]", g.Gen, s, e,
				from.UnixNano(), to.UnixNano())
		}
	}
}
