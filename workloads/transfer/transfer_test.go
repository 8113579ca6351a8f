package transfer

import "testing"

func TestCheck(t *testing.T) {
	base := func() Observed {
		return Observed{Rows: 4, Total: 400, Markers: map[string][]int{}}
	}
	tests := []struct {
		name  string
		edit  func(*Observed)
		valid bool
		want  Anomaly // "" for none
	}{
		{"applied transfer", func(o *Observed) {
			o.Attempts = []Attempt{{"g1", 0, 1, OK}}
			o.Markers["g1"] = []int{0, 1}
		}, true, ""},
		{"failed transfer not applied", func(o *Observed) { o.Attempts = []Attempt{{"g1", 0, 1, Fail}} }, true, ""},
		{"unknown transfer either way", func(o *Observed) {
			o.Attempts = []Attempt{{"g1", 0, 1, Info}, {"g2", 2, 3, Info}}
			o.Markers["g1"] = []int{1, 0}
		}, true, ""},
		{"half applied", func(o *Observed) {
			o.Attempts = []Attempt{{"g1", 0, 2, Info}}
			o.Markers["g1"] = []int{0}
			o.Total = 399
		}, false, HalfApplied},
		{"acknowledged but lost", func(o *Observed) { o.Attempts = []Attempt{{"g1", 0, 1, OK}} }, false, LostTransfer},
		{"failed but applied", func(o *Observed) {
			o.Attempts = []Attempt{{"g1", 0, 1, Fail}}
			o.Markers["g1"] = []int{0, 1}
		}, false, FailedButApplied},
		{"total changed", func(o *Observed) { o.Total = 401 }, false, TotalChanged},
		{"left prepared", func(o *Observed) { o.Prepared = []string{"g1@0"} }, false, LeftPrepared},
		{"fractured read is named, not invalid", func(o *Observed) { o.Reads = []int64{400, 401} }, true, FracturedRead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.edit(&o)
			f := Check(o)
			if f.Valid != tt.valid {
				t.Errorf("valid = %v, want %v (%v)", f.Valid, tt.valid, f.Examples)
			}
			if tt.want == "" && len(f.Anomalies) != 0 {
				t.Errorf("anomalies %v, want none", f.Anomalies)
			}
			if tt.want != "" && f.Anomalies[tt.want] != 1 {
				t.Errorf("anomalies %v, want one %s", f.Anomalies, tt.want)
			}
		})
	}
}
