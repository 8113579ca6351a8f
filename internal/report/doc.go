// Package report renders a run's results (package results): the one-screen summary and
// verdict on the console, the stand's multi-store tables, report.html, summary.html
// and junit.xml. It decides nothing: every figure and sentence it shows is read from
// results.json, the history and faults.jsonl of a run directory.
package report
