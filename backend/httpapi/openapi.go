package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openapiDoc is the API's contract (OpenAPI 3.1): every route of the route
// table with its permission, bodies, query parameters, error statuses and
// the live stream's frames. It is the one source of the wire contract and
// has no copy: the route table, the Go views and the SPA's schemas are
// checked against it (docs/api.md "The contract").
//
//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the API's OpenAPI document.
func OpenAPI() []byte { return openapiDoc }

// openapi answers GET /api/openapi.json.
func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapiDoc)
}
