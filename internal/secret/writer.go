package secret

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// Writer returns a writer that redacts each Write before passing it to w.
// A secret split across two Writes is not found: it fits the writers it is
// made for (log handlers, encoders and formatters that write a whole line
// or document at once).
func Writer(w io.Writer) io.Writer { return &writer{w: w} }

type writer struct{ w io.Writer }

func (r *writer) Write(p []byte) (int, error) {
	q := RedactBytes(p)
	n, err := r.w.Write(q)
	if err != nil {
		// A short write of the redacted text cannot be mapped back onto
		// p; report nothing written past what surely was.
		return min(n, len(p)), err
	}
	if n < len(q) {
		return min(n, len(p)), io.ErrShortWrite
	}
	return len(p), nil
}

// Handler returns a slog handler that redacts the message and every
// attribute value of each record before h sees it. Values of other kinds
// than strings (errors, structs) are formatted and redacted only when the
// formatted text holds a secret, so that h still sees typed values.
func Handler(h slog.Handler) slog.Handler { return &handler{h: h} }

type handler struct{ h slog.Handler }

func (r *handler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r *handler) Handle(ctx context.Context, rec slog.Record) error {
	if !Any() {
		return r.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return &handler{h: r.h.WithAttrs(red)}
}

func (r *handler) WithGroup(name string) slog.Handler { return &handler{h: r.h.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = redactAttr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(v.Any())
		}
		if r := Redact(s); r != s {
			if _, ok := v.Any().(error); ok {
				return slog.Any(a.Key, errors.New(r))
			}
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
