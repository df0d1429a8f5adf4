package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/reconciled/reconciled/support"
)

// apiClient talks to a running daemon's support API (/api/v1).
type apiClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// errAPI is an error reply of the support API.
type errAPI struct {
	Status  int
	Code    string
	Message string
}

func (e *errAPI) Error() string {
	if e.Status == http.StatusUnauthorized {
		return "token missing or wrong (give --token or set RECONCILED_TOKEN)"
	}
	return fmt.Sprintf("server said %d %s: %s", e.Status, e.Code, e.Message)
}

// clientFlags adds --server and --token to fs; the returned function builds
// the client once fs is parsed. The token falls back to RECONCILED_TOKEN so
// it need not appear in the process list or shell history.
func clientFlags(fs *flag.FlagSet, getenv func(string) string) func() (*apiClient, error) {
	server := fs.String("server", "http://127.0.0.1:8080", "URL of a running reconciled's HTTP server")
	token := fs.String("token", "", "support API bearer token (default $RECONCILED_TOKEN)")
	return func() (*apiClient, error) {
		u, err := url.Parse(*server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: --server %q is not an http(s) URL", errUsage, *server)
		}
		t := *token
		if t == "" {
			t = getenv("RECONCILED_TOKEN")
		}
		return &apiClient{base: u, token: strings.TrimSpace(t), http: &http.Client{Timeout: 30 * time.Second}}, nil
	}
}

// get GETs path?q and decodes the JSON reply into out.
func (c *apiClient) get(ctx context.Context, path string, q url.Values, out any) error {
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach %s: %w", c.base.Redacted(), err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read reply of %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		var e support.ErrorBody
		if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
			e.Error = support.APIError{Code: "E_HTTP", Message: strings.TrimSpace(firstLine(string(body)))}
		}
		return &errAPI{Status: res.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode reply of %s: %w", path, err)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// isAuth reports a 401: retrying cannot help.
func isAuth(err error) bool {
	var e *errAPI
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// listAll follows next_cursor until the listing ends or max rows (0: all)
// are read.
func (c *apiClient) listAll(ctx context.Context, q url.Values, max int) ([]support.IntentItem, error) {
	q = cloneValues(q)
	page := listPageSize
	if max > 0 && max < page {
		page = max
	}
	q.Set("limit", fmt.Sprint(page))
	var all []support.IntentItem
	for {
		var rep support.ListReply
		if err := c.get(ctx, "/api/v1/intents", q, &rep); err != nil {
			return nil, err
		}
		all = append(all, rep.Intents...)
		if max > 0 && len(all) >= max {
			return all[:max], nil
		}
		if rep.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", rep.NextCursor)
	}
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// listPageSize is the page size listAll asks for: the API's maximum, so a
// full listing takes the fewest round trips. Tests shrink it.
var listPageSize = 1000

// osGetenv is swapped in tests.
var osGetenv = os.Getenv
