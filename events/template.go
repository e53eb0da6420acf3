package events

import "time"

// The ready-slot reset (issue 23): a reset whose end state is a clean copy
// of the slot's template, running.

// SlotTemplate is what a reset brings a slot back to, declared at register
// (docs/jobs.md, "The slot template"). It holds no secret: env values are
// read at reset time from the template application (a reference), never
// copied into the log.
type SlotTemplate struct {
	// DBEngine is the Coolify database type to create (postgresql, mysql,
	// mariadb, mongodb, redis, keydb, dragonfly, clickhouse); "" = the same
	// engine as the database the reset deletes (read from Coolify before
	// the delete, DBDeleted.Engine). DBImage likewise ("" = same as before).
	DBEngine string `json:"db_engine,omitempty"`
	DBImage  string `json:"db_image,omitempty"`
	// SeenEngine and SeenImage are what register read from Coolify for the
	// slot's database: "same as before" when a reset could not read the
	// database before deleting it (an earlier, cancelled reset deleted it).
	SeenEngine string `json:"seen_engine,omitempty"`
	SeenImage  string `json:"seen_image,omitempty"`
	// ServerUUID and EnvironmentName say where Coolify creates the
	// database: the slot's project, this environment (default
	// "production"), this server (Coolify requires server_uuid, DC:1858).
	ServerUUID      string `json:"server_uuid"`
	EnvironmentName string `json:"environment_name,omitempty"`
	// EnvFromApp is the Coolify application whose env vars (keys and
	// values, read at reset time) the slot's application gets; "" = none.
	EnvFromApp string `json:"env_from_app,omitempty"`
	// DBURLKey is the env var that receives the new database's internal
	// URL (default DATABASE_URL).
	DBURLKey string `json:"db_url_key,omitempty"`
	// Volumes are the mount paths of the application's persistent
	// storages: a reset mounts a new, empty volume at each (and at every
	// mount path whose storage it removed, "same as before").
	Volumes []string `json:"volumes,omitempty"`
	// Deploy: after the restore, deploy the template code and wait until
	// Coolify reports the application running:healthy (default true).
	NoDeploy bool `json:"no_deploy,omitempty"`
	// DeployTimeout bounds the deploy step's waits on Coolify — the
	// deployment's queue, build and start, the application's health, the
	// new database's start — in seconds (default 3,600: Coolify's own
	// deployment timeout, DefaultDeployTimeout). The step deadline does
	// not apply to them (issue 32).
	DeployTimeout int `json:"deploy_timeout,omitempty"`
}

// DefaultDeployTimeout is Coolify's own deployment timeout: the
// deployment job's $timeout, set from the server's dynamic_timeout, 3,600 s
// by default (app/Jobs/ApplicationDeploymentJob.php:74, 248; migration
// 2024_02_08_112304…:15 at 379abb25). The bound of a deploy's waits unless
// the template says.
const DefaultDeployTimeout = 3600 * time.Second

// WaitBound is the bound of the deploy step's waits.
func (t SlotTemplate) WaitBound() time.Duration {
	if t.DeployTimeout > 0 {
		return time.Duration(t.DeployTimeout) * time.Second
	}
	return DefaultDeployTimeout
}

// DBKey is the env var receiving the database URL.
func (t SlotTemplate) DBKey() string {
	if t.DBURLKey == "" {
		return "DATABASE_URL"
	}
	return t.DBURLKey
}

// Environment is the environment the database is created in.
func (t SlotTemplate) Environment() string {
	if t.EnvironmentName == "" {
		return "production"
	}
	return t.EnvironmentName
}

// DBCreated: create_db's POST /databases/<engine> was answered 201 with
// DBUUID (or a verifying attempt found the database this job named Name in
// the slot's project). From here the database is the slot's: the next
// reset or teardown deletes it. Its internal URL (with the password) is
// never recorded.
type DBCreated struct {
	StepResult
	DBUUID      string `json:"db_uuid"`
	Name        string `json:"name"`
	Engine      string `json:"engine"`
	Image       string `json:"image,omitempty"`
	ProjectUUID string `json:"project_uuid"`
	// Found is true when a verifying attempt found the database an
	// uncertain create made, instead of a 201.
	Found bool `json:"found,omitempty"`
}

// EnvRestored: the application's env vars are exactly Keys (the template
// application's, plus the database URL key), verified by a listing. Values
// are never recorded: From names where they were read.
type EnvRestored struct {
	StepResult
	AppUUID string   `json:"app_uuid"`
	From    string   `json:"from,omitempty"`
	Keys    []string `json:"keys"`
}

// VolumesCreated: create_volumes mounted a new, empty volume (a storage
// under a new name) at each mount path delete_volumes removed, confirmed by
// a listing. The old volumes stay recorded as left on the server.
type VolumesCreated struct {
	StepResult
	AppUUID string          `json:"app_uuid"`
	Volumes []CreatedVolume `json:"volumes"`
	// Skipped are mount paths not recreated: bind mounts of a host
	// directory, which no new name can empty.
	Skipped []string `json:"skipped,omitempty"`
}

// CreatedVolume is one storage create_volumes made.
type CreatedVolume struct {
	StorageUUID string `json:"storage_uuid"`
	Name        string `json:"name"`
	MountPath   string `json:"mount_path"`
}

// AppDeployed: deploy started DeploymentUUID and Coolify then reported the
// application Status ("running:healthy"). FQDN is the application's URL(s)
// as Coolify reports them; Commit the deployment's commit.
type AppDeployed struct {
	StepResult
	AppUUID        string `json:"app_uuid"`
	DeploymentUUID string `json:"deployment_uuid"`
	Status         string `json:"status"`
	FQDN           string `json:"fqdn,omitempty"`
	Commit         string `json:"commit,omitempty"`
	// NoHealthCheck: Coolify reported running:unknown — the application
	// has no health check (health_check_enabled is off by default), so
	// "running" is all Coolify knows (issue 32).
	NoHealthCheck bool `json:"no_health_check,omitempty"`
	// DBUUID and DBStatus: the slot's new database was reported running
	// (DBStatus in Coolify's words) before the slot was declared ready.
	DBUUID   string `json:"db_uuid,omitempty"`
	DBStatus string `json:"db_status,omitempty"`
}

// SlotDatabaseChanged (slot stream): the slot's database is now DBUUID,
// created by job JobID's create_db. Written with the job's lock release
// (whatever its outcome), so the slot's next reset or teardown deletes the
// new database, not the old one.
type SlotDatabaseChanged struct {
	Slot     string `json:"slot"`
	JobID    string `json:"job_id"`
	DBUUID   string `json:"db_uuid"`
	Previous string `json:"previous,omitempty"`
	Engine   string `json:"engine,omitempty"`
	Image    string `json:"image,omitempty"`
}

func (DBCreated) EventType() string           { return "DBCreated" }
func (EnvRestored) EventType() string         { return "EnvRestored" }
func (AppDeployed) EventType() string         { return "AppDeployed" }
func (VolumesCreated) EventType() string      { return "VolumesCreated" }
func (SlotDatabaseChanged) EventType() string { return "SlotDatabaseChanged" }

func init() {
	constructors["DBCreated"] = decodeAs[DBCreated]
	constructors["EnvRestored"] = decodeAs[EnvRestored]
	constructors["AppDeployed"] = decodeAs[AppDeployed]
	constructors["VolumesCreated"] = decodeAs[VolumesCreated]
	constructors["SlotDatabaseChanged"] = decodeAs[SlotDatabaseChanged]
}
