package coolify

import (
	"context"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

var _ providers.PaaSInventory = (*Client)(nil)

// InventoryProjects lists each project's applications and databases: the
// project (GET /projects/{uuid}, tri-state) and its environments (GET
// /projects/{uuid}/environments), then the team's applications and
// databases once (GET /applications, GET /databases; Coolify does not page
// them), assigned by environment_id. A failed team list makes every found
// project Unknown.
func (c *Client) InventoryProjects(ctx context.Context, uuids []string) []providers.ProjectInventory {
	const op = "coolify.InventoryProjects"
	out := make([]providers.ProjectInventory, len(uuids))
	envOf := map[int]int{} // environment id → index in out
	for i, id := range uuids {
		inv := &out[i]
		inv.UUID = id
		p, l, err := c.GetProject(ctx, id)
		inv.Project, inv.Lookup = p, l
		if l != providers.Found {
			inv.Err = err
			continue
		}
		var envs []struct {
			ID int `json:"id"`
		}
		if err := c.list(ctx, op, id, "/projects/"+id+"/environments", msgProject, &envs); err != nil {
			inv.Lookup, inv.Err = providers.Unknown, err
			continue
		}
		for _, e := range envs {
			envOf[e.ID] = i
		}
	}
	if len(envOf) == 0 {
		return out
	}
	type item struct {
		resourceJSON
		EnvironmentID int `json:"environment_id"`
	}
	var apps, dbs []item
	err := c.getJSON(ctx, op, "applications", "/applications", msgNoneIsOwned, &apps)
	if err == nil {
		err = c.getJSON(ctx, op, "databases", "/databases", msgNoneIsOwned, &dbs)
	}
	if err != nil {
		for i := range out {
			if out[i].Lookup == providers.Found {
				out[i].Lookup, out[i].Err = providers.Unknown, err
			}
		}
		return out
	}
	for _, a := range apps {
		if i, ok := envOf[a.EnvironmentID]; ok && out[i].Lookup == providers.Found {
			out[i].Applications = append(out[i].Applications, a.application())
		}
	}
	for _, d := range dbs {
		if i, ok := envOf[d.EnvironmentID]; ok && out[i].Lookup == providers.Found {
			out[i].Databases = append(out[i].Databases, d.database())
		}
	}
	return out
}
