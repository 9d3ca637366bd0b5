package shell

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Buffer is an io.Writer that keeps the head and the tail of everything
// written to it, up to a limit, and counts what it dropped in between. A
// model learns most from how a command started and how it ended; the middle
// of a long build log is what it can spare. It is safe for concurrent use.
type Buffer struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring of at most limit-len(head) bytes once head is full
	start int    // index of the oldest byte in tail when it is full
	total int64
}

// NewBuffer returns a Buffer keeping at most limit bytes; a limit of zero or
// less keeps everything.
func NewBuffer(limit int) *Buffer { return &Buffer{limit: limit} }

// Write always consumes all of p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if b.limit <= 0 {
		b.head = append(b.head, p...)
		return n, nil
	}
	headCap := b.limit / 2
	if room := headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tailCap := b.limit - headCap
	if len(p) >= tailCap {
		b.tail = append(b.tail[:0], p[len(p)-tailCap:]...)
		b.start = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(b.tail) < tailCap {
			k := min(tailCap-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(b.tail[b.start:], p)
		b.start = (b.start + k) % tailCap
		p = p[k:]
	}
	return n, nil
}

// Len is the number of bytes written so far, kept or not.
func (b *Buffer) Len() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Truncated reports whether bytes were dropped.
func (b *Buffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated()
}

func (b *Buffer) truncated() bool {
	return b.total > int64(len(b.head)+len(b.tail))
}

// String returns what was kept. When bytes were dropped, a note between the
// head and the tail says how many; the cut edges are moved to rune
// boundaries so that the text stays valid UTF-8 where the input was.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := make([]byte, 0, len(b.tail))
	tail = append(tail, b.tail[b.start:]...)
	tail = append(tail, b.tail[:b.start]...)
	if !b.truncated() {
		return string(b.head) + string(tail)
	}
	head := b.head
	// Drop a partial rune at the end of the head and the start of the tail.
	for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
		r, size := utf8.DecodeLastRune(head)
		if r != utf8.RuneError || size != 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	cut := b.total - int64(len(head)+len(tail))
	var s strings.Builder
	s.Write(head)
	fmt.Fprintf(&s, "\n\n[... %d bytes of output cut ...]\n\n", cut)
	s.Write(tail)
	return s.String()
}
