// Package fakeapi is a scripted fake of the Anthropic Messages API, served
// over real HTTP so that the official SDK, with its own parsing, retries and
// stream decoding, is what the tests and the offline demo exercise.
//
// A [Script] (YAML or JSON, see docs/fakeapi.md) lists rules that pick a
// reply by agent name and by the text of the latest user message, and faults
// to inject by call number. The [Server] validates every request the way the
// real API does, answers with the exact JSON or server-sent-event wire format,
// and records what it saw for assertions.
//
// The package must never depend on the rest of troupe (internal/llm
// included): it is the stand-in for the world outside, and it speaks only the
// wire protocol.
package fakeapi
