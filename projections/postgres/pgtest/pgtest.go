// Package pgtest gives tests a real PostgreSQL: a throwaway cluster started
// from the system's binaries (initdb in a temp dir, a free loopback port, the
// unix socket in the temp dir, fsync off), or the server TEST_DATABASE_URL
// names. Each Start call gets a database of its own.
//
// A test binary shares one cluster: call Main from TestMain so the cluster is
// stopped when the tests end. The postmaster also gets SIGKILL if the test
// binary dies (Pdeathsig), so a killed test run leaves no server behind.
//
// PostgreSQL refuses to run as root; when the tests run as root, initdb and
// the server run as the "postgres" system user (or "nobody" if there is
// none), with the temp dir handed to that user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an existing server to use instead of a throwaway cluster. Its
// role must be allowed to create databases.
const EnvURL = "TEST_DATABASE_URL"

var (
	mu       sync.Mutex
	cluster  *Cluster
	startErr error
	dbSeq    atomic.Int64
)

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	// URL connects to the "postgres" database as the superuser.
	URL  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	// what start needs to run the server again (Pause, Resume)
	bin, data string
	port      int
	cred      *syscall.Credential
}

// Main runs the tests and stops the shared cluster afterwards. Use it as
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if cluster != nil {
		cluster.Stop()
	}
	mu.Unlock()
	os.Exit(code)
}

// Start returns the URL of a fresh, empty database on the shared server,
// starting the server on first use. It fails the test if no PostgreSQL is
// available (it never skips: a missing database is a broken machine).
func Start(t testing.TB) string {
	t.Helper()
	admin, err := AdminURL()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String()
}

// AdminURL returns the URL of the shared server's maintenance database,
// starting the throwaway cluster on first use.
func AdminURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil && startErr == nil {
		// Another process may take the free port between the probe and
		// the server's bind: try a few ports.
		for try := 0; try < 3; try++ {
			if cluster, startErr = StartCluster(); startErr == nil {
				break
			}
		}
	}
	if startErr != nil {
		return "", startErr
	}
	return cluster.URL, nil
}

// StartCluster initialises and starts a new cluster in a temp dir. Stop
// removes it.
func StartCluster() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, done: make(chan struct{})}
	fail := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return fail(err)
	}
	if cred != nil {
		// The server's user must reach and own its directories.
		if err := os.Chmod(dir, 0o755); err != nil {
			return fail(err)
		}
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	c.bin, c.data, c.port, c.cred = bin, data, port, cred
	if err := c.start(); err != nil {
		return fail(err)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := c.waitReady(30 * time.Second); err != nil {
		c.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return c, nil
}

// start runs the server on the cluster's directory and port.
func (c *Cluster) start() error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	c.done = make(chan struct{})
	c.cmd = exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.data,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB")
	c.cmd.Dir = c.dir
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Pdeathsig: the server dies with the test binary, even on SIGKILL.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	cmd, done := c.cmd, c.done
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	return nil
}

// Pause stops the server (fast shutdown: open connections are cut) and
// keeps its data, so that tests can watch what an outage does; Resume
// starts it again on the same port.
func (c *Cluster) Pause() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// Resume starts a paused server again and waits until it accepts
// connections.
func (c *Cluster) Resume() error {
	if err := c.start(); err != nil {
		return err
	}
	return c.waitReady(30 * time.Second)
}

// waitReady polls until the server accepts connections, the server exits,
// or the timeout passes.
func (c *Cluster) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.URL)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: server not ready after %s: %w", timeout, err)
		}
		select {
		case <-c.done:
			return errors.New("pgtest: postgres exited during start")
		case <-tick.C:
		}
	}
}

// Stop kills the server (fast shutdown) and removes its directory.
func (c *Cluster) Stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	_ = os.RemoveAll(c.dir)
}

// binDir finds the directory holding initdb and postgres: PATH first, then
// the newest /usr/lib/postgresql/*/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		d := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: no PostgreSQL binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin; install postgresql or set " + EnvURL)
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// runAs returns the credential to run the server with: nil when not root.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("pgtest: running as root and there is no 'postgres' or 'nobody' user to run the server as")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
