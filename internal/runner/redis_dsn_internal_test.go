package runner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/stores/redis"
)

// A Redis DSN names one server, or with master_name the Sentinels that say where the
// primary is; what cannot be read is one line naming what is wrong.
func TestRedisConfigFromDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want redis.Config
	}{
		{"redis://:pw@127.0.0.1:6379/2", redis.Config{Addr: "127.0.0.1:6379", Password: "pw", DB: 2}},
		{"redis://:pw@h1:26379/0?master_name=indoubt&addr=h2:26380&addr=h3:26381", redis.Config{Password: "pw",
			MasterName: "indoubt", SentinelAddrs: []string{"h1:26379", "h2:26380", "h3:26381"}, SentinelPassword: "pw"}},
		{"redis://:pw@h1:26379?master_name=m&sentinel_password=", redis.Config{Password: "pw", MasterName: "m", SentinelAddrs: []string{"h1:26379"}}},
		{"redis://:pw@h1:26379?master_name=m&sentinel_password=s", redis.Config{Password: "pw", MasterName: "m", SentinelAddrs: []string{"h1:26379"}, SentinelPassword: "s"}},
	} {
		got, err := redisConfig(tc.dsn)
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.dsn, got, tc.want)
		}
	}
	for _, tc := range []struct{ dsn, want string }{
		{"redis://:secret@h1:1/0?master_name=", "master_name is empty"},
		{"redis://:secret@h1:1/0?addr=h2:2", "add master_name"},
		{"redis://:secret@h1:1/0?master_name=m&password=x", `unknown parameter "password"`},
		{"redis://:secret@h1:1/x", "not a number"},
		{"postgres://:secret@h1:1/0", "want redis://"},
	} {
		_, err := redisConfig(tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q and no password", tc.dsn, err, tc.want)
		}
	}
	if _, err := redisAddr("redis://:pw@h1:1/0?master_name=m"); err == nil || !strings.Contains(err.Error(), "Sentinel DSN") {
		t.Errorf("proxy address of a Sentinel DSN: %v", err)
	}
	if got, err := redisAddr("redis://:pw@h1:1/0"); err != nil || got != "h1:1" {
		t.Errorf("proxy address of one server: %q, %v", got, err)
	}
}
