package postgres

// Exported for the counter tests of package postgres_test.
var (
	ClassifyCounter = classifyCounter
	CheckIsolation  = checkIsolation
)
