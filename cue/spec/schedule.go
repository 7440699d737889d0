package spec

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	// The zone database is in the binary: a Schedule means the same on a
	// machine without tzdata.
	_ "time/tzdata"
)

func init() {
	Register(Kind{Name: "Schedule", New: func() Document { return &Schedule{} }})
}

// Schedule says when a workload sleeps and wakes and how many replicas it
// runs while awake.
type Schedule struct {
	Header
	Spec ScheduleSpec `json:"spec"`
}

// ScheduleSpec mirrors #ScheduleSpec.
type ScheduleSpec struct {
	Target   Target `json:"target"`
	Replicas struct {
		Min     int `json:"min"`
		AtStart int `json:"atStart"`
		Max     int `json:"max"`
	} `json:"replicas"`
	Idle struct {
		After    Duration `json:"after"`
		Activity string   `json:"activity,omitempty"`
		Grace    Duration `json:"grace"`
		Gradual  bool     `json:"gradual"`
	} `json:"idle"`
	DependsOn       []string          `json:"dependsOn"`
	TimeZone        string            `json:"timeZone"`
	WakeUp          []string          `json:"wakeUp"`
	IdleAfterByTime []IdleAfterByTime `json:"idleAfterByTime"`
	Triggers        []ScheduleTrigger `json:"triggers"`
	Behavior        struct {
		Tolerance Percent    `json:"tolerance"`
		ScaleUp   ScaleRules `json:"scaleUp"`
		ScaleDown ScaleRules `json:"scaleDown"`
	} `json:"behavior"`
	Paused      bool `json:"paused"`
	Enforcement struct {
		Replicas Mode `json:"replicas"`
	} `json:"enforcement"`
}

// IdleAfterByTime is an idle timeout in force from a time of day.
type IdleAfterByTime struct {
	From  string   `json:"from"`
	After Duration `json:"after"`
}

// ScheduleTrigger is one metric that sizes the workload.
type ScheduleTrigger struct {
	Name   string  `json:"name"`
	Query  string  `json:"query"`
	Type   string  `json:"type"`
	Target float64 `json:"target"`
}

// ScaleRules are one direction's behavior; Policies nil means the HPA's
// defaults, empty means no limit.
type ScaleRules struct {
	Stabilization Duration       `json:"stabilization"`
	Select        string         `json:"select"`
	Policies      *[]ScalePolicy `json:"policies,omitempty"`
}

// ScalePolicy bounds a change within a period.
type ScalePolicy struct {
	Type   string   `json:"type"`
	Value  int      `json:"value"`
	Period Duration `json:"period"`
}

// TargetKey names the workload for the one-Schedule-per-target check.
func (s *Schedule) TargetKey(defaultProvider string) string {
	return ProviderOr(s.Spec.Target.Provider, defaultProvider) + ":" + s.Spec.Target.Kind + "/" + s.Metadata.Namespace + "/" + s.Spec.Target.Name
}

// MaxIdleTimeout bounds an idle timeout: activity is looked for over
// the longest one.
const MaxIdleTimeout = 24 * time.Hour

// Location is the Schedule's time zone.
func (s *Schedule) Location() (*time.Location, error) {
	return LoadLocation(s.Spec.TimeZone)
}

// zones caches loaded time zones: time.LoadLocation reads and parses the
// zone's file on every call, which 10,000 Schedules a tick would pay for.
var zones sync.Map // name → *time.Location

// LoadLocation is time.LoadLocation, cached; an unknown zone is not
// cached (the error says so each time).
func LoadLocation(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

var (
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.replicas.*", What: "replicas min ≤ atStart ≤ max", Why: WhyCompare, Example: "invalid/schedule-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.idle.after", What: "the idle timeout at most 24h", Why: WhyParse, Example: "checks/schedule-self.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.dependsOn", What: "a workload does not depend on itself", Why: WhyCompare, Example: "checks/schedule-self.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.timeZone", What: "the time zone exists (IANA)", Why: WhyParse, Example: "invalid/schedule-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.idleAfterByTime.*.*", What: "one idle timeout per time of day, each at most 24h", Why: WhyCompare, Example: "invalid/schedule-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.idle.activity", What: "the activity query parses", Why: WhyPromQL, Example: "invalid/schedule-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.triggers.*.*", What: "trigger names unique, every trigger's query parses", Why: WhyPromQL, Example: "invalid/schedule-errors.yaml"})
)

// Check: the time zone exists, min ≤ atStart ≤ max, no two time-of-day
// timeouts from the same time, trigger names unique, every query parses.
func (s *Schedule) Check() []FieldError {
	var errs []FieldError
	sp := s.Spec
	if _, err := s.Location(); err != nil || sp.TimeZone == "Local" {
		errs = append(errs, FieldError{Path: "spec.timeZone", Message: fmt.Sprintf("unknown time zone %q", sp.TimeZone), Expected: "an IANA zone such as Europe/Paris or UTC"})
	}
	// Activity is looked for over the longest timeout: bounded, so is
	// the lookback.
	if d := sp.Idle.After.D(); d > MaxIdleTimeout {
		errs = append(errs, FieldError{Path: "spec.idle.after", Message: fmt.Sprintf("idle timeout %s is too long", d), Expected: fmt.Sprintf("at most %s", MaxIdleTimeout)})
	}
	for i, e := range sp.IdleAfterByTime {
		if d := e.After.D(); d > MaxIdleTimeout {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.idleAfterByTime.%d.after", i), Message: fmt.Sprintf("idle timeout %s is too long", d), Expected: fmt.Sprintf("at most %s", MaxIdleTimeout)})
		}
	}
	r := sp.Replicas
	if r.Min > r.Max {
		errs = append(errs, FieldError{Path: "spec.replicas.max", Message: fmt.Sprintf("max %d is below min %d", r.Max, r.Min), Expected: ">= replicas.min"})
	}
	if r.AtStart < r.Min || r.AtStart > r.Max {
		errs = append(errs, FieldError{Path: "spec.replicas.atStart", Message: fmt.Sprintf("atStart %d is outside [min %d, max %d]", r.AtStart, r.Min, r.Max), Expected: "min <= atStart <= max"})
	}
	seen := map[string]int{}
	for i, e := range sp.IdleAfterByTime {
		if j, dup := seen[e.From]; dup {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.idleAfterByTime.%d.from", i), Message: "a second timeout from " + e.From,
				Expected: "one entry per time of day", Related: fmt.Sprintf("spec.idleAfterByTime.%d.from", j)})
			continue
		}
		seen[e.From] = i
	}
	names := map[string]int{}
	var qs queries
	errs = append(errs, qs.check("spec.idle.activity", sp.Idle.Activity, "a PromQL instant vector or scalar expression")...)
	for i, t := range sp.Triggers {
		if j, dup := names[t.Name]; dup {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.triggers.%d.name", i), Message: "a second trigger named " + t.Name,
				Expected: "unique trigger names", Related: fmt.Sprintf("spec.triggers.%d.name", j)})
		} else {
			names[t.Name] = i
		}
		errs = append(errs, qs.check(fmt.Sprintf("spec.triggers.%d.query", i), t.Query, "a PromQL instant vector or scalar expression")...)
	}
	errs = append(errs, qs.past()...)
	if slices.ContainsFunc(sp.DependsOn, func(d string) bool { k, n := SplitDependency(d); return k == sp.Target.Kind && n == sp.Target.Name }) {
		errs = append(errs, FieldError{Path: "spec.dependsOn", Message: "a workload cannot depend on itself", Expected: "other workloads of the namespace"})
	}
	return errs
}

// SplitDependency splits a dependsOn entry into its kind (Deployment
// when it names none) and name.
func SplitDependency(d string) (kind, name string) {
	if k, n, ok := strings.Cut(d, "/"); ok {
		return k, n
	}
	return "Deployment", d
}

// DependencyCycle returns a cycle among dependencies (names in order, the
// first repeated at the end), or nil.
func DependencyCycle(deps map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack, found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range deps[n] {
			switch color[d] {
			case grey:
				i := slices.Index(stack, d)
				found = append(append([]string(nil), stack[i:]...), d)
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}
