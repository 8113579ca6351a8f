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

// A node of a ring listens on its own address, names the ring's seeds, and has its
// own token; a token that is no Murmur3 token is refused.
func TestCassandraRingNodeYAML(t *testing.T) {
	conf, err := cassandraYAMLAt("198.18.3.12", []string{"198.18.3.11"}, "-3074457345618258603", "/d", "/d", 9042, 7000, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`listen_address: 198.18.3.12`, `rpc_address: 198.18.3.12`, `initial_token: -3074457345618258603`,
		`seeds: "198.18.3.11:7000"`, `auto_bootstrap: false`} {
		if !strings.Contains(conf, w) {
			t.Errorf("no %q in\n%s", w, conf)
		}
	}
	if _, err := cassandraYAMLAt("198.18.3.12", nil, "0x10", "/d", "/d", 9042, 7000, nil, ""); err == nil {
		t.Error("token 0x10 accepted")
	}
}
