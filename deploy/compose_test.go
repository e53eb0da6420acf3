// Package deploy checks the deployment files at the repository root
// (docker-compose.yml, Dockerfile). Docker is not available where these tests
// run, so they check structure and wiring, not that the stack starts.
package deploy

import (
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/slotkeeper/slotkeeper/events/kurrent"
)

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Deploy struct {
		Replicas string `yaml:"replicas"`
	} `yaml:"deploy"`
	Ports       []string `yaml:"ports"`
	Volumes     []string `yaml:"volumes"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
	} `yaml:"healthcheck"`
}

// interpolate resolves ${VAR:-default} the way docker compose does when VAR
// is unset (defaults may nest), so the test sees what `docker compose up`
// with no .env would use.
func interpolate(s string) string {
	re := regexp.MustCompile(`\$\{([A-Z_]+)(:-([^${}]*))?\}`)
	for re.MatchString(s) {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			return sub[3]
		})
	}
	return s
}

func load(t *testing.T) compose {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal([]byte(interpolate(string(raw))), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func TestComposeServicesAndHealthchecks(t *testing.T) {
	c := load(t)
	for _, name := range []string{"kurrentdb", "postgres", "slotkeeper"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("service %q missing", name)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Interval == "" {
			t.Errorf("service %q has no usable health check: %+v", name, s.Healthcheck)
		}
	}
	if hc := strings.Join(c.Services["kurrentdb"].Healthcheck.Test, " "); !strings.Contains(hc, ":2113/health/live") {
		t.Errorf("KurrentDB health check %q does not probe /health/live", hc)
	}
	if hc := strings.Join(c.Services["postgres"].Healthcheck.Test, " "); !strings.Contains(hc, "pg_isready") {
		t.Errorf("PostgreSQL health check %q does not use pg_isready", hc)
	}
	if hc := strings.Join(c.Services["slotkeeper"].Healthcheck.Test, " "); !strings.Contains(hc, "/readyz") {
		t.Errorf("slotkeeper health check %q does not probe /readyz", hc)
	}
	for _, name := range []string{"kurrentdb", "postgres"} {
		if len(c.Services[name].Volumes) == 0 {
			t.Errorf("%s keeps its data in the container (no volume)", name)
		}
	}
}

func TestComposeSlotkeeperWiring(t *testing.T) {
	c := load(t)
	sk := c.Services["slotkeeper"]
	if sk.Build == nil {
		t.Error("slotkeeper is not built from the Dockerfile")
	}
	if sk.Deploy.Replicas != "2" {
		t.Errorf("slotkeeper replicas = %q, want 2", sk.Deploy.Replicas)
	}
	for _, dep := range []string{"kurrentdb", "postgres"} {
		if d, ok := sk.DependsOn[dep]; !ok || d.Condition != "service_healthy" {
			t.Errorf("slotkeeper must wait for %s to be healthy, has %+v", dep, sk.DependsOn)
		}
	}
	if len(sk.Ports) != 1 || !strings.HasPrefix(sk.Ports[0], "8080-8081:") {
		t.Errorf("ports %v: two replicas need a host port range", sk.Ports)
	}

	// The event store URL reaches the kurrentdb service and is one the
	// adapter accepts.
	events := sk.Environment["SLOTKEEPER_EVENTS"]
	cfg, err := kurrent.ParseConnString(events)
	if err != nil {
		t.Fatalf("SLOTKEEPER_EVENTS %q: %v", events, err)
	}
	if cfg.Address != "kurrentdb:2113" || !cfg.DisableTLS {
		t.Errorf("SLOTKEEPER_EVENTS points at %s (tls off %v), want kurrentdb:2113 on the private network", cfg.Address, cfg.DisableTLS)
	}

	// The read-model URL names the postgres service with its user,
	// password and database.
	pg := c.Services["postgres"].Environment
	u, err := url.Parse(sk.Environment["SLOTKEEPER_READ_MODEL"])
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	if u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Port() != "5432" ||
		u.User.Username() != pg["POSTGRES_USER"] || pass != pg["POSTGRES_PASSWORD"] ||
		strings.TrimPrefix(u.Path, "/") != pg["POSTGRES_DB"] {
		t.Errorf("SLOTKEEPER_READ_MODEL %s does not match the postgres service %v", u.Redacted(), pg)
	}
}

func TestDockerfileStages(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	from := regexp.MustCompile(`(?m)^FROM .* AS (\w+)$`).FindAllStringSubmatch(df, -1)
	var stages []string
	for _, m := range from {
		stages = append(stages, m[1])
	}
	if strings.Join(stages, ",") != "spa,build,runtime" {
		t.Fatalf("stages %v, want spa, build, runtime", stages)
	}
	for _, want := range []string{
		"npm ci",
		"npm run build --workspace frontend",
		"COPY --from=spa /src/frontend/dist frontend/dist",
		"./backend/cmd/slotkeeper",
		"COPY --from=build /out/slotkeeper",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(df)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Errorf("runtime user %v: must not be root", user)
	}
	// The runtime stage must come after USER is set, i.e. the last FROM is
	// before the USER line.
	if strings.LastIndex(df, "\nFROM ") > strings.LastIndex(df, "\nUSER ") {
		t.Error("USER is not set in the final stage")
	}
}

// Every SLOTKEEPER_* variable the compose file sets must be a flag of
// `slotkeeper serve` (SLOTKEEPER_ + flag name upper-cased, '-' as '_'):
// a misspelt one would be silently ignored by the server.
func TestComposeEnvNamesAreServeFlags(t *testing.T) {
	src, err := os.ReadFile("../backend/cmd/slotkeeper/config.go")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`fs\.\w+Var\(&c\.\w+, "([a-z0-9-]+)"`).FindAllStringSubmatch(string(src), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 10 {
		t.Fatalf("found only %d serve flags in config.go; has it moved?", len(flags))
	}
	c := load(t)
	for k := range c.Services["slotkeeper"].Environment {
		name, ok := strings.CutPrefix(k, "SLOTKEEPER_")
		if !ok {
			continue
		}
		flag := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		if !flags[flag] {
			t.Errorf("%s is not a serve flag (no --%s)", k, flag)
		}
	}
}
