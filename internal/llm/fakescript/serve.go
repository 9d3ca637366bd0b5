package fakescript

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serving is a fake server's life on loopback: started once, closed once,
// with every request in progress counted so Close can wait for them.
type Serving struct {
	mu       sync.Mutex
	srv      *http.Server
	url      string
	done     chan struct{}
	closed   bool
	handlers sync.WaitGroup
}

// Start listens on addr and serves h in a goroutine that Close stops. The
// base URL is http://host:port followed by path. name prefixes errors.
func (s *Serving) Start(name string, h http.Handler, addr, path string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("%s: start: server is closed", name)
	}
	if s.srv != nil {
		return "", fmt.Errorf("%s: start: already started", name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: start: %w", name, err)
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String() + path
	s.done = make(chan struct{})
	srv, done := s.srv, s.done
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return s.url, nil
}

// URL is the base URL Start returned, or "" before it.
func (s *Serving) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Enter counts a request in; false means the server is closed and the
// request must be refused. Every true is followed by Leave.
func (s *Serving) Enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// Leave counts a request out.
func (s *Serving) Leave() { s.handlers.Done() }

// Close stops serving: later requests are refused, stop is called (to end
// what the requests in progress wait for), open connections are broken,
// and Close waits for the serving goroutine and every request. A second
// Close does nothing.
func (s *Serving) Close(stop func()) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	var err error
	if srv != nil {
		err = srv.Close()
		<-done
	}
	s.handlers.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
