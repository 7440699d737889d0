//go:build linux

package ebpf

// crash is what a killed agent leaves: its loops gone, its hold on the
// program and maps released, and nothing unpinned or removed.
func (p *Provider) crash() {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		g.halt()
	}
	p.groups = nil
	p.closed = true
	if p.dp != nil {
		p.dp.Close()
		p.dp = nil
	}
}
