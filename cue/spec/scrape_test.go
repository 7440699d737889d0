package spec

import (
	"strings"
	"testing"
	"time"
)

func TestCheckScrape(t *testing.T) {
	ok := SignalSources{Default: "embedded", Scrape: Scrape{Interval: Duration(5 * time.Second), Timeout: Duration(5 * time.Second), Targets: []ScrapeTarget{
		{URL: "http://10.0.0.7:9100/metrics", Job: "node"},
		{URL: "https://[fd00::7]:8443/metrics?format=prometheus", Job: "gateway", Labels: map[string]string{"zone": "a", "instance": "gw-1", "_x": "y"}},
		{URL: "http://10.0.0.7:9100/metrics", Job: "node-again"},
	}}}
	if errs := ok.checkScrape(); len(errs) != 0 {
		t.Fatalf("a valid scrape config: %v", errs)
	}
	for _, c := range []struct {
		mutate func(*SignalSources)
		path   string
		msg    string
	}{
		{func(s *SignalSources) {
			s.Scrape.Interval, s.Scrape.Timeout = Duration(500*time.Millisecond), Duration(100*time.Millisecond)
		}, "spec.signals.scrape.interval", "out of range"},
		{func(s *SignalSources) { s.Scrape.Interval = Duration(2 * time.Hour) }, "spec.signals.scrape.interval", "out of range"},
		{func(s *SignalSources) { s.Scrape.Timeout = Duration(6 * time.Second) }, "spec.signals.scrape.timeout", "out of range"},
		{func(s *SignalSources) { s.Scrape.Timeout = 0 }, "spec.signals.scrape.timeout", "out of range"},
		{func(s *SignalSources) { s.Scrape.Targets[0].URL = "http://admin@10.0.0.7/" }, "spec.signals.scrape.targets.0.url", "credentials"},
		{func(s *SignalSources) { s.Scrape.Targets[0].URL = "http://:9100/" }, "spec.signals.scrape.targets.0.url", "no host"},
		{func(s *SignalSources) { s.Scrape.Targets[0].URL = "http://10.0.0.7:0/" }, "spec.signals.scrape.targets.0.url", "port 0"},
		{func(s *SignalSources) { s.Scrape.Targets[1].URL = "http://[fd00::7/" }, "spec.signals.scrape.targets.1.url", "not a URL"},
		{func(s *SignalSources) { s.Scrape.Targets[2].Job = "node" }, "spec.signals.scrape.targets.2.url", "listed twice"},
		{func(s *SignalSources) { s.Scrape.Targets[1].Labels = map[string]string{"a-b": "x"} }, "spec.signals.scrape.targets.1.labels.a-b", "not a label name"},
		{func(s *SignalSources) { s.Default = "prometheus" }, "spec.signals.scrape.targets", "never be read"},
	} {
		s := ok
		s.Scrape.Targets = append([]ScrapeTarget(nil), ok.Scrape.Targets...)
		c.mutate(&s)
		errs := s.checkScrape()
		if len(errs) != 1 || errs[0].Path != c.path || !strings.Contains(errs[0].Message, c.msg) {
			t.Errorf("want one error at %s saying %q, got %v", c.path, c.msg, errs)
		}
	}
}
