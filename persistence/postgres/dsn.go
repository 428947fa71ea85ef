package postgres

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// registryKey is the normalized form of a parsed DSN under which the
// process shares one Store: user, every host:port in order, database and
// the session parameters (search_path, ...), sorted. Two DSNs that reach the
// same database as the same user with the same parameters share a Store
// however they were written (URL or key=value, parameter order). The
// password, TLS and timeouts are not part of it: they do not change which
// database is written.
func registryKey(c *pgx.ConnConfig) string {
	var b strings.Builder
	b.WriteString("postgres://")
	b.WriteString(url.PathEscape(c.User))
	b.WriteString("@")
	hosts := []string{c.Host + ":" + strconv.Itoa(int(c.Port))}
	for _, f := range c.Fallbacks {
		hosts = append(hosts, f.Host+":"+strconv.Itoa(int(f.Port)))
	}
	b.WriteString(strings.Join(slices.Compact(hosts), ","))
	b.WriteString("/")
	b.WriteString(url.PathEscape(c.Database))
	keys := make([]string, 0, len(c.RuntimeParams))
	for k := range c.RuntimeParams {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteString("?")
		} else {
			b.WriteString("&")
		}
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(c.RuntimeParams[k]))
	}
	return b.String()
}
