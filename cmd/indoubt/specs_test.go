package main

import "github.com/indoubt/indoubt/internal/schedule"

// specsOf returns the schedule's entries as written.
func specsOf(s schedule.Schedule) []string {
	out := []string{}
	for _, f := range s {
		out = append(out, f.Spec)
	}
	return out
}
