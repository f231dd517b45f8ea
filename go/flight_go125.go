//go:build go1.25

package gentrace

import "runtime/trace"

// flightRecorder wraps runtime/trace.FlightRecorder (Go 1.25+).
type flightRecorder struct{ fr *trace.FlightRecorder }

func (c *client) startFlight(cfg *FlightRecorderConfig) error {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: cfg.MinAge, MaxBytes: cfg.MaxBytes})
	if err := fr.Start(); err != nil {
		return err
	}
	c.fr.fr = fr
	return nil
}

func (f *flightRecorder) stop() {
	if f.fr != nil {
		f.fr.Stop()
	}
}

// snapshot writes the recorder's window through a splitter of its own;
// generations an earlier snapshot sent are skipped by the sink.
func (c *client) snapshot() error {
	w := &snapWriter{c: c}
	c.mu.Lock()
	w.split = newSplitter(c)
	c.mu.Unlock()
	_, err := c.fr.fr.WriteTo(w)
	c.mu.Lock()
	defer c.mu.Unlock()
	w.split.finish()
	if w.split.err != nil {
		if c.cur != nil && !c.skipping {
			c.abortSent(c.cur)
			c.cur = nil
			c.sp.written++
			c.dropGen()
		}
		return w.split.err
	}
	return err
}

type snapWriter struct {
	c     *client
	split *splitter
}

func (w *snapWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.split.write(p)
	w.c.mu.Unlock()
	return len(p), nil
}
