package cql

// ClassifyRead exposes classifyRead to the external tests of the read path.
var ClassifyRead = classifyRead
