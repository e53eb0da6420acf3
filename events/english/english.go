// Package english is the server's English: one table from a sentence's
// code to its template, read for logs, the CLI and the English fields the
// API still carries for other clients (an audit entry's summary, an
// error's message). The codes and their args are what goes on the wire;
// the dashboard words the same codes in its own dictionaries
// (frontend/src/i18n), so each sentence is written once per language
// (issue 36 item 4).
//
// The codes are the dashboard's keys (a test holds both dictionaries to
// every code here, through the generated frontend/src/i18n/vocabulary.json):
//
//   - "audit.ev.<EventType>": an event's audit line (projections.AuditLine);
//     "audit.ev.step_done" for every step result without a line of its own.
//     The dashboard's are in frontend/src/i18n/vocab.ts.
//   - "refusal.<reason>": an error's message by its reason
//     (backend/apperr.Refuse); the dashboard's are in en.ts and ko.ts.
//
// A code may have English-only variants, "<code>/<variant>": a more
// specific sentence of the same args (a resumed job's acceptance, which
// field a refusal is about), which the dashboard says with the code's
// sentence and the flags the args carry.
package english

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// A template names its values in braces, {slot}, optionally through a
// format, {until|minute}. Brackets make a part optional: "[ (HTTP
// {status})]" is left out when a value it names is empty, and {name?}
// names a value without printing it (a flag: "[{absent?} (already
// absent)]"). Values are the args as the wire carries them (times in RFC
// 3339, durations in seconds or as Go durations, flags "true").
var formats = map[string]func(string) string{
	// minute: an RFC 3339 time to the minute, in UTC.
	"minute": func(v string) string {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return v
		}
		return t.UTC().Format("2006-01-02 15:04 MST")
	},
	// secs: a number of seconds as a Go duration (2h0m0s).
	"secs": func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return v
		}
		return (time.Duration(n) * time.Second).String()
	},
	// q: quoted as Go quotes a string.
	"q":     strconv.Quote,
	"lower": strings.ToLower,
	// short: a commit's first eight characters.
	"short": func(v string) string {
		if len(v) > 8 {
			return v[:8]
		}
		return v
	},
}

// Variant is code's English variant v when the table has one, else code.
func Variant(code, v string) string {
	if c := code + "/" + v; v != "" && Has(c) {
		return c
	}
	return code
}

// Base is the code a variant belongs to (a code is its own base).
func Base(code string) string {
	base, _, _ := strings.Cut(code, "/")
	return base
}

// Has reports whether code has an English sentence.
func Has(code string) bool {
	_, ok := table[code]
	return ok
}

// Codes lists every code of the table, sorted.
func Codes() []string {
	out := make([]string, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Say is code's sentence with args filled in; a code without a sentence
// is said as itself (a bug a test catches, never a panic in a log line).
func Say(code string, args map[string]string) string {
	return say(code, values{m: args})
}

// SayPairs is Say with the args as lists of name, value pairs (the first
// non-empty value of a name counts), for a caller that has them so: the
// audit says a line per event it projects.
func SayPairs(code string, lists ...[]string) string {
	return say(code, values{lists: lists})
}

// values are a sentence's args, from a map or from lists of pairs.
type values struct {
	m     map[string]string
	lists [][]string
}

func (vs values) get(name string) string {
	if vs.m != nil {
		return vs.m[name]
	}
	for _, kv := range vs.lists {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == name && kv[i+1] != "" {
				return kv[i+1]
			}
		}
	}
	return ""
}

func say(code string, args values) string {
	t, ok := table[code]
	if !ok {
		return code
	}
	var b strings.Builder
	b.Grow(len(t) + 32)
	for t != "" {
		i := strings.IndexByte(t, '[')
		if i < 0 {
			fill(&b, t, args)
			break
		}
		fill(&b, t[:i], args)
		j := strings.IndexByte(t[i:], ']')
		if j < 0 { // checked by TestTemplatesAreWellFormed
			j = len(t) - i
		}
		if part := t[i+1 : i+j]; present(part, args) {
			fill(&b, part, args)
		}
		t = t[min(i+j+1, len(t)):]
	}
	return b.String()
}

// present reports whether every value s names is non-empty.
func present(s string, args values) bool {
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			return true
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return true
		}
		name, _, _ := strings.Cut(s[i+1:i+j], "|")
		if args.get(strings.TrimSuffix(name, "?")) == "" {
			return false
		}
		s = s[i+j+1:]
	}
}

// fill writes s with its {values} to b.
func fill(b *strings.Builder, s string, args values) {
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s[i:])
			return
		}
		name, format, _ := strings.Cut(s[i+1:i+j], "|")
		name, silent := strings.CutSuffix(name, "?")
		if v := args.get(name); v != "" && !silent {
			if f := formats[format]; f != nil {
				v = f(v)
			}
			b.WriteString(v)
		}
		s = s[i+j+1:]
	}
}
