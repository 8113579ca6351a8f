package checker

import "flag"

// update makes every golden test of the package rewrite its expectations (the .verdict
// files beside the histories under testdata/, see goldenWalk) from what the checkers
// return now: go test ./checker -update. Review the diff before committing it.
var update = flag.Bool("update", false, "rewrite the expected results of every golden history under testdata/")
