package coolify

import (
	"context"
		"github.com/slotkeeper/slotkeeper/backend/providers"
)

var _ providers.PaaSInventory = (*Client)(nil)

// InventoryProject lists the project's applications and databases: the
// project's environments (GET /projects/{uuid}/environments), then the
// team's applications and databases (GET /applications, GET /databases),
// kept when their environment_id is one of the project's. Coolify's lists
// are not paged. Any failure after the project was found is Unknown.
func (c *Client) InventoryProject(ctx context.Context, projectUUID string) (providers.ProjectInventory, providers.Lookup, error) {
	const op = "coolify.InventoryProject"
	var inv providers.ProjectInventory
	p, l, err := c.GetProject(ctx, projectUUID)
	if l != providers.Found {
		return inv, l, err
	}
	inv.Project = p
	var envs []struct {
		ID int `json:"id"`
	}
	if err := c.list(ctx, op, projectUUID, "/projects/"+projectUUID+"/environments", &envs); err != nil {
		return providers.ProjectInventory{}, providers.Unknown, err
	}
	in := map[int]bool{}
	for _, e := range envs {
		in[e.ID] = true
	}
	type item struct {
		resourceJSON
		EnvironmentID int `json:"environment_id"`
	}
	var apps, dbs []item
	if err := c.list(ctx, op, projectUUID, "/applications", &apps); err != nil {
		return providers.ProjectInventory{}, providers.Unknown, err
	}
	if err := c.list(ctx, op, projectUUID, "/databases", &dbs); err != nil {
		return providers.ProjectInventory{}, providers.Unknown, err
	}
	for _, a := range apps {
		if in[a.EnvironmentID] {
			inv.Applications = append(inv.Applications, a.application())
		}
	}
	for _, d := range dbs {
		if in[d.EnvironmentID] {
			inv.Databases = append(inv.Databases, d.database())
		}
	}
	return inv, providers.Found, nil
}
