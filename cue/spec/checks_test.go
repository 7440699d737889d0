package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

func TestCheckPromQL(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`sum(rate(http_requests_total{app="a"}[5m]))`, ""},
		{`histogram_quantile(0.99, sum by (le) (rate(b[5m])))`, ""},
		{`42`, ""},
		{`sum(rate(x[5m])`, "invalid PromQL at character 16 of the query: unclosed left parenthesis"},
		{`x{a=`, "invalid PromQL at character 5 of the query: unexpected end of input inside braces"},
		{`rate(x)`, `invalid PromQL at character 6 of the query: expected type range vector in call to function "rate", got instant vector`},
		{`ä{a="b"} +`, "invalid PromQL at character 1 of the query: unexpected character: 'ä'"},
		{`x[5m]`, "PromQL gives a range vector, not a value per series (wrap it in a function such as rate())"},
		{`"text"`, "PromQL gives a string, not a number"},
	} {
		if got := CheckPromQL(c.expr); got != c.want {
			t.Errorf("CheckPromQL(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// TestSafetyDefaultCap: an NFR's JSON without a replicas cap decodes with
// the default one; one with a cap keeps it.
func TestCheckWindow(t *testing.T) {
	n := &NFR{Spec: NFRSpec{Memory: MemorySpec{Window: Duration(EmbeddedRetention)}}}
	if errs := n.CheckWindow(EmbeddedRetention); errs != nil {
		t.Errorf("a window equal to the retention: %v", errs)
	}
	n.Spec.Memory.Window = Duration(time.Hour)
	errs := n.CheckWindow(EmbeddedRetention)
	if len(errs) != 1 || errs[0].Path != "spec.memory.window" || errs[0].Message != "window 1h0m0s is longer than the 30m0s of history the embedded signal store keeps" {
		t.Errorf("a 1h window: %v", errs)
	}
}

func TestSafetyDefaultCap(t *testing.T) {
	var s Safety
	if err := json.Unmarshal([]byte(`{"stability":"3m"}`), &s); err != nil || s.MaxReplicas != DefaultMaxReplicas || s.Stability != Duration(3*time.Minute) {
		t.Errorf("%+v, %v", s, err)
	}
	if err := json.Unmarshal([]byte(`{"maxReplicas":7}`), &s); err != nil || s.MaxReplicas != 7 {
		t.Errorf("%+v, %v", s, err)
	}
}

func TestSimWorkloadShare(t *testing.T) {
	var w SimWorkload
	if err := json.Unmarshal([]byte(`{"name":"a","perPodRPS":5}`), &w); err != nil || w.Share != 1 || w.shareGiven || w.Name != "a" || w.PerPodRPS != 5 {
		t.Errorf("no share: %+v, %v", w, err)
	}
	if err := json.Unmarshal([]byte(`{"name":"a","share":0}`), &w); err != nil || w.Share != 0 || !w.shareGiven {
		t.Errorf("share 0: %+v, %v", w, err)
	}
}

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte("second,rate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("t.csv", filepath.Join(dir, "link.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("gone.csv", filepath.Join(dir, "dangling.csv")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(trace string) *Environment {
		cfg, _ := json.Marshal(map[string]any{"trace": trace})
		return &Environment{Spec: EnvironmentSpec{Providers: []Provider{{Name: "kubernetes"}, {Name: "sim", Config: cfg}}}}
	}
	for trace, want := range map[string]string{
		"t.csv":                     "",
		"link.csv":                  "",
		filepath.Join(dir, "t.csv"): "",
		"nope.csv":                  "trace nope.csv does not exist (looked for " + filepath.Join(dir, "nope.csv") + ")",
		"dangling.csv":              "trace dangling.csv does not exist (looked for " + filepath.Join(dir, "dangling.csv") + ")",
		".":                         "trace . is a directory, not a file",
		"fifo":                      "trace fifo is not a regular file",
		// Outside the directory nothing is looked at: whether a file
		// exists there is not for a pull request's CI log to tell.
		"/dev/null":                    "",
		"/nonexistent/secret":          "",
		"../../../nonexistent.csv":     "",
		"t.csv/x":                      "trace t.csv/x cannot be read: not a directory",
		filepath.Join(dir, "nope.csv"): "trace " + filepath.Join(dir, "nope.csv") + " does not exist (looked for " + filepath.Join(dir, "nope.csv") + ")",
	} {
		errs := env(trace).CheckFiles(dir)
		got := ""
		if len(errs) > 0 {
			got = errs[0].Message
			if errs[0].Path != "spec.providers.1.config.trace" {
				t.Errorf("%s: path %s", trace, errs[0].Path)
			}
		}
		if got != want {
			t.Errorf("%s: %q, want %q", trace, got, want)
		}
	}
}

func TestQuantityLimits(t *testing.T) {
	var b Bytes
	for _, in := range []string{`99999999999999999999`, `1e30`, `"99999999999999999999Ti"`} {
		if err := json.Unmarshal([]byte(in), &b); err == nil || !strings.Contains(err.Error(), "too large (expected at most 4194304Ti)") {
			t.Errorf("%s: %v, %v", in, b, err)
		}
	}
	if err := json.Unmarshal([]byte(`4611686018427387904`), &b); err != nil || b != 1<<62 {
		t.Errorf("the largest quantity: %v, %v", b, err)
	}
	var c MilliCPU
	for _, in := range []string{`0.0001`, `"0.0004"`} {
		if err := json.Unmarshal([]byte(in), &c); err == nil || !strings.Contains(err.Error(), "is less than 1m") {
			t.Errorf("%s: %v, %v", in, c, err)
		}
	}
	if err := json.Unmarshal([]byte(`0.0005`), &c); err != nil || c != 1 {
		t.Errorf("0.0005 rounds to 1m: %v, %v", c, err)
	}
}

// TestLookbackDeltaBounds: above 0 (nothing would be found) and at most
// the embedded store's 30m retention (it would look for samples it no
// longer keeps), both edges included where they are allowed.
func TestLookbackDeltaBounds(t *testing.T) {
	for _, c := range []struct {
		d   time.Duration
		bad bool
	}{{0, true}, {-time.Second, true}, {time.Nanosecond, false}, {5 * time.Minute, false}, {30 * time.Minute, false}, {30*time.Minute + time.Nanosecond, true}, {time.Hour, true}} {
		e := &Environment{}
		e.Spec.Tick = Duration(5 * time.Second)
		e.Spec.Signals = SignalSources{Default: "embedded", Scrape: Scrape{Interval: Duration(5 * time.Second), Timeout: Duration(2 * time.Second)}, LookbackDelta: Duration(c.d)}
		errs := e.Check()
		if got := len(errs) == 1 && errs[0].Path == "spec.signals.lookbackDelta"; got != c.bad || (!c.bad && len(errs) > 0) {
			t.Errorf("lookbackDelta %s: %v", c.d, errs)
		}
	}
	// An Environment made in Go, with none decoded, looks back the default.
	if d := (SignalSources{}).Lookback(); d != signals.DefaultLookbackDelta {
		t.Errorf("Lookback() with none set: %s, want %s", d, signals.DefaultLookbackDelta)
	}
	if d := (SignalSources{LookbackDelta: Duration(10 * time.Minute)}).Lookback(); d != 10*time.Minute {
		t.Errorf("Lookback() of 10m: %s", d)
	}
}

func TestTickBounds(t *testing.T) {
	for _, c := range []struct {
		tick time.Duration
		bad  bool
	}{{time.Nanosecond, true}, {999 * time.Millisecond, true}, {time.Second, false}, {24 * time.Hour, false}, {25 * time.Hour, true}} {
		e := &Environment{}
		e.Spec.Tick = Duration(c.tick)
		errs := e.Check()
		if got := len(errs) > 0 && errs[0].Path == "spec.tick"; got != c.bad {
			t.Errorf("tick %s: %v", c.tick, errs)
		}
	}
}
