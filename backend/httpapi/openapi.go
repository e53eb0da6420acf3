package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openapiDoc is the API's contract (OpenAPI 3.1): every route of the route
// table with its permission, bodies, query parameters, error statuses and
// the live stream's frames. It is the one source: docs/openapi.json is a
// copy that TestOpenAPIDocsCopy keeps equal, and TestOpenAPIContract checks
// the route table against it and validates real answers with it.
//
//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the API's OpenAPI document.
func OpenAPI() []byte { return openapiDoc }

// openapi answers GET /api/openapi.json.
func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapiDoc)
}
