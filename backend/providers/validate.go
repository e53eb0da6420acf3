package providers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Validation of ids and names before they reach a URL path, a git ref or a
// command line. Every client calls these first and returns an *Error with
// CodeInvalid without sending anything. The rules are deliberately narrow:
// ASCII only, so no confusable or control character can get through.

// MaxUUIDLen, MaxSlugLen and MaxRefLen bound the accepted lengths.
const (
	MaxUUIDLen = 64
	MaxSlugLen = 128
	MaxRefLen  = 255
)

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// ValidateUUID checks a Coolify resource id. Coolify uses cuid2 ids: 24
// lower-case base-36 characters today, 7 in older installs (the published
// spec shows both, e.g. "nc0k04gk8g0cgsk440g0koko" and "og888os"); some
// resources carry RFC 4122 uuids. Accepted: 7–64 characters of [a-z0-9-],
// starting and ending with [a-z0-9], no "--".
func ValidateUUID(id string) error {
	if len(id) < 7 || len(id) > MaxUUIDLen {
		return fmt.Errorf("uuid %+q: want 7-%d characters", clip(id), MaxUUIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !isLowerAlnum(id[i]) && id[i] != '-' {
			return fmt.Errorf("uuid %+q: only lower-case letters, digits and '-' are allowed", clip(id))
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' || strings.Contains(id, "--") {
		return fmt.Errorf("uuid %+q: misplaced '-'", clip(id))
	}
	return nil
}

// ValidateProjectKey checks a Bitbucket project key: an ASCII letter, then
// letters, digits or '_' (Bitbucket's rule), at most 128. Personal projects
// ("~user") are not supported.
func ValidateProjectKey(key string) error {
	if key == "" || len(key) > MaxSlugLen {
		return fmt.Errorf("project key %+q: want 1-%d characters", clip(key), MaxSlugLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if i == 0 && !letter || !letter && !(c >= '0' && c <= '9') && c != '_' {
			return fmt.Errorf("project key %+q: a letter, then letters, digits or '_'", clip(key))
		}
	}
	return nil
}

// ValidateSlug checks a Bitbucket repository slug: lower-case letters,
// digits, '-', '_' and '.', starting with a letter or digit, at most 128,
// never "..", and not ending in ".git" (which would confuse clone URLs).
func ValidateSlug(slug string) error {
	return validateRepoWord("slug", slug, true)
}

// ValidateRepoName checks a name given to CreateRepo. The same rules as a
// slug but upper case is allowed (Bitbucket lower-cases it into the slug);
// spaces and other characters Bitbucket would rewrite are refused so the
// slug is predictable.
func ValidateRepoName(name string) error {
	return validateRepoWord("repository name", name, false)
}

func validateRepoWord(what, s string, lower bool) error {
	if s == "" || len(s) > MaxSlugLen {
		return fmt.Errorf("%s %+q: want 1-%d characters", what, clip(s), MaxSlugLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := isLowerAlnum(c) || c == '-' || c == '_' || c == '.' || !lower && c >= 'A' && c <= 'Z'
		if !ok {
			return fmt.Errorf("%s %+q: only letters, digits, '-', '_' and '.' are allowed", what, clip(s))
		}
	}
	first := s[0]
	if first == '-' || first == '_' || first == '.' {
		return fmt.Errorf("%s %+q: must start with a letter or digit", what, clip(s))
	}
	if strings.Contains(s, "..") || strings.HasSuffix(strings.ToLower(s), ".git") {
		return fmt.Errorf("%s %+q: no \"..\" and no \".git\" suffix", what, clip(s))
	}
	return nil
}

// ValidateBranch checks a branch name by git check-ref-format's rules for
// refs/heads/<name>, plus: ASCII only, no leading '-' (it would read as an
// option), at most 255.
func ValidateBranch(b string) error {
	bad := func(why string) error { return fmt.Errorf("branch %+q: %s", clip(b), why) }
	if b == "" || len(b) > MaxRefLen {
		return bad(fmt.Sprintf("want 1-%d characters", MaxRefLen))
	}
	if b[0] == '-' {
		return bad("must not start with '-'")
	}
	if b == "@" || strings.Contains(b, "@{") || strings.Contains(b, "..") || strings.Contains(b, "//") {
		return bad(`no "@", "@{", ".." or "//"`)
	}
	if strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".") {
		return bad("must not end with '/' or '.'")
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 0x21 || c >= 0x7f || strings.IndexByte(`~^:?*[\`, c) >= 0 {
			return bad("no spaces, control, non-ASCII or ~^:?*[\\ characters")
		}
	}
	for _, part := range strings.Split(b, "/") {
		if part == "" || part[0] == '.' || strings.HasSuffix(part, ".lock") {
			return bad("no empty component, none starting with '.' or ending with \".lock\"")
		}
	}
	return nil
}

// ValidateSHA checks a full object name (40 hex digits, or 64 for sha256).
func ValidateSHA(sha string) error {
	if len(sha) != 40 && len(sha) != 64 {
		return fmt.Errorf("sha %+q: want 40 or 64 hex digits", clip(sha))
	}
	for i := 0; i < len(sha); i++ {
		if !(sha[i] >= '0' && sha[i] <= '9' || sha[i] >= 'a' && sha[i] <= 'f') {
			return fmt.Errorf("sha %+q: want lower-case hex", clip(sha))
		}
	}
	return nil
}

// ErrInvalid is wrapped by every validation error a client returns.
var ErrInvalid = errors.New("invalid input")

// clip keeps error messages short and printable whatever the input was.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// Invalid builds the *Error a client returns for input it refused to send.
func Invalid(op, resource string, err error) *Error {
	// Quoted to ASCII: a refused id may hold control or look-alike characters
	// that must not reach a log line as they are.
	res := strings.Trim(strconv.QuoteToASCII(clip(resource)), `"`)
	return &Error{Op: op, Resource: res, Code: CodeInvalid, Message: err.Error(), Err: errors.Join(ErrInvalid, err)}
}
