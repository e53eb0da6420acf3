// Package frontend holds the dashboard SPA. The Go binary serves the built
// files from Dist; frontend/dist/.keep is committed so this compiles before
// the first `npm run build`.
package frontend

import "embed"

// Dist is the built SPA (index.html and assets/), rooted at "dist".
//
//go:embed all:dist
var Dist embed.FS
