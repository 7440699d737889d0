package main

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// TestWorkspaceLookbackDelta: the Environment's signals.lookbackDelta
// reaches the embedded source the workspace builds. A gauge whose only
// sample is 7 minutes old answers with lookbackDelta 10m, and not with
// the default 5m.
func TestWorkspaceLookbackDelta(t *testing.T) {
	const line = "signals: {default: embedded}"
	for _, c := range []struct {
		name, signals string
		lookback      time.Duration
		answers       bool
	}{
		{"the default", line, 5 * time.Minute, false},
		{"10m", "signals: {default: embedded, lookbackDelta: 10m}", 10 * time.Minute, true},
	} {
		ws, err := openWorkspace(copySpecs(t, [3]string{"setpoint.yaml", line, c.signals}), simOptions{})
		if err != nil {
			t.Fatal(err)
		}
		src, ok := ws.eng.Signals.(*embedded.Source)
		if !ok {
			ws.close()
			t.Fatalf("%s: the signal source is a %T", c.name, ws.eng.Signals)
		}
		at := ws.now
		if _, err := ws.store.Append(labels.FromStrings("__name__", "lookback_probe"), at.Add(-7*time.Minute).UnixMilli(), 1); err != nil {
			ws.close()
			t.Fatal(err)
		}
		r, err := src.Query(context.Background(), "lookback_probe", at)
		ws.close()
		if err != nil {
			t.Fatal(err)
		}
		if src.Lookback() != c.lookback || (len(r.Samples) == 1) != c.answers {
			t.Errorf("%s: lookback %s, %d samples for a 7m-old one; want %s and an answer %v", c.name, src.Lookback(), len(r.Samples), c.lookback, c.answers)
		}
	}
}
