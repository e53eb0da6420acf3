package providers

import "context"

// ProjectInventory is what a PaaS project holds, as its lists report it.
type ProjectInventory struct {
	UUID         string
	Project      Project
	Applications []Application
	Databases    []Database
	// Lookup says whether the project exists: Absent only for the
	// provider's own not-found answer. Unknown comes with Err, and then
	// the lists are empty: a partial list must never read as "the rest is
	// gone".
	Lookup Lookup
	Err    error
}

// PaaSInventory lists PaaS projects' resources for the reconciler.
type PaaSInventory interface {
	// InventoryProjects lists the applications and databases of each
	// project, one result per uuid in order. The team-wide lists are read
	// once per call, so the cost is two calls per project plus two.
	InventoryProjects(ctx context.Context, projectUUIDs []string) []ProjectInventory
}

// GitInventory lists a git host project's repositories (every page).
type GitInventory interface {
	ListRepos(ctx context.Context, project string) ([]Repo, error)
	GetRepo(ctx context.Context, project, slug string) (Repo, Lookup, error)
}
