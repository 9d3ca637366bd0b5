// Package nats is troupe's store on NATS JetStream, for teams whose members
// run on several machines: rosters and the task board live in key-value
// buckets written by compare-and-set (an atomic batch when a change touches
// several tasks), each inbox is a subject of one stream read through a
// durable consumer per member, and the journal and transcripts are subjects
// of another stream. Watches are core NATS subscriptions and KV watchers:
// nothing polls.
//
// It passes the same storetest suite as the file store. It must never
// import agents, models, tools or the CLI: like package store it moves bytes
// durably and wakes whoever waits for them.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// Scheme is the URL scheme of this store: nats://host:4222 (several
// servers: nats://h1:4222,h2:4222).
const Scheme = "nats"

// Names of the buckets and streams, shared by every team of a server.
const (
	teamsBucket = "troupe_teams"
	tasksBucket = "troupe_tasks"
	inboxStream = "troupe_inbox"
	logStream   = "troupe_log"

	inboxPrefix      = "troupe.in."
	journalPrefix    = "troupe.j."
	transcriptPrefix = "troupe.tr."
)

func init() { store.Register(Scheme, openURL) }

// Options tune a Store.
type Options struct {
	// Token, User/Password, CredsFile (a .creds JWT file) and NKeyFile (an
	// NKEY seed file) authenticate to the server.
	Token, User, Password string
	CredsFile, NKeyFile   string
	// TLSCA, TLSCert and TLSKey are PEM files for TLS (the CA alone to
	// verify the server, cert and key for mutual TLS).
	TLSCA, TLSCert, TLSKey string
	// Replicas is how many servers keep each bucket and stream (1 unless
	// set; 3 on a 3-node cluster).
	Replicas int
	// HeartbeatTTL is how long a member's heartbeat key lives without a
	// new beat (DefaultHeartbeatTTL unless set; at least a second).
	HeartbeatTTL time.Duration
	// Name names the connection on the server (monitoring shows it).
	Name   string
	Logger *slog.Logger
	// Now and NewID are seams for tests. Defaults: time.Now, store.NewID.
	Now   func() time.Time
	NewID func() string
}

// Store is a store on a JetStream server or cluster.
type Store struct {
	nc   *natsgo.Conn
	js   jetstream.JetStream
	opts Options

	teams, tasks jetstream.KeyValue
	beats        jetstream.KeyValue
	inbox, log   jetstream.Stream

	readers  readers
	resolved sync.Map // team generation/name as asked -> member name, for Receive
	mux      replyMux

	mu      sync.Mutex
	closed  bool
	closers []func()
	done    chan struct{}
	caches  map[string]*boardCache // by team generation (boardcache.go)
	// claiming holds, per task key, the end of this client's claim of it
	// under way (claimTurn).
	claiming map[string]chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the servers of servers (a comma-separated list of
// nats:// URLs) and makes sure troupe's buckets and streams exist.
func Open(ctx context.Context, servers string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return store.NewID(time.Now()) }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.HeartbeatTTL <= 0 {
		opts.HeartbeatTTL = DefaultHeartbeatTTL
	}
	opts.HeartbeatTTL = max(opts.HeartbeatTTL.Truncate(time.Second), time.Second)
	nopts := []natsgo.Option{
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250 * time.Millisecond),
		natsgo.RetryOnFailedConnect(false),
	}
	if opts.Name != "" {
		nopts = append(nopts, natsgo.Name(opts.Name))
	}
	if opts.Token != "" {
		nopts = append(nopts, natsgo.Token(opts.Token))
	}
	if opts.User != "" {
		nopts = append(nopts, natsgo.UserInfo(opts.User, opts.Password))
	}
	if opts.CredsFile != "" {
		nopts = append(nopts, natsgo.UserCredentials(opts.CredsFile))
	}
	if opts.NKeyFile != "" {
		o, err := natsgo.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats store: nkey seed %s: %w", opts.NKeyFile, err)
		}
		nopts = append(nopts, o)
	}
	if opts.TLSCA != "" {
		nopts = append(nopts, natsgo.RootCAs(opts.TLSCA))
	}
	if opts.TLSCert != "" || opts.TLSKey != "" {
		nopts = append(nopts, natsgo.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	log := opts.Logger
	// The handlers are set before the Store exists; a reconnect before
	// setup ends has no reader to tell.
	var opened atomic.Pointer[Store]
	nopts = append(nopts,
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				log.Warn("nats store: disconnected", "err", err)
			}
		}),
		natsgo.ReconnectHandler(func(c *natsgo.Conn) {
			log.Info("nats store: reconnected", "server", c.ConnectedUrl())
			if s := opened.Load(); s != nil {
				s.reconnected()
			}
		}),
	)
	nc, err := natsgo.Connect(servers, nopts...)
	if err != nil {
		return nil, fmt.Errorf("nats store: connect to %s: %w", redactURL(servers), err)
	}
	s, err := setup(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats store on %s: %w", redactURL(servers), err)
	}
	opened.Store(s)
	return s, nil
}

func setup(ctx context.Context, nc *natsgo.Conn, opts Options) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s := &Store{nc: nc, js: js, opts: opts, done: make(chan struct{})}
	kv := func(name, desc string) (jetstream.KeyValue, error) {
		b, err := js.KeyValue(ctx, name)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("bucket %s: %w", name, err)
		}
		b, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: desc, History: 1,
			Storage: jetstream.FileStorage, Replicas: opts.Replicas,
		})
		if err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", name, err)
		}
		return b, nil
	}
	if s.teams, err = kv(teamsBucket, "troupe: rosters and archives"); err != nil {
		return nil, err
	}
	if s.tasks, err = kv(tasksBucket, "troupe: task boards"); err != nil {
		return nil, err
	}
	if s.beats, err = js.KeyValue(ctx, beatsBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		s.beats, err = js.CreateOrUpdateKeyValue(ctx, beatsConfig(opts.Replicas))
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s (per-key TTL needs nats-server 2.11 or later): %w", beatsBucket, err)
	}
	// A change to the board may touch several tasks: it is committed as one
	// atomic batch, which the bucket's stream must allow.
	if err := allowAtomic(ctx, js, "KV_"+tasksBucket); err != nil {
		return nil, err
	}
	if err := allowAtomic(ctx, js, "KV_"+teamsBucket); err != nil {
		return nil, err
	}
	stream := func(name string, subjects []string, dups time.Duration) (jetstream.Stream, error) {
		st, err := js.Stream(ctx, name)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		st, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: subjects, Storage: jetstream.FileStorage,
			Replicas: opts.Replicas, Duplicates: dups, AllowDirect: true,
			Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		})
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", name, err)
		}
		return st, nil
	}
	if s.inbox, err = stream(inboxStream, []string{inboxPrefix + ">"}, 10*time.Minute); err != nil {
		return nil, err
	}
	if s.log, err = stream(logStream, []string{journalPrefix + ">", transcriptPrefix + ">"}, 0); err != nil {
		return nil, err
	}
	return s, nil
}

func allowAtomic(ctx context.Context, js jetstream.JetStream, name string) error {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	if cfg.AllowAtomicPublish {
		return nil
	}
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("allow atomic publish on %s (needs nats-server 2.12 or later): %w", name, err)
	}
	return nil
}

// Close closes the connection; blocked calls return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	for _, c := range s.closers {
		c()
	}
	s.nc.Close()
	return nil
}

func (s *Store) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// onClose runs fn when the store closes.
func (s *Store) onClose(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, fn)
}

// Conn is the store's connection, for tools that add to it (status).
func (s *Store) Conn() *natsgo.Conn { return s.nc }

// openURL reads a nats:// URL: the host list, and query parameters token,
// creds, nkey, tls_ca, tls_cert, tls_key and replicas. A token may also be
// the URL's user (nats://TOKEN@host:4222) or come from NATS_TOKEN.
func openURL(ctx context.Context, u *url.URL, cfg store.OpenConfig) (store.Store, error) {
	opts, servers, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	opts.Logger = cfg.Logger
	return Open(ctx, servers, opts)
}

// ParseURL splits a nats:// store URL into the server list nats.go
// connects to and the Options its query sets.
func ParseURL(u *url.URL) (Options, string, error) {
	var opts Options
	if u.Host == "" {
		return opts, "", fmt.Errorf("nats store: no server in %q (want nats://host:4222)", redactURL(u.String()))
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			opts.User, opts.Password = u.User.Username(), p
		} else {
			opts.Token = u.User.Username()
		}
	}
	known := []string{"creds", "nkey", "replicas", "tls_ca", "tls_cert", "tls_key", "token"}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "token":
			opts.Token = v
		case "creds":
			opts.CredsFile = v
		case "nkey":
			opts.NKeyFile = v
		case "tls_ca":
			opts.TLSCA = v
		case "tls_cert":
			opts.TLSCert = v
		case "tls_key":
			opts.TLSKey = v
		case "replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 5 {
				return opts, "", fmt.Errorf("nats store: replicas=%q: want 1 to 5", v)
			}
			opts.Replicas = n
		default:
			return opts, "", fmt.Errorf("nats store: unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	if opts.Token == "" && opts.User == "" {
		opts.Token = os.Getenv("NATS_TOKEN")
	}
	var servers []string
	for h := range strings.SplitSeq(u.Host, ",") {
		servers = append(servers, "nats://"+h)
	}
	if opts.TLSCA != "" || opts.TLSCert != "" {
		for i := range servers {
			servers[i] = "tls://" + strings.TrimPrefix(servers[i], "nats://")
		}
	}
	return opts, strings.Join(servers, ","), nil
}

// redactURL hides a token or password in a URL shown to people.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err == nil && u.Query().Has("token") {
			q := u.Query()
			q.Set("token", "REDACTED")
			u.RawQuery = q.Encode()
			return u.String()
		}
		return raw
	}
	u.User = url.User("REDACTED")
	return u.String()
}

// kvKeyTeam and kvKeyArchive are the keys of the teams bucket.
func kvKeyTeam(name string) string  { return "team." + name }
func kvKeyArchive(id string) string { return "archive." + id }

// token makes a name usable inside a consumer name, where dots are not
// allowed; names never hold "_", so the mapping is one to one.
func token(name string) string { return strings.ReplaceAll(name, ".", "_") }

func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
