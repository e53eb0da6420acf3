package coolify_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
)

// TestActiveDeploymentsKeyedObject: Coolify's GET /deployments sorts its
// collection with sortBy('id'), which keeps the rows' keys, so the answer
// is a JSON object keyed by index when the database returned the rows in
// another order (DeployController.php:76-82). The client reads both shapes
// and puts the rows in id order; each row's deployment_url becomes the
// page under the instance's root.
func TestActiveDeploymentsKeyedObject(t *testing.T) {
	for _, body := range []string{
		`{"1":{"id":7,"deployment_uuid":"d7","status":"queued","server_id":1,"deployment_url":"/project/p/environment/e/application/a/deployment/d7"},` +
			`"0":{"id":3,"deployment_uuid":"d3","status":"in_progress","server_id":1}}`,
		`[{"id":7,"deployment_uuid":"d7","status":"queued","server_id":1,"deployment_url":"/project/p/environment/e/application/a/deployment/d7"},` +
			`{"id":3,"deployment_uuid":"d3","status":"in_progress","server_id":1}]`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/deployments" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		c := coolify.New(coolify.Options{BaseURL: srv.URL + "/api/v1", Token: token, RateRetries: -1})
		got, err := c.ActiveDeployments(context.Background())
		srv.Close()
		if err != nil || len(got) != 2 || got[0].UUID != "d3" || got[1].UUID != "d7" || got[1].ServerID != 1 ||
			got[1].URL != srv.URL+"/project/p/environment/e/application/a/deployment/d7" {
			t.Errorf("%s: %+v %v, want d3 then d7 with its page", body[:1], got, err)
		}
	}
}
