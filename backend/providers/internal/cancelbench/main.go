// Command cancelbench measures how fast a cancelled provider call stops:
// N trials of a hung call (the simulator holds the request open) cancelled
// at a random moment after the request reached the server. It reports, from
// cancel, p50/p99 until the client returned and until the simulator recorded
// the abort, and counts requests that arrived after a cancel (must be 0).
// A baseline of normal round trips measured in the same run gives ratios.
//
//	go run ./backend/providers/internal/cancelbench -trials 1000 -git-trials 50
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

func main() {
	trials := flag.Int("trials", 1000, "hung HTTP calls to cancel")
	gitTrials := flag.Int("git-trials", 50, "hung git pushes to cancel")
	maxDelay := flag.Duration("max-delay", 5*time.Millisecond, "cancel at a uniform random moment up to this long after the request arrived")
	flag.Parse()
	if err := run(*trials, *gitTrials, *maxDelay); err != nil {
		fmt.Fprintln(os.Stderr, "cancelbench:", err)
		os.Exit(1)
	}
}

type stats struct {
	toReturn, toAbort []time.Duration
	lateRequests      int // arrived after the cancel
	notAborted        int // completed instead of aborted
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func run(trials, gitTrials int, maxDelay time.Duration) error {
	ctx := context.Background()
	s, err := sim.Start(ctx, sim.Options{DeleteDelay: time.Hour})
	if err != nil {
		return err
	}
	defer s.Close()
	fx, err := s.SeedSlot("bench")
	if err != nil {
		return err
	}
	cc := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken()})
	bc := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken()})

	// Baseline: normal round trips of the same calls.
	var base []time.Duration
	for range 200 {
		t0 := time.Now()
		if _, _, err := cc.GetDatabase(ctx, fx.DBUUID); err != nil {
			return err
		}
		base = append(base, time.Since(t0))
	}

	calls := []struct {
		name     string
		endpoint string
		call     func(context.Context) error
	}{
		{"coolify GET database", sim.EndpointGetDatabase, func(c context.Context) error { _, _, err := cc.GetDatabase(c, fx.DBUUID); return err }},
		{"coolify DELETE database", sim.EndpointDeleteDatabase, func(c context.Context) error { _, err := cc.DeleteDatabase(c, fx.DBUUID); return err }},
		{"bitbucket GET repo", sim.EndpointGetRepo, func(c context.Context) error { _, _, err := bc.GetRepo(c, "SLOT", fx.Repo.Slug); return err }},
	}
	for _, c := range calls {
		s.AddFault(sim.Fault{Endpoint: c.endpoint, Hang: true})
	}
	var st stats
	for i := range trials {
		c := calls[i%len(calls)]
		if err := trial(s, c.endpoint, c.call, maxDelay, &st); err != nil {
			return fmt.Errorf("%s trial %d: %w", c.name, i, err)
		}
	}
	s.ClearFaults()
	report("http", trials, st, pct(base, 0.5))
	if st.lateRequests+st.notAborted != 0 {
		return fmt.Errorf("http: %d requests after cancel, %d not aborted", st.lateRequests, st.notAborted)
	}

	if gitTrials == 0 {
		return nil
	}
	p, err := git.New(git.Options{Token: s.BitbucketToken()})
	if err != nil {
		return err
	}
	defer p.Close()
	// Baseline: real lease pushes, alternating the template and a copy of
	// the slot's own history so every push changes the remote.
	orig := s.CloneURL("SLOT", fx.Repo.Slug+"-orig")
	if _, err := s.AddRepo("SLOT", fx.Repo.Slug+"-orig"); err != nil {
		return err
	}
	if _, err := p.PushNew(ctx, fx.Repo.CloneURL, "main", orig, "main"); err != nil {
		return err
	}
	var gbase []time.Duration
	head, other := fx.RepoHead, fx.Template.CloneURL
	for range 6 {
		t0 := time.Now()
		sha, err := p.ForcePushWithLease(ctx, other, "main", fx.Repo.CloneURL, "main", head)
		if err != nil {
			return err
		}
		gbase = append(gbase, time.Since(t0))
		head = sha
		if other == orig {
			other = fx.Template.CloneURL
		} else {
			other = orig
		}
	}
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Hang: true})
	var gst stats
	for i := range gitTrials {
		push := func(c context.Context) error {
			_, err := p.ForcePushWithLease(c, other, "main", fx.Repo.CloneURL, "main", head)
			return err
		}
		if err := trial(s, sim.EndpointGitReceivePack, push, 4*maxDelay, &gst); err != nil {
			return fmt.Errorf("git trial %d: %w", i, err)
		}
	}
	if now, _ := s.RepoHeadSHA("SLOT", fx.Repo.Slug, "main"); now != head {
		return fmt.Errorf("a cancelled push moved the remote: %s → %s", head, now)
	}
	report("git push", gitTrials, gst, pct(gbase, 0.5))
	if gst.lateRequests+gst.notAborted != 0 {
		return fmt.Errorf("git: %d requests after cancel, %d not aborted", gst.lateRequests, gst.notAborted)
	}
	return nil
}

// trial runs call until its request is hung in the simulator, cancels at a
// random moment, and measures.
func trial(s *sim.Sim, endpoint string, call func(context.Context) error, maxDelay time.Duration, st *stats) error {
	wait, cancelWait := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWait()
	start := 0 // the last Seq before this trial
	if reqs := s.Requests(); len(reqs) > 0 {
		start = reqs[len(reqs)-1].Seq
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	r, err := s.WaitFor(wait, func(r sim.Request) bool { return r.Seq > start && r.Endpoint == endpoint })
	if err != nil {
		cancel()
		return fmt.Errorf("request never arrived: %w", err)
	}
	if maxDelay > 0 {
		time.Sleep(rand.N(maxDelay)) // the random moment; not a wait for anything
	}
	t0 := time.Now()
	cancel()
	var callErr error
	select {
	case callErr = <-done:
	case <-wait.Done():
		return fmt.Errorf("client did not return after cancel")
	}
	st.toReturn = append(st.toReturn, time.Since(t0))
	if providers.CodeOf(callErr) != providers.CodeCanceled {
		return fmt.Errorf("call ended with %v, want canceled", callErr)
	}
	rec, err := s.WaitFor(wait, func(x sim.Request) bool { return x.Seq == r.Seq && x.Done() })
	if err != nil {
		return fmt.Errorf("abort never recorded: %w", err)
	}
	if rec.WasAborted() {
		st.toAbort = append(st.toAbort, max(0, rec.Aborted.Sub(t0)))
	} else {
		st.notAborted++
	}
	st.lateRequests += len(s.RequestsAfter(t0))
	return nil
}

func report(what string, n int, st stats, base time.Duration) {
	rp99, ap99 := pct(st.toReturn, 0.99), pct(st.toAbort, 0.99)
	verdict := "PASS"
	if ap99 >= 50*time.Millisecond || rp99 >= 50*time.Millisecond || st.lateRequests != 0 || st.notAborted != 0 {
		verdict = "FAIL"
	}
	fmt.Printf("%s cancel: %d trials; cancel→return p50 %s p99 %s; cancel→sim abort p50 %s p99 %s; requests after cancel %d; not aborted %d; target p99<50ms: %s\n",
		what, n, ms(pct(st.toReturn, 0.5)), ms(rp99), ms(pct(st.toAbort, 0.5)), ms(ap99), st.lateRequests, st.notAborted, verdict)
	fmt.Printf("%s baseline: normal call p50 %s; abort p99 / normal p50 = %.2f\n", what, ms(base), float64(ap99)/float64(max(base, 1)))
}
