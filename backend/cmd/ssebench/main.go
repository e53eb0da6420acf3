// Command ssebench is the load generator behind scripts/bench/server.sh. It
// measures the live stream on loopback, for Slotkeeper's hub and, as the
// baseline in the same run, r3labs/sse's server in its default
// configuration, both fed by the same real pipeline (bbolt store →
// projections runner → memory read model), each in a child process so that
// its RSS can be measured:
//
//   - latency from append to receipt, N clients × R events/s;
//   - RSS per idle connection;
//   - one stalled client among N: time to eviction, and the others' p99
//     against the run without it.
//
// Usage: ssebench [-clients 1000] [-rate 50] [-duration 8s] [-idle 10000]
// (ssebench serve --impl hub|r3labs is the child).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

func eventsRepo(project, slug string) events.RepoRef {
	return events.RepoRef{Project: project, Slug: slug}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		fs := flag.NewFlagSet("serve", flag.ExitOnError)
		impl := fs.String("impl", "hub", "hub or r3labs")
		nslots := fs.Int("slots", 8, "slots in the pool")
		storeKind := fs.String("store", "bolt", "bolt (the embedded store, fsync per commit) or mem")
		maxClients := fs.Int("sse-max-clients", 50000, "the hub's MaxClients (slotkeeper serve --sse-max-clients)")
		_ = fs.Parse(os.Args[2:])
		if err := serveMode(*impl, *storeKind, *nslots, *maxClients); err != nil {
			fmt.Fprintln(os.Stderr, "ssebench serve:", err)
			os.Exit(1)
		}
		return
	}
	clients := flag.Int("clients", 1000, "streaming clients")
	rate := flag.Int("rate", 50, "events appended per second")
	dur := flag.Duration("duration", 8*time.Second, "length of each measured window")
	idle := flag.String("idle", "10000,40000", "idle connections for the memory test: a baseline count, then the count measured against it")
	rounds := flag.Int("rounds", 3, "interleaved latency rounds per implementation")
	impls := flag.String("impls", "r3labs,hub", "implementations to measure")
	flag.StringVar(&storeKind, "store", "bolt", "event store of the pipeline: bolt or mem")
	flag.StringVar(&pinServer, "pin-server", "", "run the servers under taskset -c LIST (e.g. 0; start ssebench itself under taskset -c 1 to pin the clients apart)")
	flag.Parse()
	var idles []int
	for _, f := range strings.Split(*idle, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "ssebench: -idle takes counts such as 10000,40000")
			os.Exit(2)
		}
		idles = append(idles, n)
	}
	if err := run(strings.Split(*impls, ","), *clients, *rate, *dur, idles, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "ssebench:", err)
		os.Exit(1)
	}
}

var storeKind = "bolt"

// pinServer, when set, is the CPU list the server children run on.
var pinServer string

// child is a running `ssebench serve`.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	evict chan string
	addr  string
}

func startChild(impl string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "serve", "--impl", impl, "--store", storeKind)
	if pinServer != "" {
		cmd = exec.Command("taskset", "-c", pinServer, self, "serve", "--impl", impl, "--store", storeKind)
	}
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, lines: make(chan string, 64), evict: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "EVICT ") {
				select {
				case c.evict <- l:
				default:
				}
				continue
			}
			c.lines <- l
		}
		close(c.lines)
	}()
	l, err := c.read("ADDR ", 60*time.Second)
	if err != nil {
		return nil, err
	}
	c.addr = strings.TrimPrefix(l, "ADDR ")
	pathOf.Store(c.addr, streamPath[impl])
	return c, nil
}

func (c *child) read(prefix string, timeout time.Duration) (string, error) {
	t := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("child exited")
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-t:
			return "", fmt.Errorf("child did not answer %q", prefix)
		}
	}
}

func (c *child) send(cmd, want string) (string, error) {
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return "", err
	}
	return c.read(want, 60*time.Second)
}

func (c *child) rss() (kb, goroutines int, err error) {
	l, err := c.send("rss", "RSS ")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(l)
	kb, _ = strconv.Atoi(f[1])
	goroutines, _ = strconv.Atoi(f[2])
	return kb, goroutines, nil
}

// cpu is the child's CPU time so far (user + system).
func (c *child) cpu() (time.Duration, error) {
	l, err := c.send("cpu", "CPU ")
	if err != nil {
		return 0, err
	}
	us, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
	return time.Duration(us) * time.Microsecond, nil
}

// selfCPU is this process's (the clients') CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *child) stop() {
	fmt.Fprintln(c.in, "quit")
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// result of one measured window.
type result struct {
	p50, p99, max time.Duration
	delivered     float64 // received / expected
	samples       int
	// CPU time of the server and of the clients during the window, per
	// frame delivered (where the two cores go).
	serverCPU, clientCPU time.Duration
}

func (r result) String() string {
	if r.samples == 0 {
		return "nothing delivered (p50/p99 undefined), delivered 0.0%"
	}
	return fmt.Sprintf("p50 %s p99 %s max %s delivered %.1f%%; CPU per frame delivered: server %.1fµs, clients %.1fµs",
		ms(r.p50), ms(r.p99), ms(r.max), 100*r.delivered, perFrame(r.serverCPU, r.samples), perFrame(r.clientCPU, r.samples))
}

func perFrame(d time.Duration, n int) float64 {
	return float64(d.Nanoseconds()) / 1000 / float64(max(n, 1))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func run(impls []string, nclients, rate int, dur time.Duration, idles []int, rounds int) error {
	fmt.Printf("ssebench: %d clients x %d events/s, %s windows, %d interleaved rounds; idle connections %v; GOMAXPROCS=%d\n",
		nclients, rate, dur, rounds, idles, runtimeProcs())
	type row struct {
		c          *child
		lat        []result
		stall      result
		evictAfter time.Duration
		evictWhy   string
		perConnKB  float64
		idle       []idleResult
	}
	rows := map[string]*row{}
	defer func() {
		for _, r := range rows {
			if r.c != nil {
				r.c.stop()
			}
		}
	}()
	for _, impl := range impls {
		c, err := startChild(impl)
		if err != nil {
			return fmt.Errorf("%s: %w", impl, err)
		}
		rows[impl] = &row{c: c}
	}
	for _, impl := range impls {
		floor, err := window(rows[impl].c, 1, rate, dur/2, false, nil)
		if err != nil {
			return fmt.Errorf("%s floor: %w", impl, err)
		}
		fmt.Printf("  %-7s floor     1 client x %d ev/s (the pipeline alone: bbolt append, runner, fan-out): %s\n", impl, rate, floor)
	}
	// The machine is shared and noisy: the implementations take turns, the
	// order flipping every round, and the median round is reported.
	for i := 0; i < rounds; i++ {
		order := append([]string(nil), impls...)
		if i%2 == 1 {
			for a, b := 0, len(order)-1; a < b; a, b = a+1, b-1 {
				order[a], order[b] = order[b], order[a]
			}
		}
		for _, impl := range order {
			r := rows[impl]
			res, err := window(r.c, nclients, rate, dur, false, nil)
			if err != nil {
				return fmt.Errorf("%s latency: %w", impl, err)
			}
			r.lat = append(r.lat, res)
			fmt.Printf("  %-7s round %d   %d clients x %d ev/s: %s\n", impl, i+1, nclients, rate, res)
		}
	}
	// Stalled client: the hub first, because r3labs' stream does not
	// recover from it.
	for _, impl := range []string{"hub", "r3labs"} {
		r := rows[impl]
		if r == nil {
			continue
		}
		stall := &stallInfo{}
		var err error
		r.stall, err = window(r.c, nclients, rate, dur, true, stall)
		if err != nil {
			return fmt.Errorf("%s stall: %w", impl, err)
		}
		select {
		case l := <-r.c.evict:
			f := strings.Fields(l)
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			r.evictAfter = time.Unix(0, ns).Sub(stall.start)
			r.evictWhy = f[2]
		default:
		}
		ev := "not evicted within the window"
		if r.evictWhy != "" {
			ev = fmt.Sprintf("evicted after %.2fs (%s)", r.evictAfter.Seconds(), r.evictWhy)
		}
		fmt.Printf("  %-7s stalled   1 of %d stalled: %s; others %s\n", impl, nclients+1, ev, r.stall)
		r.c.stop()
		r.c = nil
	}
	// Idle connections, each count in a fresh child so the windows above
	// don't inflate its heap. Every connection costs a descriptor here and
	// one in the child, and both processes are held to RLIMIT_NOFILE: a
	// count above it is cut to what fits, and the cut is printed.
	limit := fdLimit()
	for _, impl := range impls {
		r := rows[impl]
		for _, want := range idles {
			n := min(want, limit-200)
			ir, err := idleRun(impl, n)
			if err != nil {
				return err
			}
			ir.want = want
			r.idle = append(r.idle, ir)
			if len(r.idle) == 1 {
				r.perConnKB = ir.perConnKB
			}
			cut := ""
			if n < want {
				cut = fmt.Sprintf(" (asked %d; RLIMIT_NOFILE is %d per process, hard, for the server and for these clients alike)", want, limit)
			}
			fmt.Printf("  %-7s idle      %d connections%s: RSS %d → %d kB, %.1f kB per connection, goroutines %d → %d (%.2f per connection); one change reached %d of them: p50 %s p99 %s max %s\n",
				impl, ir.ok, cut, ir.before, ir.after, ir.perConnKB, ir.g0, ir.g1, float64(ir.g1-ir.g0)/float64(max(ir.ok, 1)), ir.reached, ms(ir.p50), ms(ir.p99), ms(ir.max))
		}
	}
	h, b := rows["hub"], rows["r3labs"]
	if h != nil && b != nil {
		hl, bl := median(h.lat), median(b.lat)
		fmt.Println("summary (hub vs r3labs default server, same run, medians over the rounds):")
		fmt.Printf("  latency append→receipt, %d clients x %d ev/s: hub p50 %s p99 %s; r3labs p50 %s p99 %s; ratio hub/r3labs p50 %.2f p99 %.2f (targets p50 < 5ms, p99 < 50ms)\n",
			nclients, rate, ms(hl.p50), ms(hl.p99), ms(bl.p50), ms(bl.p99), ratio(hl.p50, bl.p50), ratio(hl.p99, bl.p99))
		fmt.Printf("  idle RSS per connection: hub %.1f kB, r3labs %.1f kB (ratio %.2f; target <= 30 kB)\n", h.perConnKB, b.perConnKB, h.perConnKB/b.perConnKB)
		if len(h.idle) > 1 {
			a, z := h.idle[0], h.idle[len(h.idle)-1]
			fmt.Printf("  hub idle, %d vs %d connections (asked %d): %.1f vs %.1f kB per connection (ratio %.2f; target <= 30 kB); one change to all: p99 %s vs %s (target < 1s), reached %d of %d\n",
				a.ok, z.ok, z.want, a.perConnKB, z.perConnKB, z.perConnKB/a.perConnKB, ms(a.p99), ms(z.p99), z.reached, z.ok)
		}
		ev := "NOT evicted within the window"
		if h.evictWhy != "" {
			ev = fmt.Sprintf("evicted in %.2fs by %s", h.evictAfter.Seconds(), h.evictWhy)
		}
		fmt.Printf("  1 stalled client: hub: stalled client %s (target < 5s); others p99 %s = %.2fx the unstalled median p99, delivered %.1f%%\n",
			ev, ms(h.stall.p99), ratio(h.stall.p99, hl.p99), 100*h.stall.delivered)
		fmt.Printf("  1 stalled client: r3labs: others %s\n", b.stall)
	}
	return nil
}

// median returns the median of each figure over the rounds (p50 and p99
// each from their own median round: on a shared machine one disturbed
// round moves one figure, not the other).
func median(rs []result) result {
	s := append([]result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].p99 < s[j].p99 })
	m := s[len(s)/2]
	sort.Slice(s, func(i, j int) bool { return s[i].p50 < s[j].p50 })
	m.p50 = s[len(s)/2].p50
	return m
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }

type stallInfo struct{ start time.Time }

// window connects n clients (and a stalled one), appends at rate for dur,
// and returns the latency of every change appended during the window.
func window(c *child, n, rate int, dur time.Duration, stalled bool, si *stallInfo) (result, error) {
	p, err := newPoller(func(s *rawStream, read, appended time.Time) bool {
		s.lat = append(s.lat, read.Sub(appended))
		return true
	})
	if err != nil {
		return result{}, err
	}
	defer p.close()
	p.from.Store(time.Now().Add(time.Hour).UnixNano()) // set below; frames before it are ignored
	// Each stream is read from the moment it is open: r3labs' server
	// replays its event log to a new subscriber from one loop, so a
	// subscriber nobody reads would hold every later one.
	streams, err := openMany(c.addr, streamPathFor(c.addr), n, p.add)
	defer closeStreams(streams)
	if err != nil {
		return result{}, err
	}
	var stallConn net.Conn
	if stalled {
		var err error
		stallConn, err = dialStalled(c.addr)
		if err != nil {
			return result{}, err
		}
		si.start = time.Now()
		defer abort(stallConn)
	}
	cpu0, err := c.cpu()
	if err != nil {
		return result{}, err
	}
	self0 := selfCPU()
	p.from.Store(time.Now().UnixNano())
	if _, err := c.send(fmt.Sprintf("rate %d", rate), "OK"); err != nil {
		return result{}, err
	}
	time.Sleep(dur) // the measured window: load runs for a fixed time
	ok, err := c.send("rate 0", "OK")
	if err != nil {
		return result{}, err
	}
	appended, _ := strconv.Atoi(strings.TrimPrefix(ok, "OK "))
	time.Sleep(time.Second) // let in-flight frames arrive
	cpu1, err := c.cpu()
	if err != nil {
		return result{}, err
	}
	self1 := selfCPU()
	p.close()
	var all []time.Duration
	for _, s := range streams {
		all = append(all, s.lat...)
	}
	expected := float64(n) * float64(appended)
	res := result{samples: len(all), delivered: min(1, float64(len(all))/max(expected, 1)), serverCPU: cpu1 - cpu0, clientCPU: self1 - self0}
	if len(all) == 0 {
		return res, nil
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	res.p50 = all[len(all)/2]
	res.p99 = all[len(all)*99/100]
	res.max = all[len(all)-1]
	return res, nil
}

var streamPath = map[string]string{"hub": "/api/stream", "r3labs": "/api/stream?stream=changes"}

var pathOf sync.Map // addr → path

func streamPathFor(addr string) string {
	if p, ok := pathOf.Load(addr); ok {
		return p.(string)
	}
	return "/api/stream"
}

// auditTime finds the audit entry's "time" in a change frame without
// decoding the whole JSON (the generator must stay cheap next to the server).
func auditTime(line []byte) (time.Time, bool) {
	i := bytes.Index(line, []byte(`"audit":`))
	if i < 0 {
		return time.Time{}, false
	}
	j := bytes.Index(line[i:], []byte(`"time":"`))
	if j < 0 {
		return time.Time{}, false
	}
	rest := line[i+j+8:]
	k := bytes.IndexByte(rest, '"')
	if k < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:k]))
	return t, err == nil
}

func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// dialStalled opens a stream and never reads it; its receive buffer is
// tiny so that the stall reaches the server within seconds.
func dialStalled(addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", streamPathFor(addr), addr)
	return c, err
}

// openMany opens n streams, 100 dials at a time, each from localAddr(i),
// handing each to onOpen (nil: none) as soon as it is open; the first
// failure is returned with the streams opened so far.
func openMany(addr, path string, n int, onOpen func(i int, s *rawStream) error) ([]*rawStream, error) {
	streams := make([]*rawStream, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for i := range streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := dialRaw(addr, path, localAddr(i))
			if err != nil {
				errs <- err
				return
			}
			streams[i] = s
			if onOpen != nil {
				if err := onOpen(i, s); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return streams, <-errs
}

func closeStreams(streams []*rawStream) {
	for _, s := range streams {
		if s != nil {
			s.close()
		}
	}
}

// idleResult is one idle run: memory and one change reaching everybody.
type idleResult struct {
	want, ok, reached     int
	before, after, g0, g1 int
	perConnKB             float64
	p50, p99, max         time.Duration
}

// idleRun opens n idle streams on a fresh child, reads its RSS, then has
// it append one change and times its arrival on every stream.
func idleRun(impl string, n int) (idleResult, error) {
	var ir idleResult
	c, err := startChild(impl)
	if err != nil {
		return ir, err
	}
	defer c.stop()
	if ir.before, ir.g0, err = c.rss(); err != nil {
		return ir, err
	}
	streams, _ := openMany(c.addr, streamPath[impl], n, nil) // the count opened is the figure
	defer closeStreams(streams)
	ok := 0
	for _, s := range streams {
		if s != nil {
			streams[ok] = s
			ok++
		}
	}
	streams = streams[:ok]
	ir.ok = ok
	if ir.after, ir.g1, err = c.rss(); err != nil {
		return ir, err
	}
	if ok > 0 {
		ir.perConnKB = float64(ir.after-ir.before) / float64(ok)
	}
	// One change to all of them, three times (the machine is shared:
	// the median trial by p99 is kept).
	var trials []idleResult
	for range 3 {
		t, err := oneToAll(c, streams)
		if err != nil {
			return ir, err
		}
		trials = append(trials, t)
	}
	sort.Slice(trials, func(i, j int) bool { return trials[i].p99 < trials[j].p99 })
	t := trials[1]
	ir.reached, ir.p50, ir.p99, ir.max = t.reached, t.p50, t.p99, t.max
	return ir, nil
}

// oneToAll has the child append one change and times its arrival on every
// stream (bounded: 15 s).
func oneToAll(c *child, streams []*rawStream) (idleResult, error) {
	var ir idleResult
	var reached atomic.Int64
	all := make(chan struct{})
	p, err := newPoller(func(s *rawStream, read, appended time.Time) bool {
		s.lat = append(s.lat[:0], read.Sub(appended))
		if reached.Add(1) == int64(len(streams)) {
			close(all)
		}
		return false // one frame is all this stream is asked for
	})
	if err != nil {
		return ir, err
	}
	p.from.Store(time.Now().UnixNano())
	for i, s := range streams {
		s.lat = s.lat[:0]
		if err := p.add(i, s); err != nil {
			p.close()
			return ir, err
		}
	}
	if _, err := c.send("once", "OK"); err != nil {
		p.close()
		return ir, err
	}
	select {
	case <-all:
	case <-time.After(15 * time.Second):
	}
	p.close()
	var got []time.Duration
	for _, s := range streams {
		if len(s.lat) > 0 {
			got = append(got, s.lat[0])
		}
		s.tail = s.tail[:0]
	}
	ir.reached = len(got)
	if len(got) > 0 {
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		ir.p50, ir.p99, ir.max = got[len(got)/2], got[len(got)*99/100], got[len(got)-1]
	}
	return ir, nil
}

// fdLimit is this process's RLIMIT_NOFILE (Go raises the soft limit to
// the hard one at start).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int(rl.Cur)
}
