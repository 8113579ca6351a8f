package redis

import (
	"context"
	"slices"
)

// LoadBudgetScript loads the budget's decrement script into the server and returns its
// SHA and keys, so that a reference client (redis-benchmark) can run the very script the
// adapter runs: EVALSHA sha 2 keys[0] keys[1] "" is one plain decrement.
func (c *Client) LoadBudgetScript(ctx context.Context) (sha string, keys []string, err error) {
	if err := decrementScript.Load(ctx, c.admin).Err(); err != nil {
		return "", nil, Classify(err)
	}
	return decrementScript.Hash(), slices.Clone(c.budgetKeys()), nil
}
