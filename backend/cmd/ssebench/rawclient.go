package main

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The benchmark's clients (issue 37 item 1). With a goroutine per
// connection reading through Go's netpoller, a frame cost the client side
// 9.5 µs of CPU against the hub's 6.5 µs: on a machine with one core for
// the clients, the 1,000th client read its frame ~9.5 ms after the 1st
// however fast the server wrote, so the benchmark measured its own
// clients. These clients are plain sockets: one thread per client core
// waits on its own epoll set and reads whatever is ready, stamping the
// receipt time at the read, with no goroutine, netpoller wake-up or
// bufio per connection. What is left per frame is the read and its ACK,
// which any client anywhere pays.

// rawStream is one stream opened with plain syscalls.
type rawStream struct {
	fd   int
	tail []byte // an incomplete line from the last read
	lat  []time.Duration
	open bool
}

// dialRaw opens a stream to addr from local (nil: any) and reads its
// response head and first bytes (an idle dashboard's whole cost), then
// leaves the socket non-blocking for a poller.
func dialRaw(addr, path string, local net.IP) (*rawStream, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	s := &rawStream{fd: fd, open: true}
	fail := func(err error) (*rawStream, error) {
		s.close()
		return nil, err
	}
	if local != nil {
		la := &syscall.SockaddrInet4{}
		copy(la.Addr[:], local.To4())
		if err := syscall.Bind(fd, la); err != nil {
			return fail(err)
		}
	}
	// Patient: r3labs' default server replays its whole event log to a
	// new subscriber before it answers the next one, which takes a while
	// once a few hundred events went by.
	tv := syscall.NsecToTimeval((2 * time.Minute).Nanoseconds())
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	ra := &syscall.SockaddrInet4{Port: ta.Port}
	copy(ra.Addr[:], ta.IP.To4())
	if err := syscall.Connect(fd, ra); err != nil {
		return fail(err)
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := syscall.Write(fd, []byte(req)); err != nil {
		return fail(err)
	}
	// The head, then at least one byte of body (the first frame).
	var got []byte
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil || n <= 0 {
			return fail(fmt.Errorf("reading the response: %v (n=%d)", err, n))
		}
		got = append(got, buf[:n]...)
		if i := bytes.Index(got, []byte("\r\n\r\n")); i >= 0 {
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
				line, _, _ := bytes.Cut(got, []byte("\r\n"))
				return fail(fmt.Errorf("answer %q", line))
			}
			if len(got) > i+4 {
				s.keep(got[i+4:])
				break
			}
		}
		if len(got) > 64<<10 {
			return fail(fmt.Errorf("no end of the response head in 64 KiB"))
		}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return fail(err)
	}
	return s, nil
}

// keep stores the incomplete last line of b for the next read.
func (s *rawStream) keep(b []byte) {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	s.tail = append(s.tail[:0], b...)
}

// close resets the connection (linger 0: thousands of closes leave no
// TIME_WAIT behind).
func (s *rawStream) close() {
	if !s.open {
		return
	}
	s.open = false
	_ = syscall.SetsockoptLinger(s.fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	_ = syscall.Close(s.fd)
}

// poller reads many rawStreams: one epoll set and one thread per client
// core. onFrame is called, on a poller's thread, for each change frame
// whose audit time is at or after from, with the time it was read; it
// returns false when the stream wants no more.
type poller struct {
	from    atomic.Int64 // unix ns: frames appended earlier are ignored
	onFrame func(s *rawStream, read, appended time.Time) bool
	sets    []int
	streams sync.Map // fd → *rawStream
	stop    atomic.Bool
	wg      sync.WaitGroup
	closed  sync.Once
}

func newPoller(onFrame func(s *rawStream, read, appended time.Time) bool) (*poller, error) {
	p := &poller{onFrame: onFrame}
	for range max(1, runtime.GOMAXPROCS(0)) {
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			p.close()
			return nil, err
		}
		p.sets = append(p.sets, ep)
	}
	for _, ep := range p.sets {
		p.wg.Add(1)
		go p.loop(ep)
	}
	return p, nil
}

// add hands a stream to the pollers (round robin over the sets).
func (p *poller) add(i int, s *rawStream) error {
	p.streams.Store(s.fd, s)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(s.fd)}
	return syscall.EpollCtl(p.sets[i%len(p.sets)], syscall.EPOLL_CTL_ADD, s.fd, &ev)
}

func (p *poller) loop(ep int) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	evs := make([]syscall.EpollEvent, 512)
	buf := make([]byte, 64<<10)
	for !p.stop.Load() {
		n, err := syscall.EpollWait(ep, evs, 50)
		if err != nil && err != syscall.EINTR {
			return
		}
		for _, ev := range evs[:max(n, 0)] {
			v, ok := p.streams.Load(int(ev.Fd))
			if !ok {
				continue
			}
			s := v.(*rawStream)
			m, err := syscall.Read(s.fd, buf)
			if m > 0 {
				if !p.frames(s, time.Now(), buf[:m]) {
					p.drop(ep, s)
				}
				continue
			}
			if err == syscall.EAGAIN || err == syscall.EINTR {
				continue
			}
			p.drop(ep, s) // closed by the server, or reset
		}
	}
}

// drop stops polling a stream (it stays open: the caller closes it).
func (p *poller) drop(ep int, s *rawStream) {
	_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, s.fd, nil)
	p.streams.Delete(s.fd)
}

// frames finds the change frames' data lines in what one read returned
// (after the stream's incomplete line, if any) and reports each.
func (p *poller) frames(s *rawStream, read time.Time, b []byte) bool {
	if len(s.tail) > 0 {
		b = append(s.tail, b...)
		s.tail = s.tail[:0]
	}
	from := p.from.Load()
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.tail = append(s.tail, b...)
			return true
		}
		line := b[:i+1]
		b = b[i+1:]
		if len(line) < 6 || string(line[:6]) != "data: " {
			continue
		}
		if t, ok := auditTime(line); ok && t.UnixNano() >= from {
			if !p.onFrame(s, read, t) {
				return false
			}
		}
	}
}

// close stops the pollers (within 50 ms) and closes their epoll sets.
func (p *poller) close() {
	p.closed.Do(func() {
		p.stop.Store(true)
		p.wg.Wait()
		for _, ep := range p.sets {
			_ = syscall.Close(ep)
		}
	})
}

// localAddr spreads connections over 127.0.0.1, .2, …: past ~28,000
// connections to one address the loopback's ephemeral ports run out
// (ip_local_port_range 32768–60999), and every 127/8 address is local.
func localAddr(i int) net.IP { return net.IPv4(127, 0, 0, byte(1+i/20000)) }
