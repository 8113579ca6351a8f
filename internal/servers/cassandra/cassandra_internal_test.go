package cassandra

import (
	"strings"
	"testing"
)

// Each commit log sync mode writes the keys Cassandra 5.0 accepts beside it, and only
// those: it refuses commitlog_sync_period beside batch or group, and group without a
// window.
func TestCassandraCommitLogSettings(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		want, not []string
	}{
		{"", []string{"commitlog_sync: periodic", "commitlog_sync_period: 10000ms"}, []string{"group_window"}},
		{CommitLogBatch, []string{"commitlog_sync: batch"}, []string{"commitlog_sync_period", "group_window", "batch_window"}},
		{CommitLogGroup, []string{"commitlog_sync: group", "commitlog_sync_group_window: " + GroupWindow}, []string{"commitlog_sync_period"}},
	} {
		conf, err := cassandraYAML("/d", "/m", 1, 2, nil, tc.mode)
		if err != nil {
			t.Fatalf("%q: %v", tc.mode, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(conf, w+"\n") {
				t.Errorf("%q: no %q in\n%s", tc.mode, w, conf)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(conf, n) {
				t.Errorf("%q: has %q", tc.mode, n)
			}
		}
		if !strings.Contains(conf, `commitlog_directory: "/m/commitlog"`) || !strings.Contains(conf, `cdc_raw_directory: "/d/cdc_raw"`) {
			t.Errorf("%q: data directories not on the data root:\n%s", tc.mode, conf)
		}
	}
	if _, err := cassandraYAML("/d", "/d", 1, 2, nil, "always"); err == nil {
		t.Error("commit log sync \"always\" accepted")
	}
	if _, err := cassandraYAML("/d", "/d", 1, 2, map[string]string{"commitlog_sync": "batch"}, ""); err == nil {
		t.Error("commitlog_sync accepted in Settings")
	}
}
