package llm

import "fmt"

// DefaultMaxReplyBytes is the cap on one reply's content (text, thinking
// and tool input together) when a provider's configuration sets none:
// far above any real reply, low enough that a runaway stream cannot eat
// the machine's memory.
const DefaultMaxReplyBytes = 32 << 20

// ReplyCap counts the content bytes of one streamed reply against a cap.
// The zero value has no cap.
type ReplyCap struct {
	// Max is the cap in bytes; 0 or less means none.
	Max int64
	n   int64
}

// Add counts n more bytes and fails with ErrReplyTooLarge once the total
// passes Max.
func (c *ReplyCap) Add(n int) error {
	c.n += int64(n)
	if c.Max > 0 && c.n > c.Max {
		return fmt.Errorf("%w: the reply passed %s, the cap on one reply (TROUPE_MAX_REPLY_BYTES)", ErrReplyTooLarge, byteSize(c.Max))
	}
	return nil
}

// ReplyCapOf returns the cap a provider should use for configured bytes:
// the default for 0, none for a negative value.
func ReplyCapOf(configured int64) int64 {
	switch {
	case configured == 0:
		return DefaultMaxReplyBytes
	case configured < 0:
		return 0
	}
	return configured
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
