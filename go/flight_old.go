//go:build !go1.25

package gentrace

type flightRecorder struct{}

func (c *client) startFlight(*FlightRecorderConfig) error { return ErrNoFlightRecorder }

func (f *flightRecorder) stop() {}

func (c *client) snapshot() error { return ErrNoFlightRecorder }
