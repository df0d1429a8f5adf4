package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/cli"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/support"
)

// demoMoved says where the demo and the test ledger are: a command of
// their own, so that this binary links no test replica.
const demoMoved = "the demo and the test ledger are not part of reconciled: run them with `go run ./cmd/reconciled-dev demo` and `go run ./cmd/reconciled-dev testledger`"

// serveConfig is everything `reconciled serve` is told: the daemon's
// configuration and what only the command itself uses.
type serveConfig struct {
	daemon.Config
	LogLevel zapcore.Level
	Demo     bool
}

// ledgerFileEntry is one element of --ledgers-file, and the shape a
// --ledger flag is read into: a wire format (the operator's strings, under
// the file's field names), not a configuration type. spec parses it into
// the one ledger configuration, reconcile.LedgerConfig.
type ledgerFileEntry struct {
	CanisterID string `json:"canister_id"`
	TW         string `json:"tw,omitempty"`
	Drift      string `json:"drift,omitempty"`
	Verify     string `json:"verify,omitempty"`
	Minting    string `json:"minting,omitempty"`
	// AllowNarrowWindow accepts a tw/drift narrower than the DFINITY ICRC
	// ledger's 24 h / 60 s, for a ledger whose own window is that narrow.
	AllowNarrowWindow bool `json:"allow_narrow_window,omitempty"`
}

// readSecretFile fills *value from file (trimmed) when file is given; the
// secret may come from the flag or from the file, not both.
func readSecretFile(flagName, file string, value *string) error {
	if file == "" {
		return nil
	}
	if *value != "" {
		return fmt.Errorf("give --%s or --%s-file, not both", flagName, flagName)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--%s-file: %v", flagName, err)
	}
	*value = strings.TrimSpace(string(b))
	if *value == "" {
		return fmt.Errorf("--%s-file %s is empty", flagName, file)
	}
	return nil
}

// ledgerFlags collects repeated --ledger flags.
type ledgerFlags []string

func (l *ledgerFlags) String() string { return strings.Join(*l, " ") }
func (l *ledgerFlags) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// mainnetHosts are the IC's public boundary domains: their root key is the
// one built into agent-go, and a fetched one must never replace it.
var mainnetHosts = []string{"icp-api.io", "ic0.app", "icp0.io"}

func isMainnetHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, m := range mainnetHosts {
		if host == m || strings.HasSuffix(host, "."+m) {
			return true
		}
	}
	return false
}

// envName is the environment variable of a flag: RECONCILED_ and the flag
// name in upper case with '-' as '_'.
func envName(flagName string) string {
	return "RECONCILED_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseServeConfig reads flags, then fills every flag not given from its
// environment variable: a flag wins over the environment. Errors wrap
// errUsage (exit 2).
func parseServeConfig(args []string, getenv func(string) string, stderr interface{ Write([]byte) (int, error) }) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &serveConfig{}
	fs.StringVar(&c.NATSURL, "nats-url", "", "NATS server URL(s); empty: an embedded server with JetStream under <data>/nats")
	fs.StringVar(&c.NATSListen, "nats-listen", "", "embedded server's client listen address (loopback host:port); empty: in-process only")
	fs.StringVar(&c.NATSUser, "nats-user", "", "NATS user")
	fs.StringVar(&c.NATSPassword, "nats-password", "", "NATS password (a flag shows in the process list: prefer the env var or --nats-password-file)")
	passwordFile := fs.String("nats-password-file", "", "file holding the NATS password")
	fs.StringVar(&c.NATSToken, "nats-token", "", "NATS token (prefer the env var or --nats-token-file)")
	natsTokenFile := fs.String("nats-token-file", "", "file holding the NATS token")
	fs.StringVar(&c.NATSCreds, "nats-creds", "", "NATS credentials file (JWT + seed)")
	fs.StringVar(&c.NATSNK, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&c.NATSTLSCA, "nats-tls-ca", "", "CA file to verify the NATS server")
	fs.StringVar(&c.NATSTLSCert, "nats-tls-cert", "", "client certificate for NATS")
	fs.StringVar(&c.NATSTLSKey, "nats-tls-key", "", "client key for NATS")
	fs.StringVar(&c.SubjectPrefix, "subject-prefix", "reconcile", "first token of every subject")
	fs.IntVar(&c.StreamReplicas, "stream-replicas", 1, "replicas of both JetStream streams (1..5; 3 in a 3-node cluster); every instance applies it at start")
	fs.StringVar(&c.ICURL, "ic-url", "https://icp-api.io", "IC HTTP gateway")
	fs.BoolVar(&c.FetchRootKey, "fetch-root-key", false, "fetch the root key from the replica (local test replicas only; refused for mainnet hosts)")
	rootKeyFile := fs.String("root-key-file", "", "root key (hex or DER) the replica's key must equal (test replicas)")
	var ledgers ledgerFlags
	fs.Var(&ledgers, "ledger", "CANISTER[,tw=24h][,drift=2m][,verify=chain|queries][,minting=ACCOUNT][,allow_narrow_window=true] (repeatable; env: ';'-separated; a tw/drift below 24h/60s needs allow_narrow_window)")
	ledgersFile := fs.String("ledgers-file", "", "JSON list of {canister_id, tw, drift, verify, minting, allow_narrow_window}")
	fs.BoolVar(&c.StrictLedgers, "strict-ledgers", false, "intents for canisters no --ledger or --ledgers-file names are refused at intake: a final invalid verdict E_UNKNOWN_LEDGER, without reading the IC")
	fs.StringVar(&c.DataDir, "data", "./reconciled-data", "data directory (created 0700)")
	fs.BoolVar(&c.StoreRecover, "store-recover", false, "a corrupt store is moved aside (reconciled.db.corrupt-<time>, with its -wal and -shm) and an empty one started, which imports the fleet's verdicts from the stream; without it a corrupt store fails the start (exit 65)")
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:8080", "HTTP listen address (health, metrics, support API)")
	fs.StringVar(&c.SupportToken, "support-token", "", "bearer token of the support API (at least 32 bytes)")
	tokenFile := fs.String("support-token-file", "", "file holding the support API's bearer token (at least 32 bytes), read again when it changes; the previous token stays valid for a minute")
	fs.StringVar(&c.ExplorerBlockURL, "explorer-block-url", "", "support page's link to a block: URL template with {ledger} and {block}")
	fs.StringVar(&c.ExplorerAccountURL, "explorer-account-url", "", "support page's link to an account: URL template with {ledger}, {account} (ICRC-1 text) or {account_id} (ICP hex)")
	fs.DurationVar(&c.PollInterval, "poll-interval", 5*time.Second, "follow-up period of watched intents")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", 30*time.Second, "bound of one HTTP request to the IC (a hung replica costs an unreadable verdict, not a stuck intent)")
	fs.IntVar(&c.MaxStrangers, "max-unconfigured-ledgers", daemon.DefaultMaxStrangers, "unconfigured canisters (without --strict-ledgers) followed at once; intents of others are stored unread (unreadable E_UNCONFIGURED_WAIT) until a slot frees")
	fs.IntVar(&c.MaxStrangerOpen, "max-unconfigured-open", daemon.DefaultMaxStrangerOpen, "open intents of one unconfigured canister past which a new one is stored unread (E_UNCONFIGURED_WAIT) and left to the follow-up")
	fs.IntVar(&c.MaxInflight, "max-inflight", daemon.DefaultMaxInflight, "intents handled at once (those of one ledger share one walk down its chain)")
	fs.DurationVar(&c.AckWait, "ack-wait", 10*time.Second, "how long an intent taken by an instance that died waits before another gets it (a live instance's heartbeat keeps its own); the shared consumer takes the value of the instance started last")
	fs.DurationVar(&c.PurgeEvery, "purge-every", time.Second, "shortest time between two purges of intents every consumer has acknowledged from the intent stream (limits retention)")
	fs.DurationVar(&c.Retention, "retention", daemon.DefaultRetention, "how long a final intent stays in the store after its final verdict (then its rows are pruned); a new pod imports only this much of the verdict stream; at least --republish-horizon")
	fs.DurationVar(&c.RepublishHorizon, "republish-horizon", daemon.DefaultRepublishHorizon, "longest time after first sending an intent that a tool layer may re-publish it (the ledger's 24h dedup window and drift); --retention may not be below it")
	fs.DurationVar(&c.BlockCacheMargin, "block-cache-margin", daemon.DefaultBlockCacheMargin, "ledger time of verified blocks cached below the oldest open intent's window and --republish-horizon below each ledger's newest block; older ones are dropped and read again from the ledger if ever needed")
	fs.IntVar(&c.StuckAfter, "stuck-after", 5, "deliveries after which an intent given back for a failure is reported (a warning naming it and the failing step, reconciled_intents_stuck); it is retried regardless")
	fs.IntVar(&c.MaxMessageBytes, "max-message-bytes", queue.MaxIntentBytes, fmt.Sprintf("largest intent accepted (at most %d, the fleet's limit; a larger one is refused with %s)", queue.MaxIntentBytes, queue.RejectTooLarge))
	fs.DurationVar(&c.Grace, "grace", 25*time.Second, "drain period on SIGTERM")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 15*time.Second, "how long a ledger's follow-up lease outlives an instance that vanished without SIGTERM (the instance started last sets it for the fleet)")
	fs.StringVar(&c.Instance, "instance", "", "this instance's name (verdict follower durable); default: host name")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.Demo, "demo", false, "refused, with how to run the demo: it is not part of this binary (go run ./cmd/reconciled-dev demo)")

	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil {
			return
		}
		v := getenv(envName(f.Name))
		if v == "" {
			return
		}
		if f.Name == "ledger" {
			for _, s := range strings.Split(v, ";") {
				if s = strings.TrimSpace(s); s != "" {
					ledgers = append(ledgers, s)
				}
			}
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = fmt.Errorf("%w: %s=%q: %s", errUsage, envName(f.Name), v, expectedForm(f, err))
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if c.Demo {
		// The demo runs the test replica, which the production binary does
		// not link; an old --demo or RECONCILED_DEMO says where it went
		// rather than serving something else.
		return nil, fmt.Errorf("%w: %s", errUsage, demoMoved)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
	}

	u, err := url.Parse(c.ICURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("--ic-url %q is not an http(s) URL", c.ICURL)
	}
	if isMainnetHost(u.Hostname()) {
		if c.FetchRootKey {
			return nil, bad("--fetch-root-key is refused for the mainnet host %s: mainnet uses the built-in root key", u.Hostname())
		}
		if *rootKeyFile != "" {
			return nil, bad("--root-key-file is refused for the mainnet host %s: mainnet uses the built-in root key", u.Hostname())
		}
	}
	if *rootKeyFile != "" {
		if c.RootKey, err = readRootKey(*rootKeyFile); err != nil {
			return nil, bad("--root-key-file: %v", err)
		}
	}

	c.Ledgers = map[string]reconcile.LedgerConfig{}
	for _, s := range ledgers {
		spec, err := parseLedgerSpec(s)
		if err != nil {
			return nil, bad("--ledger %q: %v", s, err)
		}
		c.Ledgers[spec.ID.Encode()] = spec
	}
	if *ledgersFile != "" {
		if err := readLedgersFile(*ledgersFile, c.Ledgers); err != nil {
			return nil, bad("--ledgers-file: %v", err)
		}
	}
	if c.StrictLedgers && len(c.Ledgers) == 0 {
		return nil, bad("--strict-ledgers without any --ledger or --ledgers-file would refuse every intent")
	}

	// Secrets given as files stay out of the process list.
	for _, sf := range []struct {
		flag, file string
		value      *string
	}{
		{"support-token", *tokenFile, &c.SupportToken},
		{"nats-password", *passwordFile, &c.NATSPassword},
	} {
		if err := readSecretFile(sf.flag, sf.file, sf.value); err != nil {
			return nil, bad("%v", err)
		}
	}
	if c.SupportToken != "" {
		if err := support.CheckToken(c.SupportToken); err != nil {
			return nil, bad("--support-token: %v", err)
		}
	}
	// The support token file is read again when it changes (a rotated
	// Secret): the daemon watches it.
	c.SupportTokenFile = *tokenFile
	// The token file is read here to fail the start early, and again at
	// every NATS connection attempt, so a token rotated in the file is
	// taken up at the next reconnect.
	if *natsTokenFile != "" {
		tok := c.NATSToken
		if err := readSecretFile("nats-token", *natsTokenFile, &tok); err != nil {
			return nil, bad("%v", err)
		}
		c.NATSTokenFile = *natsTokenFile
	}
	if c.NATSURL != "" && c.NATSListen != "" {
		return nil, bad("--nats-listen applies to the embedded server only; it cannot be combined with --nats-url")
	}
	if c.NATSListen != "" {
		if err := cli.LoopbackOnly(c.NATSListen); err != nil {
			return nil, bad("--nats-listen: %v", err)
		}
	}
	if c.DataDir == "" {
		return nil, bad("--data must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return nil, bad("--http %q: %v", c.HTTPAddr, err)
	}
	switch {
	case c.PollInterval < 10*time.Millisecond:
		return nil, bad("--poll-interval %s is too short (minimum 10ms)", c.PollInterval)
	case c.QueryTimeout < 100*time.Millisecond || c.QueryTimeout > 5*time.Minute:
		return nil, bad("--query-timeout must be 100ms..5m, got %s", c.QueryTimeout)
	case c.MaxStrangers < 1 || c.MaxStrangers > 100_000:
		return nil, bad("--max-unconfigured-ledgers must be 1..100000, got %d", c.MaxStrangers)
	case c.MaxStrangerOpen < 1 || c.MaxStrangerOpen > 1_000_000:
		return nil, bad("--max-unconfigured-open must be 1..1000000, got %d", c.MaxStrangerOpen)
	case c.MaxInflight < 1 || c.MaxInflight > 1024:
		return nil, bad("--max-inflight must be 1..1024, got %d", c.MaxInflight)
	case c.MaxMessageBytes < 1024 || c.MaxMessageBytes > queue.MaxIntentBytes:
		return nil, bad("--max-message-bytes must be 1024..%d, got %d", queue.MaxIntentBytes, c.MaxMessageBytes)
	case c.Grace <= 0:
		return nil, bad("--grace must be positive, got %s", c.Grace)
	case c.LeaseTTL < time.Second || c.LeaseTTL > 10*time.Minute:
		return nil, bad("--lease-ttl must be 1s..10m, got %s", c.LeaseTTL)
	case c.AckWait < time.Second || c.AckWait > 10*time.Minute:
		return nil, bad("--ack-wait must be 1s..10m, got %s", c.AckWait)
	case c.StuckAfter < 1 || c.StuckAfter > 1000:
		return nil, bad("--stuck-after must be 1..1000, got %d", c.StuckAfter)
	case c.PurgeEvery < 100*time.Millisecond || c.PurgeEvery > time.Minute:
		return nil, bad("--purge-every must be 100ms..1m, got %s", c.PurgeEvery)
	case c.RepublishHorizon <= 0:
		return nil, bad("--republish-horizon must be positive, got %s", c.RepublishHorizon)
	case c.Retention < c.RepublishHorizon:
		return nil, bad("--retention %s is below --republish-horizon %s: an intent re-published after its rows were pruned would be decided again", c.Retention, c.RepublishHorizon)
	case c.BlockCacheMargin < time.Minute:
		return nil, bad("--block-cache-margin must be at least 1m, got %s", c.BlockCacheMargin)
	case c.StreamReplicas < 1 || c.StreamReplicas > 5:
		return nil, bad("--stream-replicas must be 1..5, got %d", c.StreamReplicas)
	}
	if err := c.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if c.Instance == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, bad("--instance not given and no host name: %v", err)
		}
		c.Instance = h
	}
	c.Instance = durableToken(c.Instance)
	return c, nil
}

// expectedForm says what a flag's value should look like; the flag
// package's own error for a number, duration or boolean is only "parse
// error".
func expectedForm(f *flag.Flag, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case time.Duration:
		return "want a duration such as 25s or 1m30s"
	case bool:
		return "want true or false"
	case int, int64, uint, uint64:
		return "want an integer"
	case float64:
		return "want a number"
	}
	return err.Error()
}

// durableToken makes a name usable as a NATS consumer name: anything but
// [A-Za-z0-9_-] becomes '_'.
func durableToken(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// parseLedgerSpec reads
// CANISTER[,tw=D][,drift=D][,verify=M][,minting=ACCOUNT][,allow_narrow_window=B].
func parseLedgerSpec(s string) (reconcile.LedgerConfig, error) {
	parts := strings.Split(s, ",")
	e := ledgerFileEntry{CanisterID: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return reconcile.LedgerConfig{}, fmt.Errorf("option %q is not key=value", p)
		}
		switch k {
		case "tw":
			e.TW = v
		case "drift":
			e.Drift = v
		case "verify":
			e.Verify = v
		case "minting":
			e.Minting = v
		case "allow_narrow_window":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return reconcile.LedgerConfig{}, fmt.Errorf("allow_narrow_window %q: want true or false", v)
			}
			e.AllowNarrowWindow = b
		default:
			return reconcile.LedgerConfig{}, fmt.Errorf("unknown option %q (want tw, drift, verify, minting, allow_narrow_window)", k)
		}
	}
	return e.spec()
}

func (e ledgerFileEntry) spec() (reconcile.LedgerConfig, error) {
	id, err := principal.Decode(e.CanisterID)
	if err != nil {
		return reconcile.LedgerConfig{}, fmt.Errorf("canister id %q: %v", e.CanisterID, err)
	}
	sp := reconcile.LedgerConfig{ID: id, Verify: icrc3.VerifyChain}
	dur := func(name, s string) (time.Duration, error) {
		if s == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s %q is not a positive duration", name, s)
		}
		return d, nil
	}
	if sp.TW, err = dur("tw", e.TW); err != nil {
		return sp, err
	}
	if sp.Drift, err = dur("drift", e.Drift); err != nil {
		return sp, err
	}
	sp.AllowNarrowWindow = e.AllowNarrowWindow
	if err := sp.Validate(); err != nil {
		return sp, err
	}
	switch e.Verify {
	case "", "chain":
	case "queries":
		sp.Verify = icrc3.VerifyQueries
	default:
		return sp, fmt.Errorf("verify %q: want chain or queries", e.Verify)
	}
	if e.Minting != "" {
		a, err := icrc3.ParseAccount(e.Minting)
		if err != nil {
			return sp, fmt.Errorf("minting %q: %v", e.Minting, err)
		}
		sp.MintingOverride = &a
	}
	return sp, nil
}

func readLedgersFile(path string, into map[string]reconcile.LedgerConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var entries []ledgerFileEntry
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for i, e := range entries {
		sp, err := e.spec()
		if err != nil {
			return fmt.Errorf("%s: entry %d: %v", path, i, err)
		}
		into[sp.ID.Encode()] = sp
	}
	return nil
}

// readRootKey accepts the DER key as hex text or as raw bytes.
func readRootKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := b
	if t := strings.TrimSpace(string(b)); t != "" {
		if h, err := hex.DecodeString(t); err == nil {
			key = h
		}
	}
	// A DER BLS12-381 G2 public key: a 37-byte SubjectPublicKeyInfo prefix
	// and the 96-byte key.
	if len(key) != 133 || key[0] != 0x30 {
		return nil, fmt.Errorf("%s: not a DER BLS root key (%d bytes)", path, len(key))
	}
	return key, nil
}
