package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/plan"
)

const monitoringDir = "../../deploy/monitoring"

var promParser = parser.NewParser(parser.Options{})

// ruleGroups reads the rule groups out of the PrometheusRule, as the
// Prometheus Operator hands them to Prometheus.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups json.RawMessage `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	out, err := yaml.JSONToYAML([]byte(`{"groups":` + string(pr.Spec.Groups) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAlertRules runs promtool, Prometheus' own rule checker and rule unit
// tester, on the alerts shipped in deploy/monitoring: each rule is checked,
// and alerts_test.yaml says at which minute each must fire, and when not.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run make testenv (Debian's prometheus)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleGroups(t), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(monitoringDir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestMonitoringReadsServedMetrics: every metric the alerts and the
// dashboard read is one setpoint serves, with label values it uses, and
// every metric of setpoint's own has a panel. A renamed metric turns the
// alerts silent, which no alert says: this test does.
func TestMonitoringReadsServedMetrics(t *testing.T) {
	served := servedMetricNames(t)
	var exprs []string
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(ruleGroups(t), &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("no rules in prometheusrule.yaml")
	}
	b, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var panelExprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			panelExprs = append(panelExprs, tg.Expr)
		}
	}
	onPanels := map[string]bool{}
	for i, e := range append(exprs, panelExprs...) {
		onDashboard := i >= len(exprs)
		expr, err := promParser.ParseExpr(e)
		if err != nil {
			t.Errorf("%q: %v", e, err)
			continue
		}
		for _, vs := range parser.ExtractSelectors(expr) {
			for _, m := range vs {
				switch {
				case m.Name == model.MetricNameLabel:
					if !served[m.Value] {
						t.Errorf("%q reads %s, which setpoint does not serve", e, m.Value)
					}
					if onDashboard {
						onPanels[strings.TrimSuffix(m.Value, "_bucket")] = true
					}
				case m.Name == "reason":
					var k plan.HoldKind
					if err := k.UnmarshalText([]byte(m.Value)); err != nil {
						t.Errorf("%q: %v", e, err)
					}
				case m.Name == "result" && m.Value != "ok" && m.Value != "failed":
					t.Errorf("%q: result is ok or failed, not %q", e, m.Value)
				}
			}
		}
	}
	for name := range served {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "setpoint_") && !onPanels[name] && !onPanels[base] {
			t.Errorf("%s has no panel in dashboard.json", name)
		}
	}
}

// servedMetricNames is every series name the watch's registry serves, a
// histogram's with its suffixes.
func servedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{"up": true}
	for _, c := range newSelfMetrics().own {
		descs := make(chan *prometheus.Desc, 1) // one each: a metric or a vector
		c.Describe(descs)
		n := fq.FindStringSubmatch((<-descs).String())
		if n == nil {
			t.Fatalf("no name in %v", c)
		}
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[n[1]+s] = true
			}
		default:
			names[n[1]] = true
		}
	}
	return names
}
