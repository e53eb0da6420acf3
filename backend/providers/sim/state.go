package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

var (
	errRepoExists = errors.New("sim: repository already exists")
	// ErrNotFound is returned by state methods given an unknown parent id.
	ErrNotFound = errors.New("sim: not found")
)

// RepoFixture names a repository the simulator holds.
type RepoFixture struct {
	Project  string `json:"project"` // project key, upper case
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	CloneURL string `json:"clone_url"`
}

// SlotFixture is everything SeedSlot created for one slot.
type SlotFixture struct {
	Name         string      `json:"name"`
	ProjectUUID  string      `json:"project_uuid"`
	AppUUID      string      `json:"app_uuid"`
	DBUUID       string      `json:"db_uuid"`
	EnvUUIDs     []string    `json:"env_uuids"`
	StorageUUIDs []string    `json:"storage_uuids"`
	Repo         RepoFixture `json:"repo"`
	// RepoHead is the sha of the slot repo's main branch.
	RepoHead string `json:"repo_head"`
	// Template is the shared template repository; TemplateRef its branch and
	// TemplateHead the sha it points at (different from RepoHead).
	Template     RepoFixture `json:"template"`
	TemplateRef  string      `json:"template_ref"`
	TemplateHead string      `json:"template_head"`
	// TemplateApp is the Coolify application a ready reset copies env
	// vars from ("" when none was seeded; see EnsureTemplateApp).
	TemplateApp string `json:"template_app,omitempty"`
}

// Seeding defaults.
const (
	SlotVolumeMount = "/var/lib/app" // where a seeded slot's persistent volume is mounted
	SlotRepoProject = "SLOT"
	TemplateProject = "TPL"
	TemplateSlug    = "template"
	DefaultBranch   = "main"
)

// SeedSlot creates a slot's world: a Coolify project with an application
// (status running:healthy), a postgres database, three env vars, a
// persistent volume and a file storage; a Bitbucket repository
// SLOT/slot-<name> with one commit on main; and, the first time, the
// template repository TPL/template with a different commit on main.
func (s *Sim) SeedSlot(name string) (SlotFixture, error) {
	fx := SlotFixture{Name: name}
	fx.ProjectUUID = s.AddProject("slot-" + name)
	var err error
	if fx.AppUUID, err = s.AddApp(fx.ProjectUUID, "app-"+name); err != nil {
		return fx, err
	}
	if fx.DBUUID, err = s.AddDatabase(fx.ProjectUUID, "db-"+name); err != nil {
		return fx, err
	}
	for _, kv := range [][2]string{{"DATABASE_URL", "postgres://db-" + name + "/app"}, {"APP_ENV", "preview"}, {"SLOT", name}} {
		id, err := s.AddEnv(fx.AppUUID, kv[0], kv[1])
		if err != nil {
			return fx, err
		}
		fx.EnvUUIDs = append(fx.EnvUUIDs, id)
	}
	for _, st := range [][3]string{{"data-" + name, "persistent", SlotVolumeMount}, {"config-" + name, "file", "/etc/app/config.yml"}} {
		id, err := s.AddStorage(fx.AppUUID, st[0], st[1], st[2])
		if err != nil {
			return fx, err
		}
		fx.StorageUUIDs = append(fx.StorageUUIDs, id)
	}
	if fx.Repo, err = s.AddRepo(SlotRepoProject, "slot-"+name); err != nil {
		return fx, err
	}
	if fx.RepoHead, err = s.CommitFile(fx.Repo.Project, fx.Repo.Slug, DefaultBranch, "README.md", "slot "+name+" work in progress\n"); err != nil {
		return fx, err
	}
	tmpl, head, err := s.ensureTemplate()
	if err != nil {
		return fx, err
	}
	s.SetAppRepo(fx.AppUUID, fx.Repo.Project, fx.Repo.Slug, DefaultBranch)
	fx.Template, fx.TemplateRef, fx.TemplateHead = tmpl, DefaultBranch, head
	return fx, nil
}

func (s *Sim) ensureTemplate() (RepoFixture, string, error) {
	s.gitMu.Lock()
	defer s.gitMu.Unlock()
	s.mu.Lock()
	t := s.tmpl
	s.mu.Unlock()
	if t != nil {
		head, err := s.RepoHeadSHA(t.Project, t.Slug, DefaultBranch)
		rp := *t
		rp.CloneURL = s.CloneURL(rp.Project, rp.Slug) // a loaded one names an old port
		return rp, head, err
	}
	rp, err := s.AddRepo(TemplateProject, TemplateSlug)
	if err != nil {
		return rp, "", err
	}
	head, err := s.commitLocked(rp.Project, rp.Slug, DefaultBranch, "README.md", "template: fresh slot\n")
	if err != nil {
		return rp, "", err
	}
	s.mu.Lock()
	s.tmpl = &rp
	err = s.persistLocked()
	s.mu.Unlock()
	return rp, head, err
}

// AddProject creates a Coolify project and returns its uuid. With
// StateDir, a failed save is not reported here: the next change saves the
// whole state again (AddProjectErr reports it).
func (s *Sim) AddProject(name string) string {
	id, _ := s.AddProjectErr(name)
	return id
}

// AddProjectErr is AddProject reporting a failure to save the state.
func (s *Sim) AddProjectErr(name string) (string, error) {
	id := newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.projects[id] = &coolProject{UUID: id, Name: name}
	return id, s.persistLocked()
}

// AddApp creates an application (status "running:healthy") in a project.
func (s *Sim) AddApp(projectUUID, name string) (string, error) {
	id := newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cool.projects[projectUUID]; !ok {
		return "", fmt.Errorf("project %s: %w", projectUUID, ErrNotFound)
	}
	s.cool.apps[id] = &coolApp{UUID: id, Name: name, Project: projectUUID, Status: "running:healthy"}
	return id, s.persistLocked()
}

// AddDatabase creates a postgres database (status "running:healthy").
func (s *Sim) AddDatabase(projectUUID, name string) (string, error) {
	id := newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cool.projects[projectUUID]; !ok {
		return "", fmt.Errorf("project %s: %w", projectUUID, ErrNotFound)
	}
	s.cool.dbs[id] = &coolDB{UUID: id, Name: name, Project: projectUUID, Status: "running:healthy", Type: "standalone-postgresql"}
	return id, s.persistLocked()
}

// AddEnv adds an environment variable to an application.
func (s *Sim) AddEnv(appUUID, key, value string) (string, error) {
	var id string
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cool.apps[appUUID]; !ok {
		return "", fmt.Errorf("application %s: %w", appUUID, ErrNotFound)
	}
	id = s.addEnvLocked(appUUID, key, value, false, false)
	return id, s.persistLocked()
}

// AddStorage adds a storage to an application; kind is "persistent" or
// "file".
func (s *Sim) AddStorage(appUUID, name, kind, mountPath string) (string, error) {
	if kind != "persistent" && kind != "file" {
		return "", fmt.Errorf("sim: storage kind %q", kind)
	}
	id := newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cool.apps[appUUID]; !ok {
		return "", fmt.Errorf("application %s: %w", appUUID, ErrNotFound)
	}
	s.cool.storages[id] = &coolStorage{UUID: id, App: appUUID, Name: name, Kind: kind, MountPath: mountPath}
	if kind == "persistent" {
		s.ensureVolumeLocked(name) // an old volume of that name is mounted again, data and all
	}
	return id, s.persistLocked()
}

// Projects returns the uuids of every Coolify project and the keys of
// every Bitbucket project the simulator holds, sorted: the demo's scope
// (issue 38; slots.SimulatedProjects). A queued delete still holds its
// project, as HasProject says.
func (s *Sim) Projects(context.Context) (coolify, bitbucket []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.cool.projects {
		coolify = append(coolify, id)
	}
	for k := range s.bb.projects {
		bitbucket = append(bitbucket, k)
	}
	slices.Sort(coolify)
	slices.Sort(bitbucket)
	return coolify, bitbucket, nil
}

// HasProject, HasApp, HasDatabase, HasEnv and HasStorage report whether the
// simulated Coolify still holds the resource (a queued delete still holds it).
func (s *Sim) HasProject(uuid string) bool {
	return s.has(func() bool { _, ok := s.cool.projects[uuid]; return ok })
}

// HasApp reports whether the application exists.
func (s *Sim) HasApp(uuid string) bool {
	return s.has(func() bool { _, ok := s.cool.apps[uuid]; return ok })
}

// HasDatabase reports whether the database exists.
func (s *Sim) HasDatabase(uuid string) bool {
	return s.has(func() bool { _, ok := s.cool.dbs[uuid]; return ok })
}

// HasEnv reports whether the env var exists.
func (s *Sim) HasEnv(uuid string) bool {
	return s.has(func() bool { _, ok := s.cool.envs[uuid]; return ok })
}

// HasStorage reports whether the storage exists.
func (s *Sim) HasStorage(uuid string) bool {
	return s.has(func() bool { _, ok := s.cool.storages[uuid]; return ok })
}

func (s *Sim) has(f func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// Env is an environment variable as the simulator holds it.
type Env struct {
	UUID  string `json:"uuid"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Storage is a storage as the simulator holds it.
type Storage struct {
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	MountPath string `json:"mount_path"`
}

// Envs returns an application's normal env vars, by key (PreviewEnvs
// their preview copies).
func (s *Sim) Envs(appUUID string) []Env {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Env
	for _, e := range s.envsLocked(appUUID) {
		if !e.Preview {
			out = append(out, Env{UUID: e.UUID, Key: e.Key, Value: e.Value})
		}
	}
	return out
}

// Storages returns an application's storages, by name.
func (s *Sim) Storages(appUUID string) []Storage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Storage
	for _, st := range s.storagesLocked(appUUID) {
		out = append(out, Storage{UUID: st.UUID, Name: st.Name, Kind: st.Kind, MountPath: st.MountPath})
	}
	return out
}

// SetAppStatus sets an application's "state:health" status.
func (s *Sim) SetAppStatus(uuid, status string) error {
	return s.changeApp(uuid, func(a *coolApp) { a.Status = status })
}

// changeApp applies change to an application under the lock and saves the
// state; ErrNotFound when there is no such application.
func (s *Sim) changeApp(uuid string, change func(*coolApp)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.cool.apps[uuid]
	if !ok {
		return ErrNotFound
	}
	change(a)
	return s.persistLocked()
}

// AddRepo creates a Bitbucket repository (an empty bare repo whose HEAD is
// main) and returns it. The slug is derived from name as Bitbucket does.
// The REST entry is visible before the git init ends (git answers 404
// meanwhile), as a real repository is first INITIALISING: "created in the
// database and the associated SCM is currently in the process of creating
// its storage" (Bitbucket Server javadoc 9.3.0, Repository.State).
func (s *Sim) AddRepo(project, name string) (RepoFixture, error) {
	project = strings.ToUpper(project)
	slug := slugify(name)
	if slug == "" {
		return RepoFixture{}, fmt.Errorf("sim: bad repository name %q", name)
	}
	key := repoKey(project, slug)
	s.mu.Lock()
	if _, ok := s.bb.repos[key]; ok {
		s.mu.Unlock()
		return RepoFixture{}, errRepoExists
	}
	rp := &bbRepo{ID: int(s.bb.nextID.Add(1)), Project: project, Slug: slug, Name: name}
	s.bb.repos[key] = rp
	s.bb.projects[project] = true
	s.mu.Unlock()
	dir := s.repoDir(project, slug)
	os.RemoveAll(dir) // leftovers of a deleted repo of the same name
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return RepoFixture{}, err
	}
	if _, err := s.git("", "init", "--bare", "--quiet", "--initial-branch="+DefaultBranch, dir); err != nil {
		s.mu.Lock()
		delete(s.bb.repos, key)
		s.mu.Unlock()
		return RepoFixture{}, err
	}
	// Saved once the bare repo exists (a snapshot another change wrote in
	// between names a repo without one: loading drops it).
	if err := s.persist(); err != nil {
		return RepoFixture{}, err
	}
	return RepoFixture{Project: project, Slug: slug, Name: name, CloneURL: s.CloneURL(project, slug)}, nil
}

// AddBitbucketProject creates an empty Bitbucket project. (AddRepo, the Go
// seeding API, also creates its project; creating a repository over REST
// needs an existing project, as on Bitbucket: bbCreateRepo.)
func (s *Sim) AddBitbucketProject(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bb.projects[strings.ToUpper(key)] = true
	_ = s.persistLocked() // the next change saves everything again
}

// HasRepo reports whether the repository exists (a scheduled delete still
// holds it).
func (s *Sim) HasRepo(project, slug string) bool {
	return s.has(func() bool { _, ok := s.bb.repos[repoKey(project, slug)]; return ok })
}

// Repos returns the repositories of a project, by slug.
func (s *Sim) Repos(project string) []RepoFixture {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RepoFixture
	for _, rp := range s.bb.repos {
		if rp.Project == strings.ToUpper(project) {
			out = append(out, RepoFixture{Project: rp.Project, Slug: rp.Slug, Name: rp.Name, CloneURL: s.CloneURL(rp.Project, rp.Slug)})
		}
	}
	slices.SortFunc(out, func(a, b RepoFixture) int { return strings.Compare(a.Slug, b.Slug) })
	return out
}

// RepoHeadSHA returns the sha of refs/heads/<branch>, or "" when the branch
// does not exist.
func (s *Sim) RepoHeadSHA(project, slug, branch string) (string, error) {
	out, err := s.git(s.repoDir(project, slug), "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	return strings.TrimSpace(out), err
}

// CommitFile writes one commit on branch (parent: the branch's current tip,
// if any) whose tree holds path with content, and returns its sha. Tests use
// it to seed history and to move a remote under a pusher's feet.
func (s *Sim) CommitFile(project, slug, branch, path, content string) (string, error) {
	s.gitMu.Lock()
	defer s.gitMu.Unlock()
	return s.commitLocked(project, slug, branch, path, content)
}

func (s *Sim) commitLocked(project, slug, branch, path, content string) (string, error) {
	if !s.HasRepo(project, slug) {
		return "", fmt.Errorf("repository %s/%s: %w", project, slug, ErrNotFound)
	}
	dir := s.repoDir(project, slug)
	blob, err := s.gitIn(dir, content, "hash-object", "-w", "--stdin")
	if err != nil {
		return "", err
	}
	tree, err := s.gitIn(dir, fmt.Sprintf("100644 blob %s\t%s\n", blob, path), "mktree")
	if err != nil {
		return "", err
	}
	parent, err := s.RepoHeadSHA(project, slug, branch)
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", tree, "-m", "sim: " + path}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	commit, err := s.gitIn(dir, "", args...)
	if err != nil {
		return "", err
	}
	if _, err := s.git(dir, "update-ref", "refs/heads/"+branch, commit); err != nil {
		return "", err
	}
	return commit, nil
}

func (s *Sim) git(dir string, args ...string) (string, error) { return s.gitIn(dir, "", args...) }

// gitIn runs git with an isolated configuration and a fixed identity.
func (s *Sim) gitIn(dir, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := args[0]
	if dir != "" {
		args = append([]string{"--git-dir", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, s.gitPath, args...)
	cmd.Env = []string{
		"HOME=" + s.gitHome, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=sim", "GIT_AUTHOR_EMAIL=sim@localhost",
		"GIT_COMMITTER_NAME=sim", "GIT_COMMITTER_EMAIL=sim@localhost",
		"PATH=" + os.Getenv("PATH"),
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("sim: git %s: %v: %s", name, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
