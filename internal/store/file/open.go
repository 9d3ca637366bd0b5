package file

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// Scheme is the URL scheme of the file store: "file:.troupe" (relative to
// the working directory) or "file:/abs/path/.troupe" ("file:///abs/…" too).
// Query parameters: watch=false turns fsnotify off (Options.DisableWatch);
// poll=<duration> sets Options.PollInterval.
const Scheme = "file"

func init() { store.Register(Scheme, openURL) }

func openURL(ctx context.Context, u *url.URL, cfg store.OpenConfig) (store.Store, error) {
	dir := u.Opaque
	if dir == "" {
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("file store on host %q: only local paths can be opened", u.Host)
		}
		dir = u.Path
	} else if d, err := url.PathUnescape(dir); err == nil {
		dir = d
	}
	if dir == "" {
		return nil, fmt.Errorf("file store: no directory in the URL (file:.troupe or file:/abs/path/.troupe)")
	}
	opts := Options{Logger: cfg.Logger}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "watch":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("file store: watch=%q: want true or false", v)
			}
			opts.DisableWatch = !on
		case "poll":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("file store: poll=%q: want a positive duration such as 1s", v)
			}
			opts.PollInterval = d
		default:
			known := []string{"poll", "watch"}
			slices.Sort(known)
			return nil, fmt.Errorf("file store: unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return Open(dir, opts)
}
