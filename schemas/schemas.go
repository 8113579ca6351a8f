// Package schemas holds the JSON Schemas of the files indoubt writes, for programs
// that validate them: results.json, a history line, a faults.jsonl line.
package schemas

import _ "embed"

// Results is schemas/results.schema.json: the JSON Schema of a run's results.json.
//
//go:embed results.schema.json
var Results []byte

// ResultsID is the $id of Results.
const ResultsID = "https://github.com/indoubt/indoubt/schemas/results.schema.json"
