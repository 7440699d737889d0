package embedded

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// TestRequestedNamesExpire: on the store's own clock (its samples' times,
// set here), a name no query has asked for within the retention is
// forgotten once its series have left the store, and kept while one is
// still written.
func TestRequestedNamesExpire(t *testing.T) {
	s := NewStore(time.Minute)
	live := labels.FromStrings("__name__", "live", "job", "a")
	gone := labels.FromStrings("__name__", "gone", "job", "a")
	s.Request("live", "gone", "never_scraped")
	for _, l := range []labels.Labels{live, gone} {
		if ok, err := s.AppendScraped(l, ms(0), 1); !ok || err != nil {
			t.Fatalf("%s: kept %v, %v", l, ok, err)
		}
	}
	// Within the retention every name stays, scraped or not.
	if _, err := s.AppendScraped(live, ms(50), 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RequestedNames(); !slices.Equal(got, []string{"gone", "live", "never_scraped"}) {
		t.Fatalf("within the retention: %v", got)
	}
	// Two minutes on, only live is still written.
	for sec := 60; sec <= 120; sec += 10 {
		if _, err := s.AppendScraped(live, ms(sec), 1); err != nil {
			t.Fatal(err)
		}
	}
	s.Request("asked_now")
	if got, _ := s.RequestedNames(); !slices.Equal(got, []string{"asked_now", "live"}) {
		t.Fatalf("past the retention: %v, want the name just asked for and the one still written", got)
	}
	if ok, _ := s.AppendScraped(gone, ms(130), 1); ok {
		t.Fatal("a forgotten name's samples are still kept")
	}
	if _, n := s.RequestedNames(); n != 0 {
		t.Fatalf("%d names counted over the cap; none was", n)
	}
}

// TestRequestedNamesBeforeAnySample: names asked for before the store has
// a sample (a watch's first tick, before its first scrape) are dated by
// the first sample, not forgotten by it.
func TestRequestedNamesBeforeAnySample(t *testing.T) {
	s := NewStore(time.Minute)
	s.Request("a", "b")
	if ok, err := s.AppendScraped(labels.FromStrings("__name__", "a"), ms(0), 1); !ok || err != nil {
		t.Fatalf("a: kept %v, %v", ok, err)
	}
	if ok, err := s.AppendScraped(labels.FromStrings("__name__", "b"), ms(1), 1); !ok || err != nil {
		t.Fatalf("b, asked for before the first sample, was forgotten by it: kept %v, %v", ok, err)
	}
}

// TestRequestedNamesCapped: past MaxRequested names, those asked for
// longest ago are forgotten and counted; one asked for again is the
// newest.
func TestRequestedNamesCapped(t *testing.T) {
	s := NewStore(time.Minute)
	if _, err := s.Append(labels.FromStrings("__name__", "clock"), ms(0), 1); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("m%06d", i) }
	const extra = 7
	for i := range MaxRequested + extra {
		s.Request(name(i))
		if i == 10 {
			s.Request(name(0)) // asked again: no longer the oldest
		}
	}
	got, over := s.RequestedNames()
	if len(got) != MaxRequested || over != extra {
		t.Fatalf("%d names kept, %d counted over the cap; want %d and %d", len(got), over, MaxRequested, extra)
	}
	for i, want := range map[int]bool{0: true, 1: false, extra: false, extra + 1: true, MaxRequested + extra - 1: true} {
		if s.Requested(name(i)) != want {
			t.Errorf("%s kept: %v, want %v", name(i), !want, want)
		}
	}
}
