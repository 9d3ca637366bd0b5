package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/settings"
)

// storeFlags are --store and --store-token.
type storeFlags struct {
	url, token string
}

// addStoreFlags adds the persistent flags that choose the team store.
func (a *app) addStoreFlags(root *cobra.Command) {
	root.PersistentFlags().StringVar(&a.store.url, "store", "", `team store URL: file:DIR (the default: the state directory), or nats://host:4222 for a team on several machines (query: token, creds, nkey, tls_ca, tls_cert, tls_key, replicas; settings: "store"; env: TROUPE_STORE)`)
	root.PersistentFlags().StringVar(&a.store.token, "store-token", "", "token of a nats:// store (default: the URL's, or $NATS_TOKEN)")
}

// storeURL is the store the commands in workspace dir use: --store, else
// $TROUPE_STORE (how a lead hands its store to the teammate processes it
// starts), else the settings' "store"; empty means the file store in the
// state directory. --store-token goes to $NATS_TOKEN, where the nats store
// and the teammate processes find it, and is never printed.
func (a *app) storeURL(dir string) (string, error) {
	if a.store.token != "" {
		secret.Register(a.store.token)
		if err := os.Setenv("NATS_TOKEN", a.store.token); err != nil {
			return "", err
		}
	}
	u := a.store.url
	if u == "" {
		u = os.Getenv("TROUPE_STORE")
	}
	if u == "" {
		s, err := settings.Load(a.settingsOptions(dir))
		if err != nil {
			return "", withCode(ExitUsage, err)
		}
		u = s.Store.Value
	}
	if u != "" {
		secret.RegisterURL(u)
	}
	return u, nil
}

// remoteStore reports whether u names a store other than the file store.
func remoteStore(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Scheme != "" && p.Scheme != "file" && len(p.Scheme) > 1
}

// hubCmd is `troupe hub`.
func (a *app) hubCmd() *cobra.Command {
	var addr, dir, token string
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run an embedded NATS JetStream server for teams on several machines",
		Long: `Runs a real nats-server with JetStream in this process, keeping its data in
--dir, until SIGINT or SIGTERM. Clients authenticate with a token: --token, or
the one kept in DIR/token (made on the first start, kept across restarts).
Point every troupe of the team at it with the --store line it prints.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				sd, err := a.StateDir()
				if err != nil {
					return withCode(ExitUsage, err)
				}
				dir = filepath.Join(sd, "hub")
			}
			h, err := assembly.StartHub(assembly.HubConfig{Addr: addr, Dir: dir, Token: token})
			if err != nil {
				return appError(err)
			}
			defer h.Close()
			setStopNotice("troupe: stopping the hub")
			// The token is printed for the person who started the hub:
			// it is written unredacted, to stderr.
			fmt.Fprintf(a.stderrRaw(), "troupe hub: JetStream on %s, data in %s\n", h.URL, dir)
			fmt.Fprintf(a.stderrRaw(), "troupe hub: use --store %s --store-token %s\n", h.URL, h.Token)
			fmt.Fprintf(a.stderrRaw(), "troupe hub:  or NATS_TOKEN=%s troupe --store %s ...\n", h.Token, h.URL)
			if err := os.WriteFile(filepath.Join(dir, "store-url"), []byte(h.URL+"\n"), 0o600); err != nil {
				return withCode(ExitError, err)
			}
			<-a.ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:4222", "host:port to listen on (0.0.0.0:4222 for other machines)")
	cmd.Flags().StringVar(&dir, "dir", "", "data directory (default: <state dir>/hub)")
	cmd.Flags().StringVar(&token, "token", "", "client token (default: DIR/token, made on the first start)")
	return cmd
}

// stderrRaw is stderr without redaction, for a secret the user must see.
func (a *app) stderrRaw() *os.File { return os.Stderr }
