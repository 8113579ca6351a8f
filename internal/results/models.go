package results

import (
	"encoding/json"

	"github.com/indoubt/indoubt/checker"
)

// ModelVerdict is one part of a history held to several models at once
// (checker.ModelsModel): its verdict beside the others', in results.json's models.
type ModelVerdict struct {
	Name         string          `json:"name"`
	Model        string          `json:"model"`
	Verdict      checker.Verdict `json:"verdict"`
	Summary      string          `json:"summary"`
	AnomalyCount int             `json:"anomaly_count"`
}

// ModelsOf reads each part's verdict from a checker.ModelsModel result; nil for a
// result of another checker.
func ModelsOf(res checker.Result) []ModelVerdict {
	if res.Checker != checker.ModelsModel {
		return nil
	}
	var parts []checker.PartResult
	if json.Unmarshal(res.Details["models"], &parts) != nil {
		return nil
	}
	out := make([]ModelVerdict, len(parts))
	for i, p := range parts {
		out[i] = ModelVerdict{Name: p.Name, Model: p.Model, Verdict: p.Verdict, Summary: p.Summary, AnomalyCount: p.Anomalies}
	}
	return out
}
