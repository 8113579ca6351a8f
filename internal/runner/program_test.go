package runner

import (
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestProgramStores: the stores indoubt exec serves are the store table's rows that say
// how to give a program their DSN, then the API layers; what each does with a DSN is
// what indoubt run does with it.
func TestProgramStores(t *testing.T) {
	var got []string
	for _, s := range ProgramStores() {
		got = append(got, string(s.Name()))
	}
	if want := []string{"postgres", "redis", "mongo", "cockroach", "mysql", "http", "grpc"}; !slices.Equal(got, want) {
		t.Errorf("ProgramStores %v, want %v", got, want)
	}
	store := func(name string) Store {
		t.Helper()
		s, ok := ProgramStore(name)
		if !ok {
			t.Fatalf("no program store %s", name)
		}
		return s
	}
	for _, name := range []string{"cql", "etcd", "tcp"} {
		if _, ok := ProgramStore(name); ok {
			t.Errorf("exec serves %s", name)
		}
	}
	for name, want := range map[string]bool{"postgres": true, "redis": true, "mongo": true, "mysql": true, "cockroach": false, "http": false} {
		if s := store(name); s.Launchable() != want {
			t.Errorf("%s: Launchable %v", name, !want)
		}
	}
	if !store("postgres").Keeps() || store("redis").Keeps() || !store("cockroach").SQL() || store("mysql").SQL() {
		t.Errorf("Keeps or SQL wrong")
	}

	// The proxied DSN is the one indoubt run's clients use.
	for _, c := range []struct{ store, dsn, want string }{
		{"postgres", "postgres://u:p@db:5432/app", "postgres://u:p@127.0.0.1:9/app?sslmode=disable"},
		{"postgres", "postgres://u:p@db:5432/app?sslmode=require", "postgres://u:p@127.0.0.1:9/app?sslmode=require"},
		{"cockroach", "postgresql://root@db:26257/defaultdb", "postgresql://root@127.0.0.1:9/defaultdb?sslmode=disable"},
		{"mongo", "mongodb://db:27017/", "mongodb://127.0.0.1:9/?directConnection=true"},
		{"redis", "redis://:pw@db:6379/0", "redis://:pw@127.0.0.1:9/0"},
		{"mysql", "mysql://u:p@db:3306/app", "mysql://u:p@127.0.0.1:9/app"},
	} {
		s := store(c.store)
		up, err := s.Upstream(c.dsn)
		if err != nil || !strings.HasPrefix(up, "db:") {
			t.Errorf("%s: Upstream(%s) = %q, %v", c.store, c.dsn, up, err)
		}
		if got, err := s.ProxyDSN(c.dsn, "127.0.0.1:9"); err != nil || got != c.want {
			t.Errorf("%s: ProxyDSN(%s) = %q, %v; want %q", c.store, c.dsn, got, err, c.want)
		}
		b, _ := lookupBackend(s.Name())
		if run, _ := b.rewrite(c.dsn, "127.0.0.1:9"); run != c.want {
			t.Errorf("%s: indoubt run's proxied DSN %q, exec's %q", c.store, run, c.want)
		}
	}
	if _, err := store("redis").Upstream("redis://db:26379/?master_name=m"); err == nil {
		t.Errorf("a Sentinel DSN has an upstream: the proxy would stand in front of one Sentinel")
	}
	if tls := store("postgres").Encrypted("postgres://u@127.0.0.1:9/app?sslmode=require"); tls != "sslmode=require" {
		t.Errorf("Encrypted %q", tls)
	}
	if tls := store("cockroach").Encrypted("postgresql://root@127.0.0.1:9/d?sslmode=disable"); tls != "" {
		t.Errorf("Encrypted %q", tls)
	}

	// The variables a program's drivers read.
	for _, c := range []struct {
		store, proxied string
		want           []string
	}{
		{"postgres", "postgres://u:p@127.0.0.1:9/app?sslmode=disable", []string{"PGHOST=127.0.0.1", "PGPORT=9", "DATABASE_URL=postgres://u:p@127.0.0.1:9/app?sslmode=disable",
			"PGUSER=u", "PGPASSWORD=p", "PGDATABASE=app", "PGSSLMODE=disable"}},
		{"postgres", "", []string{"PGHOST=127.0.0.1", "PGPORT=9"}},
		{"redis", "redis://default:p@127.0.0.1:9", []string{"REDIS_URL=redis://default:p@127.0.0.1:9"}},
		{"redis", "", nil},
		{"mongo", "mongodb://127.0.0.1:9/", []string{"MONGODB_URI=mongodb://127.0.0.1:9/"}},
		{"mysql", "mysql://u:p@127.0.0.1:9/app", []string{"MYSQL_HOST=127.0.0.1", "MYSQL_TCP_PORT=9", "DATABASE_URL=mysql://u:p@127.0.0.1:9/app",
			"MYSQL_USER=u", "MYSQL_PWD=p", "MYSQL_DATABASE=app"}},
		{"http", "", []string{"INDOUBT_BASE_URL=http://127.0.0.1:9"}},
		{"grpc", "", []string{"INDOUBT_BASE_URL=http://127.0.0.1:9"}},
	} {
		if got, err := store(c.store).Env(c.proxied, "127.0.0.1:9"); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: Env(%q) = %q, %v; want %q", c.store, c.proxied, got, err, c.want)
		}
	}

	// The API layers' protocols, by name and alias, as indoubt proxy --protocol takes them.
	for name, want := range map[string]toxics.Protocol{"http": toxics.HTTP{}, "grpc": toxics.HTTP2{}, "h2c": toxics.HTTP2{}, "http2": toxics.HTTP2{}, "resp": toxics.Resp{}} {
		if p, ok := ProtocolFor(name); !ok || p != want {
			t.Errorf("ProtocolFor(%s) = %v, %v", name, p, ok)
		}
	}
	if s, ok := StoreFromDSN("http://127.0.0.1:9"); ok {
		t.Errorf("an http:// DSN names store %s: the API layers are not stores", s)
	}
}
