package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
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
	GitUser                      string
	Sim                          string // auto | on | off
	Demo                         bool

	Workers     int
	StepTimeout time.Duration
	JobTimeout  time.Duration
	Lease       time.Duration
	Grace       time.Duration
	Deadlines   bool

	WebhookURL string
	BaseURL    string

	Heartbeat       time.Duration
	SSEMaxClients   int
	SSEMaxPerIP     int
	SSEHistory      int
	SSEWriteTimeout time.Duration
	SSEResumeWait   time.Duration
	ShutdownTimeout time.Duration

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
	fs.StringVar(&c.CoolifyToken, "coolify-token", "", "Coolify API token")
	fs.StringVar(&c.BitbucketURL, "bitbucket-url", "", "Bitbucket Data Center root, e.g. https://bitbucket.example (empty: simulator)")
	fs.StringVar(&c.BitbucketToken, "bitbucket-token", "", "Bitbucket HTTP access token (also used for git pushes)")
	fs.StringVar(&c.GitUser, "git-user", "x-token-auth", "user name sent with the Bitbucket token to git")
	fs.StringVar(&c.Sim, "sim", "auto", "simulated Coolify/Bitbucket/git: auto (when no real provider is configured), on, off")
	fs.BoolVar(&c.Demo, "demo", true, "with the simulators, seed a demo pool of 8 slots into an empty log")
	fs.IntVar(&c.Workers, "workers", 4, "jobs run at once by this process (0: do not run jobs here)")
	fs.DurationVar(&c.StepTimeout, "step-timeout", 2*time.Minute, "deadline of one job step (one outside call and its confirmation)")
	fs.DurationVar(&c.JobTimeout, "job-timeout", 15*time.Minute, "deadline of one job attempt")
	fs.DurationVar(&c.Lease, "lease", 30*time.Second, "job claim lease, renewed by the running attempt")
	fs.DurationVar(&c.Grace, "grace", 2*time.Minute, "grace period between a release and its reset")
	fs.BoolVar(&c.Deadlines, "deadline-reset", true, "queue a reset when an occupancy deadline passes")
	fs.StringVar(&c.WebhookURL, "webhook-url", "", "URL told about every job's outcome (empty: none)")
	fs.StringVar(&c.BaseURL, "base-url", "", "public URL of this server, for links in webhooks (default http://<addr>)")
	fs.DurationVar(&c.Heartbeat, "heartbeat", 15*time.Second, "interval of heartbeat frames on the live stream")
	fs.IntVar(&c.SSEMaxClients, "sse-max-clients", 10000, "live streams served at once; more get 429")
	fs.IntVar(&c.SSEMaxPerIP, "sse-max-per-ip", 0, "live streams per remote address (0: no cap)")
	fs.IntVar(&c.SSEHistory, "sse-history", 4096, "recent changes kept so that reconnecting clients resume exactly")
	fs.DurationVar(&c.SSEWriteTimeout, "sse-write-timeout", 2*time.Second, "a stream write taking longer disconnects the client (it resumes)")
	fs.DurationVar(&c.SSEResumeWait, "sse-resume-wait", 5*time.Second, "how long a client resuming from an id this process has not projected yet waits for it before a 503 (at most --heartbeat)")
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
	fs.SetOutput(out)
	serveFlags(fs, &c)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: slotkeeper serve [flags]\n\nEvery flag can also be set by its environment variable, e.g. --grace by SLOTKEEPER_GRACE.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
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
				return &ConfigError{Setting: envName(n), Problem: fmt.Sprintf("invalid value %q: %v", v, unwrapFlagErr(err))}
			}
		}
	}
	return nil
}

func unwrapFlagErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// validate checks every setting and returns the first problem, naming it.
func (c *Config) validate() error {
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return cfgErr("addr", "%q is not host:port", c.Addr)
	}
	if c.Data == "" {
		return cfgErr("data", "must not be empty")
	}
	if c.Events != "" {
		u, err := url.Parse(c.Events)
		if err != nil || (u.Scheme != "kurrentdb" && u.Scheme != "esdb" && u.Scheme != "kurrentdb+discover" && u.Scheme != "esdb+discover") {
			return cfgErr("events", "%q: use empty (embedded store) or a kurrentdb:// or esdb:// connection string", redact(c.Events))
		}
	}
	if c.ReadModel != "memory" {
		u, err := url.Parse(c.ReadModel)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return cfgErr("read-model", "%q: use memory or a postgres:// URL", redact(c.ReadModel))
		}
	}
	switch c.Sim {
	case "auto", "on", "off":
	default:
		return cfgErr("sim", "%q: use auto, on or off", c.Sim)
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
		}
	}
	if c.Workers < 0 || c.Workers > 256 {
		return cfgErr("workers", "%d: use 0..256", c.Workers)
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
			return cfgErr(d.name, "%s: must be positive", d.v)
		}
	}
	if c.Grace < 0 {
		return cfgErr("grace", "%s: must not be negative", c.Grace)
	}
	if c.StepTimeout > c.JobTimeout {
		return cfgErr("step-timeout", "%s is longer than --job-timeout %s", c.StepTimeout, c.JobTimeout)
	}
	if c.Lease < 300*time.Millisecond {
		return cfgErr("lease", "%s: at least 300ms (it is renewed every third of it)", c.Lease)
	}
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
	if c.SSEMaxClients < 1 {
		return cfgErr("sse-max-clients", "%d: at least 1", c.SSEMaxClients)
	}
	if c.SSEMaxPerIP < 0 {
		return cfgErr("sse-max-per-ip", "%d: 0 (no cap) or more", c.SSEMaxPerIP)
	}
	if c.SSEHistory < 16 || c.SSEHistory > 1<<20 {
		return cfgErr("sse-history", "%d: use 16..1048576", c.SSEHistory)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfgErr("log-level", "%q: use debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return cfgErr("log-format", "%q: use text or json", c.LogFormat)
	}
	if err := c.Reconcile.validate(); err != nil {
		return err
	}
	if err := c.Backup.validate(c.Events == ""); err != nil {
		return err
	}
	if err := c.Waitlist.validate(); err != nil {
		return err
	}
	return c.Auth.validate()
}

// useSim reports whether serve runs the simulators.
func (c *Config) useSim() bool {
	return c.Sim == "on" || (c.Sim == "auto" && c.CoolifyURL == "" && c.CoolifyToken == "" && c.BitbucketURL == "" && c.BitbucketToken == "")
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", redact(s))
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
