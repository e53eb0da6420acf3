package kurrent

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// ErrConfig is wrapped by every error about a bad connection string.
var ErrConfig = errors.New("kurrent: bad connection string")

// knownSettings are the query parameters EventStore-Client-Go v4 understands
// (lower case); maxAppendSize and maxAppendEventSize are the adapter's own
// (see Options). The client only logs a warning for an unknown one, so a typo
// like "tsl=false" would silently connect with TLS; we refuse it instead.
var knownSettings = map[string]bool{
	"discoveryinterval": true, "gossiptimeout": true, "maxdiscoverattempts": true,
	"nodepreference": true, "keepaliveinterval": true, "keepalivetimeout": true,
	"tls": true, "tlscafile": true, "usercertfile": true, "userkeyfile": true,
	"tlsverifycert": true, "defaultdeadline": true,
}

// ParseConnString turns a KurrentDB connection string into the client's
// configuration. It accepts the kurrentdb:// (also kurrent:// and kdb://)
// schemes of current KurrentDB releases and the older esdb:// ones, each with
// an optional "+discover" for DNS cluster discovery. Client v4.2.0 knows only
// esdb://, so the scheme is rewritten before ParseConnectionString sees it.
//
// Returns an error wrapping ErrConfig for an unknown scheme or setting, and for
// credentials together with tls=false: the client drops credentials on
// insecure connections, so every call would run anonymous and fail later with
// a confusing access-denied error.
func ParseConnString(s string) (*esdb.Configuration, error) {
	cfg, _, err := parseConnString(s)
	return cfg, err
}

// limits are the adapter's own settings of a connection string: the
// server's append limits (Options.MaxAppendSize, MaxAppendEventSize). They
// are taken out before the client sees the string.
type limits struct{ maxAppend, maxEvent int }

var adapterSettings = map[string]bool{"maxappendsize": true, "maxappendeventsize": true}

func parseConnString(s string) (*esdb.Configuration, limits, error) {
	var lim limits
	if base, query, found := strings.Cut(s, "?"); found {
		var keep []string
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if !adapterSettings[strings.ToLower(k)] {
				keep = append(keep, kv)
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, lim, fmt.Errorf("%w: %s=%q: want a positive number of bytes", ErrConfig, k, v)
			}
			if strings.EqualFold(k, "maxAppendSize") {
				lim.maxAppend = n
			} else {
				lim.maxEvent = n
			}
		}
		s = base
		if len(keep) > 0 {
			s += "?" + strings.Join(keep, "&")
		}
	}
	cfg, err := parseClientConnString(s)
	return cfg, lim, err
}

func parseClientConnString(s string) (*esdb.Configuration, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("%w: %q has no scheme (want kurrentdb:// or esdb://)", ErrConfig, redact(s))
	}
	discover := strings.HasSuffix(strings.ToLower(scheme), "+discover")
	switch strings.TrimSuffix(strings.ToLower(scheme), "+discover") {
	case "kurrentdb", "kurrent", "kdb", "esdb":
	default:
		return nil, fmt.Errorf("%w: scheme %q (want kurrentdb://, kurrentdb+discover://, esdb:// or esdb+discover://)", ErrConfig, scheme)
	}
	esdbScheme := "esdb"
	if discover {
		esdbScheme = "esdb+discover"
	}
	rewritten := esdbScheme + "://" + rest

	hasUser, tlsOff := false, false
	if _, query, found := strings.Cut(rest, "?"); found {
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("%w: settings: %v", ErrConfig, err)
		}
		for k, vs := range q {
			lk := strings.ToLower(k)
			if !knownSettings[lk] {
				return nil, fmt.Errorf("%w: unknown setting %q", ErrConfig, k)
			}
			if lk == "tls" && len(vs) > 0 && strings.EqualFold(vs[0], "false") {
				tlsOff = true
			}
		}
	}
	if authority, _, _ := strings.Cut(rest, "/"); strings.Contains(strings.SplitN(authority, "?", 2)[0], "@") {
		hasUser = true
	}
	if hasUser && tlsOff {
		return nil, fmt.Errorf("%w: credentials with tls=false are dropped by the client (KurrentDB accepts them only over TLS): enable TLS or remove the user:password", ErrConfig)
	}
	cfg, err := esdb.ParseConnectionString(rewritten)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, redact(s), err)
	}
	return cfg, nil
}

// redact hides a password in a connection string for error messages and logs.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@")
	if at < 0 {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":***" + rest[at:]
}
