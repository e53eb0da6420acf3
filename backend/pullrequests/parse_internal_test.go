package pullrequests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseCleansTextAndRefusesWhatGitRefuses (fifth attack pass): a PR's
// title and author's display name are typed by anyone who can open a PR on
// a linked repository and end up on the board, in the audit and as the
// slot's occupant name. Control and bidirectional-override characters
// are dropped (a tab in the display name made the slot service refuse
// the occupant, so the PR never got a slot; U+202E reversed what the board
// showed after it), and the clip keeps whole characters (it cut a
// multi-byte character in two). A branch git would refuse (x.lock, a//b,
// a trailing slash or dot) is a malformed delivery, refused with 400 before
// anything is appended, as the slot service would refuse it later.
func TestParseCleansTextAndRefusesWhatGitRefuses(t *testing.T) {
	mk := func(title, author, branch string) []byte {
		var p map[string]any
		repo := map[string]any{"slug": "shop", "project": map[string]any{"key": "APPS"}}
		p = map[string]any{"eventKey": "pr:opened", "date": "2026-12-07T09:00:00+0900", "pullRequest": map[string]any{
			"id": 1, "title": title, "state": "OPEN",
			"author":  map[string]any{"user": map[string]any{"displayName": author, "slug": "dana"}},
			"fromRef": map[string]any{"displayId": branch, "latestCommit": strings.Repeat("a", 40), "repository": repo},
			"toRef":   map[string]any{"displayId": "main", "repository": repo},
		}}
		b, _ := json.Marshal(p)
		return b
	}
	h := http.Header{}
	h.Set(HeaderEventKey, "pr:opened")
	h.Set(HeaderRequestID, "r-1")

	d, err := parse(h, mk("Fix\x00 the\u202e cart\x1b[31m <script>alert(1)</script>", "Dana\tDev\u2066eloper\r\n", "feature/x"))
	if err != nil {
		t.Fatal(err)
	}
	if d.PR.Title != "Fix the cart[31m <script>alert(1)</script>" || d.PR.Author != "DanaDeveloper" {
		t.Errorf("cleaned title %q, author %q", d.PR.Title, d.PR.Author)
	}
	d, err = parse(h, mk(strings.Repeat("a", 199)+"é…", strings.Repeat("ü", 60), "feature/x"))
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(d.PR.Title) || !utf8.ValidString(d.PR.Author) || len(d.PR.Title) > 200 || len(d.PR.Author) > 100 {
		t.Errorf("clipped title %q (%d bytes), author %q (%d bytes): whole characters within the limit", d.PR.Title, len(d.PR.Title), d.PR.Author, len(d.PR.Author))
	}
	if d, err := parse(h, mk("t", "\u202e\t", "feature/x")); err != nil || d.PR.Author != "" {
		t.Errorf("an author name of nothing but control characters: %q %v, want none (the occupant is then the user slug)", d.PR.Author, err)
	}
	for _, b := range []string{"feature/x.lock", "a//b", "feature/", "feature.", "a/.hidden", "a@{1}", "-rf"} {
		if _, err := parse(h, mk("t", "Dana", b)); err == nil || fieldOf(err) != "pullRequest.fromRef.displayId" {
			t.Errorf("branch %q: %v, want refused", b, err)
		}
	}
}
