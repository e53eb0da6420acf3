package httpapi

import "sync"

// inflight counts requests of one kind running now, per subject and in
// all, for the caps on live streams and on replays (as-of and changes).
// A cap of 0 or less is no cap.
type inflight struct {
	perSubject, total int

	mu  sync.Mutex
	n   map[string]int // subject id → running
	all int
}

func newInflight(perSubject, total int) *inflight {
	return &inflight{perSubject: perSubject, total: total, n: map[string]int{}}
}

// Which cap enter met.
const (
	capNone = iota
	capSubject
	capTotal
)

// enter takes a place for subject; leave gives it back. Without a place
// it returns capSubject or capTotal and no leave.
func (f *inflight) enter(subject string) (leave func(), full int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.perSubject > 0 && f.n[subject] >= f.perSubject {
		return nil, capSubject
	}
	if f.total > 0 && f.all >= f.total {
		return nil, capTotal
	}
	f.n[subject]++
	f.all++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.all--
			if f.n[subject]--; f.n[subject] <= 0 {
				delete(f.n, subject)
			}
		})
	}, capNone
}
