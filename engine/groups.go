package engine

import (
	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// Groups joins the specs that share a target object, transitively (specs
// on one object always plan together, so one writer acts on an object),
// and names each spec's group by the least address among its objects
// (a spec that reads nothing is a group of its own, named by its ID).
// Sharding hashes the group name: a spec's shard moves only when the
// targets it shares change.
func (e *Engine) Groups() map[string]string {
	ds, _ := e.specs(nil)
	root := groupRoots(ds)
	name := map[int]string{}
	for i, d := range ds {
		r := root[i]
		for _, a := range d.reads {
			if s := a.String(); name[r] == "" || s < name[r] {
				name[r] = s
			}
		}
	}
	out := make(map[string]string, len(ds))
	for i, d := range ds {
		if n := name[root[i]]; n != "" {
			out[d.id] = n
		} else {
			out[d.id] = d.id
		}
	}
	return out
}

// groupRoots returns, for each spec, the index of one spec of its group
// (the same for every member).
func groupRoots(ds []decided) []int {
	parent := make([]int, len(ds))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	first := map[addrs.Object]int{}
	for i, d := range ds {
		for _, a := range d.reads {
			if j, ok := first[a]; ok {
				parent[find(i)] = find(j)
			} else {
				first[a] = i
			}
		}
	}
	root := make([]int, len(ds))
	for i := range ds {
		root[i] = find(i)
	}
	return root
}
