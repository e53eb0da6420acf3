package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// BenchmarkSignInFlood (issue 33 item 1): 100 wrong passwords for one
// account from one address, sent at once, with the default argon2id cost
// (19 MiB a hash), while /healthz is asked in a loop. It prints the
// process's peak resident memory during the flood and /healthz's median
// and worst latency, for two runs in the same process:
//
//   - before: what the old sign-in did, re-created: its limiter was
//     checked before the hash and charged after it, so all 100 concurrent
//     attempts passed the check and hashed at once. The run calls the
//     directory's password check 100 times at once (exactly the old
//     path's work), the server answering /healthz meanwhile.
//   - after: the same 100 sign-ins sent to POST /api/auth/login of the
//     real server (limiter held before the hash, HashConcurrency 4).
func BenchmarkSignInFlood(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newBenchPipeline(ctx)
	log, store, rm, runner, hub := p.log, p.store, p.rm, p.runner, p.hub
	dir, err := auth.Open(ctx, store, auth.Options{}) // the default argon2id cost
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := dir.CreateUser(ctx, auth.SystemSubject("bench"), "bob", auth.RoleMember, "correct horse battery"); err != nil {
		b.Fatal(err)
	}
	svc := slots.NewService(store, slots.Config{Logger: log})
	s, err := New(Deps{Commands: svc, Reads: rm, Log: store, Waiter: runner, Hub: hub, Logger: log,
		Ready: func(context.Context) error { return nil }, Auth: auth.NewService(dir, auth.Config{}), CommandsPerSecond: -1})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	const n = 100
	before := func() {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = dir.CheckPassword("bob", "wrong password!") }()
		}
		wg.Wait()
	}
	codes := map[int]int{}
	var codesMu sync.Mutex
	after := func() {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", srv.URL+"/api/auth/login", strings.NewReader(`{"name":"bob","password":"wrong password!"}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codesMu.Lock()
				codes[resp.StatusCode]++
				codesMu.Unlock()
			}()
		}
		wg.Wait()
	}
	for b.Loop() {
		for _, run := range []struct {
			name  string
			flood func()
		}{{"before", before}, {"after", after}} {
			peak, base, lat := floodRun(b, srv.URL, run.flood)
			fmt.Printf("FIGURE sign-in flood (%d bad passwords at once) %s: peak RSS %d MB (idle %d MB), /healthz median %v worst %v over %d asks\n",
				n, run.name, peak>>20, base>>20, lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), len(lat))
		}
		fmt.Printf("FIGURE sign-in flood after: answers %v (401 hashed, 429 limited, 503 busy)\n", codes)
	}
}

// floodRun runs flood while sampling the resident memory and asking
// /healthz in a loop; it returns the peak and idle resident memory and
// the sorted /healthz latencies.
func floodRun(b *testing.B, url string, flood func()) (peak, base int64, lat []time.Duration) {
	runtime.GC()
	debug.FreeOSMemory()
	base = rss(b)
	peak = base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the memory sampler: a measurement, not a wait
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				peak = max(peak, rss(b))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			resp, err := http.Get(url + "/healthz")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
		}
	}()
	flood()
	close(stop)
	wg.Wait()
	if len(lat) == 0 {
		lat = []time.Duration{0}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return peak, base, lat
}

// rss is the process's resident memory now (VmRSS).
func rss(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
