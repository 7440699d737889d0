package embedded

import "container/list"

// MaxRequested bounds the metric names the store keeps as asked for. The
// reconciler asks for a few dozen; the rest come from whoever queries the
// debug endpoint, and 336k of those once made /debug/store 5.9 MB. Past it
// the name asked for longest ago is forgotten, and its scraped samples are
// no longer kept: the reconciler asks for its names at every tick, so they
// are the newest, not the oldest.
const MaxRequested = 10_000

// requestedNames are the metric names queries have asked for, in the
// order they were last asked for, each with the store's time then: the
// newest sample's, so names expire on the clock their samples do.
type requestedNames struct {
	max    int
	byName map[string]*list.Element // of *askedName
	order  *list.List               // the front was asked for last
	// overCap counts the names forgotten to stay within max: names
	// still wanted, perhaps, whose samples are no longer kept.
	overCap int
}

type askedName struct {
	name string
	at   int64 // ms, store time
}

func newRequestedNames(max int) *requestedNames {
	return &requestedNames{max: max, byName: map[string]*list.Element{}, order: list.New()}
}

func (r *requestedNames) has(name string) bool {
	_, ok := r.byName[name]
	return ok
}

// ask records name as asked for at store time at.
func (r *requestedNames) ask(name string, at int64) {
	if e, ok := r.byName[name]; ok {
		e.Value.(*askedName).at = at
		r.order.MoveToFront(e)
		return
	}
	for r.order.Len() >= r.max {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.byName, oldest.Value.(*askedName).name)
		r.overCap++
	}
	r.byName[name] = r.order.PushFront(&askedName{name: name, at: at})
}

// restamp dates every name at. Names asked for before the store held any
// sample were asked at no time of the store's: without it, its first
// sample, far from zero, would expire them before any could be scraped.
func (r *requestedNames) restamp(at int64) {
	for e := r.order.Front(); e != nil; e = e.Next() {
		e.Value.(*askedName).at = at
	}
}

// expire forgets the names last asked for before min whose series have
// all left the store: forgetting a name still stored would cut off a
// series still being scraped. Names are ordered by when they were asked
// for, so only the old ones are visited.
func (r *requestedNames) expire(min int64, stored func(string) bool) {
	for e := r.order.Back(); e != nil; {
		a := e.Value.(*askedName)
		if a.at >= min {
			return
		}
		prev := e.Prev()
		if !stored(a.name) {
			r.order.Remove(e)
			delete(r.byName, a.name)
		}
		e = prev
	}
}
