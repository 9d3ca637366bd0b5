package llm

import "net/http"

// IdleConnsPerHost is how many idle keep-alive connections a process keeps
// to one model API. net/http keeps two by default: a team whose agents
// call the API at once then closes most connections after each call and
// opens new ones for the next (bench team opened 772 TCP connections for
// 1052 model calls; against a real API each is a TLS handshake too).
const IdleConnsPerHost = 256

// WriteBufferSize is the buffer each connection writes requests through.
// net/http's 4 KiB holds the headers and the start of a body it knows is
// in memory (a bytes.Reader, say); the rest of the body (a conversation,
// tens of KiB) then went to the connection in a copy of its own, through a
// buffer made for each request, as any body it does not know is in memory
// does after the headers. 32 KiB carries the headers and a body of up to
// about 28 KiB in one write (the Anthropic provider hands such bodies over
// in memory).
const WriteBufferSize = 32 << 10

// TuneTransport makes t keep enough idle connections for a team's agents
// calling one API at once. Call it before t carries any request (the
// process's main does it for http.DefaultTransport, which the providers
// use unless given a client).
func TuneTransport(t *http.Transport) {
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	t.WriteBufferSize = WriteBufferSize
	if t.MaxIdleConns != 0 && t.MaxIdleConns < IdleConnsPerHost {
		t.MaxIdleConns = IdleConnsPerHost
	}
}
