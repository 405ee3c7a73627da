package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// ClosedLoop is a load of clients that each send their next request as
// their last one ends, as an autoscaling test drives a fleet.
type ClosedLoop struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	// Sent and Failed count the requests.
	Sent, Failed atomic.Int64
	mu           sync.Mutex
	failures     []string
}

// maxRecordedFailures bounds what a ClosedLoop keeps of its failures.
const maxRecordedFailures = 20

// StartClosedLoop starts clients calling send(client, i) for their i-th
// request until Stop (or the test's end); an error counts as a failure.
func StartClosedLoop(t testing.TB, clients int, send func(client int, i uint32) error) *ClosedLoop {
	l := &ClosedLoop{stop: make(chan struct{})}
	t.Cleanup(l.Stop)
	for c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := uint32(0); ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.Sent.Add(1)
				if err := send(c, i); err != nil {
					l.Failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < maxRecordedFailures {
						l.failures = append(l.failures, fmt.Sprintf("client %d request %d: %v", c, i, err))
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

// Stop ends the load and waits for every client's last request.
func (l *ClosedLoop) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// Failures are the first failures, for a failed test's message.
func (l *ClosedLoop) Failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.failures...)
}

// PostCompletion posts a /v1/completions body to an OpenAI-style server at
// url and reads the whole answer, returning its status.
func PostCompletion(url string, body []byte) (int, error) {
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}
