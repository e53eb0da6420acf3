// Package doctor holds the read-only checks of a configured deployment
// against its real providers: each check answers pass or fail with the exact
// fix. `slotkeeper doctor` prints them, `serve` runs them at start (and
// refuses to start on a definite misconfiguration) and `/readyz` reports the
// failing ones. The provider-specific checks live beside this file, one file
// per provider; this file is only the shared vocabulary.
package doctor

import (
	"context"
	"fmt"
	"io"
)

// Result is the outcome of one check.
type Result struct {
	// Check names what was checked, e.g. "coolify: base URL".
	Check string
	// OK is true when the check passed.
	OK bool
	// Detail says what was seen (never a secret).
	Detail string
	// Fix is the exact thing to change when the check failed.
	Fix string
	// Definite is true when the failure is a misconfiguration that retrying
	// cannot cure (a wrong base URL, a token of another team, a missing
	// permission); serve refuses to start on one. A failure that may be
	// passing (the provider unreachable, 5xx) is not definite: serve starts
	// and /readyz reports it until it passes.
	Definite bool
}

// Check runs one group of related checks. It takes ctx first and must
// return when ctx is done; it never changes anything at the provider.
type Check func(ctx context.Context) []Result

// Run runs every check in order and returns all results.
func Run(ctx context.Context, checks ...Check) []Result {
	var out []Result
	for _, c := range checks {
		out = append(out, c(ctx)...)
	}
	return out
}

// Failed returns the failing results, and whether any of them is definite.
func Failed(rs []Result) (failed []Result, definite bool) {
	for _, r := range rs {
		if !r.OK {
			failed = append(failed, r)
			definite = definite || r.Definite
		}
	}
	return failed, definite
}

// Print writes one line per result ("PASS check: detail" or "FAIL check:
// detail" followed by an indented "fix: …" line) and returns how many failed.
func Print(w io.Writer, rs []Result) int {
	n := 0
	for _, r := range rs {
		if r.OK {
			fmt.Fprintf(w, "PASS %s: %s\n", r.Check, r.Detail)
			continue
		}
		n++
		fmt.Fprintf(w, "FAIL %s: %s\n", r.Check, r.Detail)
		if r.Fix != "" {
			fmt.Fprintf(w, "     fix: %s\n", r.Fix)
		}
	}
	return n
}
