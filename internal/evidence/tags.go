package evidence

import (
	"cmp"
	"fmt"
	"strings"
)

// The statement tags of a cut transaction as proof.
//
// A cut COMMIT's own reply ("COMMIT") says nothing of what the transaction changed; the
// replies to its statements do, and the proxy reads them on their way (FaultEvent.Tags,
// FaultEvent.Changed). A transaction whose writes answered "UPDATE 1" changed rows; one
// whose every write answered a count of zero ("INSERT 0 0": a replay met the row its
// first commit wrote) committed and changed nothing, and is never counted an
// application.

// proof is the reply that proves what a cut commit changed: "COMMIT after UPDATE 1,
// INSERT 0 1" for a transaction whose statements' tags the proxy read, else the tag of
// the commit itself ("UPDATE 1" for an autocommit statement).
func proof(e FaultEvent) string {
	if len(e.Tags) == 0 || len(e.Tags) == 1 && e.Tags[0] == e.Tag {
		return cmp.Or(e.Tag, "a commit")
	}
	return fmt.Sprintf("%s after %s", cmp.Or(e.Tag, "the commit"), strings.Join(e.Tags, ", "))
}

// changedWhat says what a cut commit changed, for an event whose statement tags say.
func changedWhat(e FaultEvent) string {
	switch {
	case *e.Changed:
		return fmt.Sprintf("committed it (%s)", proof(e))
	case len(e.Tags) == 1 && e.Tags[0] == e.Tag:
		return fmt.Sprintf("committed it without changing a row (%s)", e.Tag)
	}
	return fmt.Sprintf("committed %s whose writes changed nothing (%s): a commit that changed nothing, not an application", txnName(e), proof(e))
}
