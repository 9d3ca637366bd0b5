package fakescript

import (
	"crypto/rand"
	"encoding/hex"
)

// UniquePrefix returns an id prefix for one start of a fake server
// ("s3f9c0a1b2d4e_"): random, so that a restarted server never hands out
// an id the conversation it continues already holds (the real APIs refuse
// a conversation with two tool calls of one id). Servers that must be
// deterministic (tests, replays) keep a fixed prefix instead.
func UniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "s" + hex.EncodeToString(b[:]) + "_"
}
