package providers

import "context"

// ProjectInventory is what a PaaS project holds, as its lists report it.
type ProjectInventory struct {
	Project      Project
	Applications []Application
	Databases    []Database
}

// PaaSInventory lists a PaaS project's resources for the reconciler.
type PaaSInventory interface {
	// InventoryProject lists the project's applications and databases.
	// Lookup says whether the project itself exists: Absent only for the
	// provider's own not-found answer; any failure (of the project or of
	// a list) is Unknown with an error, and the inventory is then empty —
	// a partial list must never read as "the rest is gone".
	InventoryProject(ctx context.Context, projectUUID string) (ProjectInventory, Lookup, error)
}

// GitInventory lists a git host project's repositories (every page).
type GitInventory interface {
	ListRepos(ctx context.Context, project string) ([]Repo, error)
	GetRepo(ctx context.Context, project, slug string) (Repo, Lookup, error)
}
