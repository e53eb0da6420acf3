package jobs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	gitp "github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

// The crash child is this test binary re-executed with these variables set:
// it runs one engine on the bbolt store until it is killed.
const (
	envChild     = "JOBS_CRASH_CHILD"
	envStore     = "JOBS_CRASH_STORE"
	envCoolURL   = "JOBS_CRASH_COOLIFY_URL"
	envCoolToken = "JOBS_CRASH_COOLIFY_TOKEN"
	envBBURL     = "JOBS_CRASH_BB_URL"
	envBBToken   = "JOBS_CRASH_BB_TOKEN"
)

// childLease is the crashed worker's lease: the rescuer may abandon its
// attempt this long after its last renewal. Renewals come every third of
// it, so it must outlast a loaded machine's scheduling gaps until the kill
// (800 ms did not: the child's attempt ended before reaching the hang).
const childLease = 3 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		crashChild()
		return
	}
	os.Exit(m.Run())
}

func crashChild() {
	st, err := boltstore.Open(os.Getenv(envStore), boltstore.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open store:", err)
		os.Exit(2)
	}
	// Its git scratch space sits beside the store. When this child is
	// SIGKILLed, providers/git kills its git processes too (parent-death
	// guard), so no push of a dead worker reaches the simulator.
	pusher, err := gitp.New(gitp.Options{Token: os.Getenv(envBBToken), TempDir: filepath.Dir(os.Getenv(envStore))})
	if err != nil {
		os.Exit(2)
	}
	bb := os.Getenv(envBBURL)
	deps := jobs.Deps{
		PaaS:    coolify.New(coolify.Options{BaseURL: os.Getenv(envCoolURL), Token: os.Getenv(envCoolToken)}),
		GitHost: bitbucket.New(bitbucket.Options{BaseURL: bb, Token: os.Getenv(envBBToken)}),
		Pusher:  pusher,
		// The simulator's clone URL shape (sim.CloneURL), rebuilt here
		// because the simulator runs in the parent.
		RepoURL: func(r events.RepoRef) string {
			return bb + "/scm/" + strings.ToLower(r.Project) + "/" + r.Slug + ".git"
		},
	}
	eng := jobs.NewEngine(st, deps, jobs.Config{Workers: 1, WorkerID: "child", Lease: childLease,
		StepTimeout: time.Minute, JobTimeout: time.Minute, Logger: testLogger()})
	eng.Run(context.Background()) // until SIGKILL
	os.Exit(3)
}

// crashPhase runs the queued job in a child process on the bbolt store at
// path, waits until the faulted (hung) call of the step is in flight, kills
// the child with SIGKILL and reopens the store in this process.
func crashPhase(t *testing.T, w *world, path string, c stepCall) {
	t.Helper()
	if err := w.store.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envStore+"="+path,
		envCoolURL+"="+w.sim.CoolifyURL(), envCoolToken+"="+w.sim.CoolifyToken(),
		envBBURL+"="+w.sim.BitbucketURL(), envBBToken+"="+w.sim.BitbucketToken())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := w.sim.WaitFor(ctx, faultedArrived(c)); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child never reached %s: %v", c.step, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	st, err := boltstore.Open(path, boltstore.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w.store = st
	w.svc = slots.NewService(st, slots.Config{Logger: testLogger()})
}
