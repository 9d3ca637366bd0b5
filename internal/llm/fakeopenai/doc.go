// Package fakeopenai is a scripted fake of the OpenAI chat-completions API
// (POST /v1/chat/completions), served over real HTTP so that the official
// openai-go SDK, with its own request encoding and stream decoding, is what
// the tests of the OpenAI-compatible provider exercise.
//
// A [Script] (YAML or JSON, see docs/fakeopenai.md) lists rules that pick a
// reply by agent name (found in the system message) and by the text of the
// latest user and tool messages, and faults to inject by call number. The
// [Server] validates every request the way OpenAI-compatible servers do,
// answers in the exact JSON or server-sent-event wire format (tool-call
// arguments streamed in several pieces, usage in a last chunk when asked),
// and records what it saw for assertions.
//
// The package must never depend on the rest of troupe (internal/llm
// included): it is the stand-in for the world outside, and it speaks only the
// wire protocol.
package fakeopenai
