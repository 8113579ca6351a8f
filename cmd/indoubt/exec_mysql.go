package main

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/internal/servers/mariadb"
)

func launchExecMariaDB(ctx context.Context, dir string) (string, string, func() error, error) {
	m, err := mariadb.Start(ctx, mariadb.Options{LogPath: filepath.Join(dir, "mariadb.log")})
	if err != nil {
		return "", "", nil, err
	}
	return m.DSN, "launched MariaDB " + m.Version + " at " + m.Addr, m.Stop, nil
}

// mysqlEnv gives a MySQL DSN as DATABASE_URL and the variables the mysql and mariadb
// clients read (MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_PWD), with MYSQL_USER and
// MYSQL_DATABASE for programs that read those.
func mysqlEnv(proxied, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	env := []string{"MYSQL_HOST=" + host, "MYSQL_TCP_PORT=" + port}
	if proxied == "" {
		return env, nil
	}
	u, err := url.Parse(proxied)
	if err != nil {
		return nil, err
	}
	env = append(env, "DATABASE_URL="+proxied)
	if u.User != nil {
		env = append(env, "MYSQL_USER="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			env = append(env, "MYSQL_PWD="+pw)
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		env = append(env, "MYSQL_DATABASE="+db)
	}
	return env, nil
}
