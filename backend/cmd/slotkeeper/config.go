package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// Config is everything `slotkeeper serve` can be told. Every field has a
// flag and an environment variable (SLOTKEEPER_ + the flag name in upper
// case with '-' as '_'); a flag wins over the variable. docs/server.md has
// the table.
type Config struct {
	Addr string
	Data string

	Events    string // "" = embedded bbolt under Data; kurrentdb://… or esdb://…
	ReadModel string // "memory" or postgres://…

	CoolifyURL, CoolifyToken     string
	BitbucketURL, BitbucketToken string
	// GitAuth is how the Bitbucket token reaches git: "bearer" (every HTTP
	// access token kind) or "basic" with GitUser, a personal token's owner.
	GitAuth, GitUser string
	// CoolifyProjects and BitbucketProjects are the scope, comma-separated
	// (Coolify project uuids, Bitbucket project keys).
	CoolifyProjects, BitbucketProjects string
	Sim                                string // auto | on | off
	// SimURL is the base URL of simulators running as their own process
	// (`slotkeeper sim`); it stands for --coolify-url and --bitbucket-url.
	SimURL string
	Demo   bool

	Workers     int
	StepTimeout time.Duration
	JobTimeout  time.Duration
	Lease       time.Duration
	Grace       time.Duration
	Deadlines   bool
	// ChangeSettings makes this process's shared settings (settings.go)
	// the ones every process sharing the store must have.
	ChangeSettings bool

	WebhookURL    string
	WebhookSecret string
	// PRRepos are the application repositories linked to the pool at
	// start (PROJECT/slug, comma-separated; docs/pull-requests.md), and
	// BitbucketWebhookSecret the key Bitbucket signs its deliveries with.
	PRRepos, BitbucketWebhookSecret string
	BaseURL                         string
	// BitbucketWebhookMaxAge is how far a signed delivery's date may be
	// from this server's clock (pullrequests.Config.MaxDeliveryAge).
	BitbucketWebhookMaxAge time.Duration

	// AllowInsecureHTTP lets provider URLs be plain http:// (their tokens
	// then cross the network in the clear).
	AllowInsecureHTTP bool
	// DrainDelay is how long /readyz answers 503 after SIGTERM before the
	// listeners close.
	DrainDelay time.Duration
	// ReadyInterval is how often the readiness probes (store write,
	// providers) run.
	ReadyInterval time.Duration

	// files holds the -file variants of the secret settings (flag name →
	// path); validate reads them into the fields above.
	files map[string]*string

	Heartbeat       time.Duration
	SSEMaxClients   int
	SSEMaxPerIP     int
	SSEHistory      int
	SSEWriteTimeout time.Duration
	SSEResumeWait   time.Duration
	ShutdownTimeout time.Duration

	// WriteTimeout bounds writing one response (http.Server.WriteTimeout
	// and httpapi.Deps.WriteTimeout: the backup download's per-write
	// deadline). docs/server.md "Write deadline".
	WriteTimeout time.Duration
	// ClosedPRs and ClosedPRAge are the memory read model's closed pull
	// requests kept (memory.Limits; docs/pull-requests.md "Closed pull
	// requests leave memory"). 0 (a Config built in code) is the default.
	ClosedPRs   int
	ClosedPRAge time.Duration

	// serving, when set (tests), is called once the HTTP server is
	// built, with it and the API's dependencies.
	serving func(api *httpapi.Listener, d httpapi.Deps)

	LogLevel  string
	LogFormat string

	Backup    BackupConfig
	Reconcile ReconcileConfig
	Auth      AuthConfig     // auth_config.go
	Waitlist  WaitlistConfig // waitlist_serve.go
}

// ConfigError names the setting that is wrong. Start-up stops on it.
type ConfigError struct {
	Setting string // "--flag (SLOTKEEPER_FLAG)"
	Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("configuration: %s: %s", e.Setting, e.Problem)
}

func setting(flagName string) string {
	return fmt.Sprintf("--%s (%s)", flagName, envName(flagName))
}

func envName(flagName string) string {
	return "SLOTKEEPER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func cfgErr(flagName, format string, args ...any) error {
	return &ConfigError{Setting: setting(flagName), Problem: fmt.Sprintf(format, args...)}
}

// serveFlags declares the flags of serve on fs, bound to c.
func serveFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Addr, "addr", "localhost:8080", "listen address (host:port)")
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store (and of the simulators' state, sim/)")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://… / esdb://…")
	fs.StringVar(&c.ReadModel, "read-model", "memory", "read models: memory (rebuilt from the log at start) or postgres://…")
	fs.StringVar(&c.CoolifyURL, "coolify-url", "", "Coolify API base, e.g. https://coolify.example/api/v1 (empty: simulator)")
	fs.StringVar(&c.CoolifyToken, "coolify-token", "", "Coolify API token (prefer --coolify-token-file: flags are visible in ps)")
	fs.StringVar(&c.BitbucketURL, "bitbucket-url", "", "Bitbucket Data Center root, e.g. https://bitbucket.example (empty: simulator)")
	fs.StringVar(&c.BitbucketToken, "bitbucket-token", "", "Bitbucket HTTP access token, also used for git pushes (prefer --bitbucket-token-file)")
	fs.StringVar(&c.CoolifyProjects, "coolify-projects", "", "comma-separated Coolify project uuids slots may live in; required with real providers (* for any); with the simulators empty means any")
	fs.StringVar(&c.BitbucketProjects, "bitbucket-projects", "", "comma-separated Bitbucket project keys slot repositories, templates and promotes may use; required with real providers (* for any); with the simulators empty means any")
	fs.StringVar(&c.GitAuth, "git-auth", "bearer", "how git sends the Bitbucket token: bearer (any HTTP access token; project and repository tokens work only so) or basic (a personal token, with --git-user)")
	fs.StringVar(&c.GitUser, "git-user", "", "with --git-auth basic: the username of the personal token's owner")
	fs.StringVar(&c.SimURL, "sim-url", "", "base URL of the simulators run as their own process (slotkeeper sim); stands for both provider URLs, plain http allowed")
	fs.StringVar(&c.Sim, "sim", "auto", "simulated Coolify/Bitbucket/git: auto (when no real provider is configured), on, off")
	fs.BoolVar(&c.Demo, "demo", true, "with the simulators, seed a demo pool of 8 slots into an empty log")
	fs.IntVar(&c.Workers, "workers", 4, "jobs run at once by this process (0: do not run jobs here)")
	fs.DurationVar(&c.StepTimeout, "step-timeout", 2*time.Minute, "deadline of one job step (one outside call and its confirmation)")
	fs.DurationVar(&c.JobTimeout, "job-timeout", 15*time.Minute, "deadline of one job attempt")
	fs.DurationVar(&c.Lease, "lease", 30*time.Second, "job claim lease, renewed by the running attempt")
	fs.DurationVar(&c.Grace, "grace", 2*time.Minute, "grace period between a release and its reset")
	fs.BoolVar(&c.ChangeSettings, "change-settings", false, "record this process's --demo, --coolify-projects, --bitbucket-projects and --grace as the ones every process sharing the event store must have")
	fs.BoolVar(&c.Deadlines, "deadline-reset", true, "queue a reset when an occupancy deadline passes")
	fs.StringVar(&c.WebhookURL, "webhook-url", "", "URL told about every job's outcome (empty: none); a secret for Slack (prefer --webhook-url-file)")
	fs.StringVar(&c.WebhookSecret, "webhook-secret", "", "key of the HMAC-SHA256 signature of every webhook body, X-Slotkeeper-Signature (prefer --webhook-secret-file)")
	fs.StringVar(&c.PRRepos, "pr-repos", "", "application repositories whose pull requests get slots, PROJECT/slug comma-separated (linked at start; more through /api/pr-repos)")
	fs.StringVar(&c.BitbucketWebhookSecret, "bitbucket-webhook-secret", "", "secret of the Bitbucket webhook that posts pull-request events to /api/hooks/bitbucket, X-Hub-Signature (prefer --bitbucket-webhook-secret-file; empty: every delivery is refused)")
	fs.DurationVar(&c.BitbucketWebhookMaxAge, "bitbucket-webhook-max-age", pullrequests.DefaultMaxDeliveryAge, "a signed Bitbucket delivery whose payload date is further than this from this server's clock, either way, is refused as a replay (docs/attacks.md)")
	c.files = map[string]*string{}
	for _, name := range secretSettings {
		p := new(string)
		c.files[name] = p
		fs.StringVar(p, name+"-file", "", "file holding --"+name+" (trailing newline ignored)")
	}
	fs.BoolVar(&c.AllowInsecureHTTP, "allow-insecure-http", false, "accept plain http:// provider URLs (tokens would cross the network unencrypted)")
	fs.DurationVar(&c.DrainDelay, "drain-delay", 5*time.Second, "after SIGTERM, how long /readyz answers 503 before the listeners close")
	fs.DurationVar(&c.ReadyInterval, "ready-interval", 5*time.Second, "how often /readyz's probes (a store write check, an authenticated lookup at each provider) run")
	fs.StringVar(&c.BaseURL, "base-url", "", "public URL of this server, for links in webhooks (default http://<addr>)")
	fs.DurationVar(&c.Heartbeat, "heartbeat", 15*time.Second, "interval of heartbeat frames on the live stream")
	fs.IntVar(&c.SSEMaxClients, "sse-max-clients", 10000, "live streams served at once; more get 429")
	fs.IntVar(&c.SSEMaxPerIP, "sse-max-per-ip", 0, "live streams per remote address (0: no cap)")
	fs.IntVar(&c.SSEHistory, "sse-history", 4096, "recent changes kept so that reconnecting clients resume exactly")
	fs.DurationVar(&c.SSEWriteTimeout, "sse-write-timeout", 2*time.Second, "a stream write taking longer disconnects the client (it resumes)")
	fs.DurationVar(&c.SSEResumeWait, "sse-resume-wait", 5*time.Second, "how long a client resuming from an id this process has not projected yet waits for it before a 503 (at most --heartbeat)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", httpapi.DefaultWriteTimeout, "how long one response may take to be written, from its request's headers to its last byte (the live stream excepted; the backup download: each write); 1m..1h (docs/server.md)")
	fs.IntVar(&c.ClosedPRs, "closed-prs", memory.DefaultClosedPRs, "closed pull requests the memory read model keeps at least, the most recently changed (50..1000000; older ones within --closed-pr-age stay too)")
	fs.DurationVar(&c.ClosedPRAge, "closed-pr-age", memory.DefaultClosedPRAge, "a closed pull request changed within this of the log's newest event stays in the memory read model (1h..8760h)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "how long SIGTERM waits for jobs to stop and requests to end")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	backupFlags(fs, &c.Backup)
	reconcileFlags(fs, &c.Reconcile)
	authFlags(fs, &c.Auth)
	waitlistFlags(fs, &c.Waitlist)
}

// parseServe reads flags, then the environment for flags not given, then
// validates. -h prints the usage to out and returns flag.ErrHelp.
func parseServe(args []string, env func(string) string, out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	// The flag package's own messages quote the offending value (a token
	// pasted in the wrong place would be printed): they are dropped and
	// parseError names the flag only.
	fs.SetOutput(io.Discard)
	serveFlags(fs, &c)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(out, "usage: slotkeeper serve [flags]\n\nEvery flag can also be set by its environment variable, e.g. --grace by SLOTKEEPER_GRACE.\n\n")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return c, err
		}
		return c, parseError(err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if err := applyEnv(fs, env); err != nil {
		return c, err
	}
	return c, c.validate()
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if set.
func applyEnv(fs *flag.FlagSet, env func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		if given[n] {
			continue
		}
		if v := env(envName(n)); v != "" {
			if err := fs.Set(n, v); err != nil {
				return &ConfigError{Setting: envName(n), Problem: fmt.Sprintf("invalid value (not shown): %v", unwrapFlagErr(err))}
			}
		}
	}
	return nil
}

// flagValueRe matches the flag package's "invalid value" message, whose
// value must not be shown.
var flagValueRe = regexp.MustCompile(`^invalid (?:boolean )?value .* for (?:flag )?-([A-Za-z0-9-]+): (.*)$`)

// parseError rewrites a command-line error so it names the flag without
// its value.
func parseError(err error) error {
	if m := flagValueRe.FindStringSubmatch(err.Error()); m != nil {
		return &ConfigError{Setting: setting(m[1]), Problem: "invalid value (not shown): " + m[2]}
	}
	return err
}

func unwrapFlagErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// secretSettings are the settings that also read from a file
// (--<name>-file, SLOTKEEPER_<NAME>_FILE), so that they need not be on a
// command line (visible in ps) or in the environment.
var secretSettings = []string{"coolify-token", "bitbucket-token", "webhook-secret", "webhook-url", "bitbucket-webhook-secret"}

// secretField returns the Config field of a secret setting.
func (c *Config) secretField(name string) *string {
	switch name {
	case "coolify-token":
		return &c.CoolifyToken
	case "bitbucket-token":
		return &c.BitbucketToken
	case "webhook-secret":
		return &c.WebhookSecret
	case "webhook-url":
		return &c.WebhookURL
	case "bitbucket-webhook-secret":
		return &c.BitbucketWebhookSecret
	}
	panic("unknown secret setting " + name)
}

// readSecretFiles fills each secret setting given as a file. Giving both
// the value and the file is an error; so is an unreadable or empty file.
// Messages name the setting and the path, never the content.
func (c *Config) readSecretFiles() error {
	for _, name := range secretSettings {
		path := ""
		if p := c.files[name]; p != nil {
			path = *p
		}
		if path == "" {
			continue
		}
		field := c.secretField(name)
		if *field != "" {
			return cfgErr(name+"-file", "give either --%s or --%s-file, not both", name, name)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return cfgErr(name+"-file", "cannot read %s: %v", path, unwrapPathErr(err))
		}
		v := strings.TrimRight(string(data), "\r\n")
		if strings.TrimSpace(v) == "" {
			return cfgErr(name+"-file", "%s is empty", path)
		}
		if strings.ContainsAny(v, "\r\n") {
			return cfgErr(name+"-file", "%s holds more than one line", path)
		}
		*field = v
	}
	return nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// anyProject, as the whole of --coolify-projects or --bitbucket-projects,
// is the explicit "any project the token can reach".
const anyProject = "*"

// scopeList is a scope setting's projects: none (any) for "*".
func scopeList(s string) []string {
	l := splitList(s)
	if len(l) == 1 && l[0] == anyProject {
		return nil
	}
	return l
}

// validate checks every setting and returns the first problem, naming it —
// never quoting a value (a token pasted into the wrong setting must not end
// up in a terminal or a log).
func (c *Config) validate() error {
	if err := c.readSecretFiles(); err != nil {
		return err
	}
	for _, check := range []func() error{
		c.validateStores, c.validateProviders, c.validateTiming, c.validateServing,
		c.Reconcile.validate, func() error { return c.Backup.validate(c.Events == "") }, c.Waitlist.validate, c.validatePRRepos,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return c.Auth.validate()
}

// validateStores checks where the log and the read model are.
func (c *Config) validateStores() error {
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return cfgErr("addr", "not host:port")
	}
	if c.Data == "" {
		return cfgErr("data", "must not be empty")
	}
	if c.Events != "" {
		u, err := url.Parse(c.Events)
		if err != nil || (u.Scheme != "kurrentdb" && u.Scheme != "esdb" && u.Scheme != "kurrentdb+discover" && u.Scheme != "esdb+discover") {
			return cfgErr("events", "use empty (embedded store) or a kurrentdb:// or esdb:// connection string")
		}
	}
	if c.ReadModel != "memory" {
		u, err := url.Parse(c.ReadModel)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return cfgErr("read-model", "use memory or a postgres:// URL")
		}
	}
	return nil
}

// validateProviders checks the simulators or the real providers, git's
// authentication and the scope slots may name. --sim-url fills in the
// provider URLs.
func (c *Config) validateProviders() error {
	switch c.Sim {
	case "auto", "on", "off":
	default:
		return cfgErr("sim", "use auto, on or off")
	}
	simURLs := false
	if c.SimURL != "" {
		if err := httpURL(c.SimURL); err != nil {
			return cfgErr("sim-url", "%v", err)
		}
		if c.CoolifyURL != "" || c.BitbucketURL != "" || c.Sim == "on" {
			return cfgErr("sim-url", "stands for --coolify-url and --bitbucket-url (and the embedded simulators): give one or the other")
		}
		base := strings.TrimRight(c.SimURL, "/")
		c.CoolifyURL, c.BitbucketURL = base+"/api/v1", base
		// Only simulators on this machine skip the real-provider rules
		// (issue 33): any other address may be a real provider given as
		// --sim-url, and the tokens cross a network either way.
		simURLs = loopbackURL(c.SimURL)
		if !simURLs && strings.HasPrefix(strings.ToLower(c.SimURL), "http://") && !c.AllowInsecureHTTP {
			return cfgErr("sim-url", "plain http:// would send the token unencrypted to an address that is not loopback; use https:// or --allow-insecure-http (and give the scope, as for real providers)")
		}
	}
	real := c.CoolifyURL != "" || c.CoolifyToken != "" || c.BitbucketURL != "" || c.BitbucketToken != ""
	if c.Sim == "on" && real {
		return cfgErr("sim", "on, but real provider settings are given too")
	}
	if c.Sim == "off" || real {
		for _, f := range []struct{ name, v string }{
			{"coolify-url", c.CoolifyURL}, {"coolify-token", c.CoolifyToken},
			{"bitbucket-url", c.BitbucketURL}, {"bitbucket-token", c.BitbucketToken},
		} {
			if f.v == "" {
				return cfgErr(f.name, "required when the simulators are off (real providers need every URL and token)")
			}
		}
		for _, f := range []struct{ name, v string }{{"coolify-url", c.CoolifyURL}, {"bitbucket-url", c.BitbucketURL}} {
			if err := httpURL(f.v); err != nil {
				return cfgErr(f.name, "%v", err)
			}
			if strings.HasPrefix(strings.ToLower(f.v), "http://") && !c.AllowInsecureHTTP && !simURLs {
				return cfgErr(f.name, "plain http:// would send the token unencrypted; use https:// or --allow-insecure-http")
			}
		}
	}
	switch {
	case c.GitAuth != "" && c.GitAuth != "bearer" && c.GitAuth != "basic": // "" (a Config built in code): bearer
		return cfgErr("git-auth", "use bearer or basic")
	case c.GitAuth == "basic" && c.GitUser == "":
		return cfgErr("git-user", "required with --git-auth basic: the username of the personal token's owner (project and repository tokens work only with --git-auth bearer)")
	case c.GitAuth == "basic" && strings.EqualFold(c.GitUser, "x-token-auth"):
		return cfgErr("git-user", "x-token-auth is a Bitbucket Cloud convention that Data Center refuses: use --git-auth bearer, or basic with the personal token owner's username")
	case c.GitAuth != "basic" && c.GitUser != "":
		return cfgErr("git-user", "is sent only with --git-auth basic: remove it (bearer sends the token alone) or set --git-auth basic")
	}
	// With real providers a slot could otherwise name any project the
	// token reaches (a production repository a reset force-pushes over):
	// the scope must be given, and "any" said out loud as "*" (issue 25).
	if (c.Sim == "off" || real) && !simURLs {
		for _, f := range []struct{ name, v string }{{"coolify-projects", c.CoolifyProjects}, {"bitbucket-projects", c.BitbucketProjects}} {
			if len(splitList(f.v)) == 0 {
				return cfgErr(f.name, "required with real providers: the projects slots may use, comma-separated (or * for any project the token can reach)")
			}
		}
	}
	for _, f := range []struct{ name, v string }{{"coolify-projects", c.CoolifyProjects}, {"bitbucket-projects", c.BitbucketProjects}} {
		if l := splitList(f.v); slices.Contains(l, anyProject) && len(l) > 1 {
			return cfgErr(f.name, "* (any project) stands alone")
		}
	}
	for i, id := range scopeList(c.CoolifyProjects) {
		if err := providers.ValidateUUID(id); err != nil {
			return cfgErr("coolify-projects", "entry %d is not a Coolify uuid (7-64 characters a-z, 0-9, '-')", i+1)
		}
	}
	for i, k := range scopeList(c.BitbucketProjects) {
		if err := providers.ValidateProjectKey(k); err != nil {
			return cfgErr("bitbucket-projects", "entry %d is not a Bitbucket project key (a letter, then letters, digits or '_')", i+1)
		}
	}
	return nil
}

// validateTiming checks the workers and the job and stream timings.
func (c *Config) validateTiming() error {
	if c.Workers < 0 || c.Workers > 256 {
		return cfgErr("workers", "use 0..256")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"step-timeout", c.StepTimeout}, {"job-timeout", c.JobTimeout}, {"lease", c.Lease},
		{"heartbeat", c.Heartbeat}, {"sse-write-timeout", c.SSEWriteTimeout}, {"sse-resume-wait", c.SSEResumeWait},
		{"shutdown-timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			return cfgErr(d.name, "must be positive")
		}
	}
	if c.Grace < 0 {
		return cfgErr("grace", "must not be negative")
	}
	if c.StepTimeout > c.JobTimeout {
		return cfgErr("step-timeout", "longer than --job-timeout")
	}
	if c.Lease < 300*time.Millisecond {
		return cfgErr("lease", "at least 300ms (it is renewed every third of it)")
	}
	return nil
}

// validateServing checks the notifier, the public URL, shutdown and
// readiness, the live streams and the logs.
func (c *Config) validateServing() error {
	if c.WebhookURL != "" {
		if err := httpURL(c.WebhookURL); err != nil {
			return cfgErr("webhook-url", "%v", err)
		}
	}
	if c.BaseURL != "" {
		if err := httpURL(c.BaseURL); err != nil {
			return cfgErr("base-url", "%v", err)
		}
	}
	if c.DrainDelay < 0 || c.DrainDelay > time.Minute {
		return cfgErr("drain-delay", "use 0..1m")
	}
	if c.ReadyInterval < 10*time.Millisecond || c.ReadyInterval > 10*time.Minute {
		return cfgErr("ready-interval", "use 10ms..10m")
	}
	if c.SSEMaxClients < 1 {
		return cfgErr("sse-max-clients", "at least 1")
	}
	if c.SSEMaxPerIP < 0 {
		return cfgErr("sse-max-per-ip", "0 (no cap) or more")
	}
	if c.SSEHistory < 16 || c.SSEHistory > 1<<20 {
		return cfgErr("sse-history", "use 16..1048576")
	}
	if c.WriteTimeout < minWriteTimeout || c.WriteTimeout > maxWriteTimeout {
		return cfgErr("write-timeout", "use %s..%s (a shorter one cuts answers a slow handler or a slow phone is still within bounds for: docs/server.md)", fmtDuration(minWriteTimeout), fmtDuration(maxWriteTimeout))
	}
	if c.ClosedPRs < projections.ClosedPRsListed || c.ClosedPRs > maxClosedPRs {
		return cfgErr("closed-prs", "use %d..%d (at least the %d the pull-request list shows)", projections.ClosedPRsListed, maxClosedPRs, projections.ClosedPRsListed)
	}
	if c.ClosedPRAge < minClosedPRAge || c.ClosedPRAge > maxClosedPRAge {
		return cfgErr("closed-pr-age", "use %s..%s", fmtDuration(minClosedPRAge), fmtDuration(maxClosedPRAge))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfgErr("log-level", "use debug, info, warn or error")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return cfgErr("log-format", "use text or json")
	}
	return nil
}

// The accepted ranges of --write-timeout, --closed-prs and --closed-pr-age
// (docs/server.md "Write deadline", docs/pull-requests.md "Closed pull
// requests leave memory").
const (
	// minWriteTimeout: the deadline runs from the end of the request's
	// headers, and a request may spend 10 s sending its body
	// (httpapi.DefaultBodyReadTimeout) and 30 s in its handler
	// (Deps.RequestTimeout) before its first byte; under a minute an
	// answer within both bounds would be cut on any link, and the
	// dashboard's script still needs seconds on a slow phone after that.
	minWriteTimeout = time.Minute
	// maxWriteTimeout: longer, a client that stopped reading holds its
	// handler, buffers and replay place for that long.
	maxWriteTimeout = time.Hour
	maxClosedPRs    = 1_000_000
	minClosedPRAge  = time.Hour
	maxClosedPRAge  = 365 * 24 * time.Hour
)

// fmtDuration prints d without its zero parts (1m, not 1m0s).
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// splitList splits a comma-separated setting, dropping empty entries and
// spaces around them.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// useSim reports whether serve runs the simulators.
func (c *Config) useSim() bool {
	return c.Sim == "on" || (c.Sim == "auto" && c.CoolifyURL == "" && c.CoolifyToken == "" && c.BitbucketURL == "" && c.BitbucketToken == "")
}

// loopbackURL reports whether u's host is this machine (localhost, a
// loopback address).
func loopbackURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && loopbackOnly(net.JoinHostPort(p.Hostname(), "0"))
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an http(s) URL with a host")
	}
	return nil
}

// redact hides a password in a URL-like setting before it is printed.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// osEnv is the real environment.
func osEnv(k string) string { return os.Getenv(k) }
