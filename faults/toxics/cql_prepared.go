package toxics

import (
	"sync"
)

// CQL prepared statements: the ids a proxy learns from the replies to PREPARE, so that
// an EXECUTE names its statement.

// preparedIDs maps prepared ids to their statements for every CQL connection of one
// proxy: a prepared id is valid on any connection to the server that issued it. It is
// safe for concurrent use.
type preparedIDs struct {
	mu sync.Mutex
	m  map[string]string
}

func newPreparedIDs() *preparedIDs { return &preparedIDs{m: map[string]string{}} }

func (p *preparedIDs) put(id []byte, stmt string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[string(id)]; !ok && len(p.m) >= cqlMaxPrepared {
		// Forget one at random (map order): an id seen again is learned again from
		// its PREPARE, which drivers repeat when the server has forgotten it too.
		for k := range p.m {
			delete(p.m, k)
			break
		}
	}
	p.m[string(id)] = stmt
}

func (p *preparedIDs) get(id []byte) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[string(id)]
	return s, ok
}

// cqlPreparedID reads the id of a RESULT of kind Prepared.
func cqlPreparedID(e *cqlEnvelope) ([]byte, bool) {
	r, ok := cqlReplyBody(e)
	if !ok || r.int32() != cqlResultPrepared {
		return nil, false
	}
	id := r.shortBytes()
	if r.bad || len(id) == 0 {
		return nil, false
	}
	return id, true
}
