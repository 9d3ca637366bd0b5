package fakeapi

// OnRecord sets a function called, outside the server's lock, each time a
// call is finished and recorded, so tests can wait for the server's side
// of a call without sleeping.
func (s *Server) OnRecord(f func(Recorded)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRecord = f
}

// Validate exposes request validation to the fuzz target.
func Validate(body []byte) error {
	_, err := validate(body)
	return err
}

// OnArrive sets a function called when a POST /v1/messages is counted,
// before its body is read.
func (s *Server) OnArrive(f func(n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onArrive = f
}
