package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ErrBadState is returned by Start when Options.StateDir holds a snapshot
// it cannot use (torn, corrupt, or not written by this simulator).
var ErrBadState = errors.New("sim: unusable state snapshot")

// Snapshot file layout under Options.StateDir.
const (
	stateFile    = "state.json"
	stateFormat  = "slotkeeper-sim-state"
	stateVersion = 1
	gitSubdir    = "git"
)

// snapshot is what the simulator writes to StateDir/state.json: its
// Coolify and Bitbucket resources and the id counter. Faults and recorded
// requests are not state and are not kept; neither are the tokens (each
// Start makes new ones, and clients are built from the running Sim).
type snapshot struct {
	Format  string `json:"format"`
	Version int    `json:"version"`

	Projects []snapProject `json:"coolify_projects"`
	Apps     []snapApp     `json:"coolify_applications"`
	DBs      []snapDB      `json:"coolify_databases"`
	Envs     []snapEnv     `json:"coolify_envs"`
	Storages []snapStorage `json:"coolify_storages"`
	// Volumes are the server's Docker volumes (older snapshots have none:
	// loading makes one for each persistent storage).
	Volumes []DockerVolume `json:"coolify_docker_volumes,omitempty"`

	BBProjects []string     `json:"bitbucket_projects"`
	Repos      []snapRepo   `json:"bitbucket_repos"`
	NextRepoID int64        `json:"bitbucket_next_repo_id"`
	Template   *RepoFixture `json:"template,omitempty"`
}

type snapProject struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
	Team int64  `json:"team,omitempty"`
}

type snapApp struct {
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	Project   string `json:"project"`
	Status    string `json:"status"`
	BuildPack string `json:"build_pack,omitempty"`
	Deleting  bool   `json:"deleting,omitempty"`
}

type snapDB struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Project  string `json:"project"`
	Status   string `json:"status"`
	Type     string `json:"type"`
	Deleting bool   `json:"deleting,omitempty"`
}

type snapEnv struct {
	UUID    string `json:"uuid"`
	App     string `json:"app"`
	Key     string `json:"key"`
	Value   string `json:"value"`
	Preview bool   `json:"is_preview,omitempty"`
	Locked  bool   `json:"is_shown_once,omitempty"`
}

type snapStorage struct {
	UUID      string `json:"uuid"`
	App       string `json:"app"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	MountPath string `json:"mount_path"`
}

type snapRepo struct {
	ID       int    `json:"id"`
	Project  string `json:"project"`
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	Deleting bool   `json:"deleting,omitempty"`
	Origin   string `json:"origin,omitempty"`
}

// snapshotLocked copies the state into a snapshot, in a stable order so
// that the file of an unchanged state does not change.
func (s *Sim) snapshotLocked() snapshot {
	sn := snapshot{Format: stateFormat, Version: stateVersion, NextRepoID: s.bb.nextID.Load()}
	if s.tmpl != nil {
		t := *s.tmpl
		t.CloneURL = "" // it names this run's port; ensureTemplate makes it anew
		sn.Template = &t
	}
	for _, p := range s.cool.projects {
		sn.Projects = append(sn.Projects, snapProject{p.UUID, p.Name, p.Team})
	}
	for _, a := range s.cool.apps {
		sn.Apps = append(sn.Apps, snapApp{a.UUID, a.Name, a.Project, a.Status, a.BuildPack, a.Deleting})
	}
	for _, d := range s.cool.dbs {
		sn.DBs = append(sn.DBs, snapDB{d.UUID, d.Name, d.Project, d.Status, d.Type, d.Deleting})
	}
	for _, e := range s.cool.envs {
		sn.Envs = append(sn.Envs, snapEnv{e.UUID, e.App, e.Key, e.Value, e.Preview, e.Locked})
	}
	for _, st := range s.cool.storages {
		sn.Storages = append(sn.Storages, snapStorage{st.UUID, st.App, st.Name, st.Kind, st.MountPath})
	}
	for _, v := range s.cool.volumes {
		sn.Volumes = append(sn.Volumes, DockerVolume{v.Name, v.Server, v.Data})
	}
	sort.Slice(sn.Volumes, func(i, j int) bool { return sn.Volumes[i].Name < sn.Volumes[j].Name })
	for k := range s.bb.projects {
		sn.BBProjects = append(sn.BBProjects, k)
	}
	for _, rp := range s.bb.repos {
		sn.Repos = append(sn.Repos, snapRepo{rp.ID, rp.Project, rp.Slug, rp.Name, rp.Deleting, rp.Origin})
	}
	sort.Slice(sn.Projects, func(i, j int) bool { return sn.Projects[i].UUID < sn.Projects[j].UUID })
	sort.Slice(sn.Apps, func(i, j int) bool { return sn.Apps[i].UUID < sn.Apps[j].UUID })
	sort.Slice(sn.DBs, func(i, j int) bool { return sn.DBs[i].UUID < sn.DBs[j].UUID })
	sort.Slice(sn.Envs, func(i, j int) bool { return sn.Envs[i].UUID < sn.Envs[j].UUID })
	sort.Slice(sn.Storages, func(i, j int) bool { return sn.Storages[i].UUID < sn.Storages[j].UUID })
	sort.Strings(sn.BBProjects)
	sort.Slice(sn.Repos, func(i, j int) bool {
		return sn.Repos[i].Project+"/"+sn.Repos[i].Slug < sn.Repos[j].Project+"/"+sn.Repos[j].Slug
	})
	return sn
}

// persistLocked writes the whole state to StateDir/state.json; s.mu must
// be held, so snapshots are written in the order of the changes they
// follow. The file is replaced atomically (temp file, fsync, rename, fsync
// of the directory): a crash leaves the old or the new snapshot, never a
// torn one. Each write is a full snapshot, so one failed write is made good
// by the next change. Without StateDir it does nothing.
func (s *Sim) persistLocked() error {
	if s.stateDir == "" {
		return nil
	}
	data, err := json.MarshalIndent(s.snapshotLocked(), "", " ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.stateDir, stateFile, data); err != nil {
		return fmt.Errorf("sim: save state: %w", err)
	}
	return nil
}

// persist takes the lock and saves the state.
func (s *Sim) persist() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistLocked()
}

func writeFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable only once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// loadState reads StateDir/state.json, if any, into the (empty) state.
// Deletions that were still pending when the snapshot was written (a
// queued Coolify delete, a scheduled Bitbucket delete) are completed here:
// the server had accepted them, and the real services finish them whether
// or not anybody watches. A repository whose bare repo is missing (a crash
// between its creation being saved and `git init`, or between a delete
// and its save) is dropped. Called by Start before the servers listen.
func (s *Sim) loadState() error {
	path := filepath.Join(s.stateDir, stateFile)
	// Temp files of writes a crash interrupted are never the snapshot.
	if olds, _ := filepath.Glob(filepath.Join(s.stateDir, stateFile+".*.tmp")); len(olds) > 0 {
		for _, o := range olds {
			os.Remove(o)
		}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sim: read state %s: %w", path, err)
	}
	var sn snapshot
	if err := json.Unmarshal(data, &sn); err != nil {
		return fmt.Errorf("%w: %s: %v (remove the directory %s to start with an empty simulator)", ErrBadState, path, err, s.stateDir)
	}
	if sn.Format != stateFormat || sn.Version != stateVersion {
		return fmt.Errorf("%w: %s: format %q version %d, want %q version %d (remove the directory %s to start with an empty simulator)",
			ErrBadState, path, sn.Format, sn.Version, stateFormat, stateVersion, s.stateDir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range sn.Projects {
		s.cool.projects[p.UUID] = &coolProject{UUID: p.UUID, Name: p.Name, Team: p.Team}
	}
	for _, a := range sn.Apps {
		s.cool.apps[a.UUID] = &coolApp{UUID: a.UUID, Name: a.Name, Project: a.Project, Status: a.Status, BuildPack: a.BuildPack, Deleting: a.Deleting}
	}
	for _, d := range sn.DBs {
		s.cool.dbs[d.UUID] = &coolDB{UUID: d.UUID, Name: d.Name, Project: d.Project, Status: d.Status, Type: d.Type, Deleting: d.Deleting}
	}
	for _, e := range sn.Envs {
		s.cool.envs[e.UUID] = &coolEnv{UUID: e.UUID, App: e.App, Key: e.Key, Value: e.Value, Preview: e.Preview, Locked: e.Locked}
	}
	for _, st := range sn.Storages {
		s.cool.storages[st.UUID] = &coolStorage{UUID: st.UUID, App: st.App, Name: st.Name, Kind: st.Kind, MountPath: st.MountPath}
	}
	for _, v := range sn.Volumes {
		s.cool.volumes[v.Name] = &dockerVolume{Name: v.Name, Server: v.Server, Data: v.Data}
	}
	if sn.Volumes == nil {
		for _, st := range s.cool.storages {
			if st.Kind == "persistent" {
				s.ensureVolumeLocked(st.Name)
			}
		}
	}
	for _, k := range sn.BBProjects {
		s.bb.projects[k] = true
	}
	for _, r := range sn.Repos {
		rp := &bbRepo{ID: r.ID, Project: r.Project, Slug: r.Slug, Name: r.Name, Deleting: r.Deleting, Origin: r.Origin}
		key := repoKey(r.Project, r.Slug)
		if _, err := os.Stat(filepath.Join(s.repoDir(r.Project, r.Slug), "HEAD")); err != nil {
			continue
		}
		s.bb.repos[key] = rp
	}
	s.bb.nextID.Store(sn.NextRepoID)
	if t := sn.Template; t != nil && s.bb.repos[repoKey(t.Project, t.Slug)] != nil {
		tmpl := *t
		s.tmpl = &tmpl
	}
	for id, d := range s.cool.dbs {
		if d.Deleting {
			s.dropDBLocked(id)
		}
	}
	for id, a := range s.cool.apps {
		if a.Deleting {
			s.removeVolumesLocked(id) // delete_volumes defaults to true
			s.dropAppLocked(id)
		}
	}
	for key, rp := range s.bb.repos {
		if rp.Deleting {
			s.dropRepoLocked(key, rp)
		}
	}
	return s.persistLocked()
}

// dropDBLocked, dropAppLocked and dropRepoLocked finish a deletion.
func (s *Sim) dropDBLocked(id string) {
	s.serverCleanupLocked(id, dbVolumeName(s.cool.dbs[id]))
	delete(s.cool.dbs, id)
}

// dropAppLocked deletes an application's rows with its env vars and
// storages (DeleteResourceJob.php:118-130); the server's Docker volumes are
// removeVolumesLocked's business.
func (s *Sim) dropAppLocked(id string) {
	delete(s.cool.apps, id)
	for k, e := range s.cool.envs {
		if e.App == id {
			delete(s.cool.envs, k)
		}
	}
	for k, st := range s.cool.storages {
		if st.App == id {
			delete(s.cool.storages, k)
		}
	}
}

// dropRepoLocked deletes the repository, only if the entry is still rp, so
// a repository re-created under the same name is never touched.
func (s *Sim) dropRepoLocked(key string, rp *bbRepo) {
	if s.bb.repos[key] == rp {
		delete(s.bb.repos, key)
		os.RemoveAll(s.repoDir(rp.Project, rp.Slug))
	}
}
