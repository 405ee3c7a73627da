package index

// addOrphan keeps o until the block with engine hash parent is keyed.
func (ix *Index) addOrphan(es *engine, parent uint64, o orphan, d *delta) {
	if _, dup := es.orphanOf[o.hash]; dup {
		return
	}
	if len(es.orphanOf) >= ix.cfg.MaxOrphansPerEngine {
		d.orphansDropped++
		return
	}
	es.waiting[parent] = append(es.waiting[parent], o)
	es.orphanOf[o.hash] = parent
	d.orphans++
}

// link keys the orphans waiting on engine hash h, now known as key k, and
// through hold their own waiting descendants.
func (ix *Index) link(es *engine, h, k uint64, d *delta) {
	kids, ok := es.waiting[h]
	if !ok {
		return
	}
	delete(es.waiting, h)
	for _, o := range kids {
		delete(es.orphanOf, o.hash)
		d.orphans--
		d.linked++
		ix.hold(es, o.hash, BlockKey(k, o.tokens, o.extra), o.tier, d)
	}
}

// removeOrphan applies a BlockRemoved to an orphan. Its own waiting children
// stay: they wait on its hash, which a later BlockStored may bring back.
func (ix *Index) removeOrphan(es *engine, h uint64, t Tier, d *delta) {
	parent, ok := es.orphanOf[h]
	if !ok {
		return
	}
	kids := es.waiting[parent]
	for i, o := range kids {
		if o.hash == h && o.tier == t {
			kids[i] = kids[len(kids)-1]
			kids = kids[:len(kids)-1]
			delete(es.orphanOf, h)
			d.orphans--
			break
		}
	}
	if len(kids) == 0 {
		delete(es.waiting, parent)
	} else {
		es.waiting[parent] = kids
	}
}
